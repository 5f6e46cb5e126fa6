import { consumerModule, type Bus, type Parking } from '@ofp/bus';
import type { RecordChange } from '@ofp/contracts';
import type { StoredEvent } from '@ofp/event-store';
import { currentTraceparent, validTraceparent, type Logger, type Module } from '@ofp/runtime';
import type { EventMetadata } from '../commands/record-store.js';

/**
 * A bus consumer that turns one aggregate's events into commands on others (an order's status from
 * its fulfillment orders' shipments, inventory from adjustments, fulfillment and purchase orders).
 * Handling an event it handled before changes nothing: delivery is at least once.
 */
export interface ProcessManager {
  /** Also its consumer group's name, after `process-manager.`. */
  readonly name: string;
  readonly streamTypes: readonly string[];
  /** The stream types it appends to. */
  readonly derives: readonly string[];
  handle(event: StoredEvent): Promise<void>;
  /**
   * The streams that handling `event` appends to (read-your-writes waits until the read model shows
   * them). Asked once the event was handled, so the records it created exist.
   */
  appendsTo(event: SourceEvent): Promise<readonly string[]>;
}

/**
 * The metadata of the changes a manager makes for `event`: the system's, named after the event, in
 * the trace of the change that caused them (the active span's, which continues it, else the event's).
 */
export function followOnMetadata(manager: string, event: StoredEvent): EventMetadata {
  return {
    actor: 'system',
    requestId: `${manager}:${event.eventId}`,
    traceparent: currentTraceparent() ?? validTraceparent(event.metadata.traceparent),
  };
}

/**
 * A process manager's name and the stream types it reacts to, declared apart from the manager so that
 * who reads what is known without building one ({@link PROCESS_MANAGER_SUBSCRIPTIONS}).
 */
export interface ProcessManagerSubscription {
  readonly name: string;
  readonly streamTypes: readonly string[];
}

/** The consumer group of the process manager named `name`. */
export function processManagerGroup(name: string): string {
  return `process-manager.${name}`;
}

/** What a manager reads of an event. */
export type SourceEvent = Pick<StoredEvent<RecordChange>, 'streamId' | 'streamType' | 'orgId' | 'data'>;

/**
 * Runs process managers as bus consumers, each in its own consumer group. Events of a batch are
 * handled one after another, in the bus's order, so one stream's events are applied in order.
 */
export function processManagersModule(
  bus: Bus,
  managers: readonly ProcessManager[],
  logger: Logger,
  parking?: Parking,
): Module {
  // Read-your-writes follows one step from a write to what managers append: a follow-on change must
  // lead to no further one.
  for (const manager of managers)
    for (const type of manager.derives)
      if (managers.some((other) => other.streamTypes.includes(type)))
        throw new Error(`${manager.name} appends to ${type}, which a process manager reacts to`);
  return consumerModule(bus, {
    name: 'process-managers',
    parking,
    subscriptions: managers.map((manager) => ({
      group: processManagerGroup(manager.name),
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
