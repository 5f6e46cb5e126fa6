import { consumerModule, type Bus } from '@ofp/bus';
import type { StoredEvent } from '@ofp/event-store';
import type { Logger, Module } from '@ofp/runtime';

/**
 * A bus consumer that turns one aggregate's events into commands on others (an order's status from
 * its fulfillment orders' shipments, inventory from adjustments, fulfillment and purchase orders).
 * Handling an event it handled before changes nothing: delivery is at least once.
 */
export interface ProcessManager {
  /** Also its consumer group's name, after `process-manager.`. */
  readonly name: string;
  readonly streamTypes: readonly string[];
  handle(event: StoredEvent): Promise<void>;
}

/**
 * Runs process managers as bus consumers, each in its own consumer group. Events of a batch are
 * handled one after another, in the bus's order, so one stream's events are applied in order.
 */
export function processManagersModule(bus: Bus, managers: readonly ProcessManager[], logger: Logger): Module {
  return consumerModule(bus, {
    name: 'process-managers',
    dependsOn: ['database'],
    subscriptions: managers.map((manager) => ({
      group: `process-manager.${manager.name}`,
      streamTypes: manager.streamTypes,
      handle: async (events) => {
        for (const event of events) {
          try {
            await manager.handle(event);
          } catch (error) {
            logger.warn(
              { err: error, manager: manager.name, event: event.eventId },
              'process manager failed',
            );
            throw error;
          }
        }
      },
    })),
  });
}
