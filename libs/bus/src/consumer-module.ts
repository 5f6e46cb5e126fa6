import { inTracesOf, validTraceparent, type Module } from '@ofp/runtime';
import type { Bus, SubscribeOptions, Subscription } from './bus.js';
import type { Parking } from './parking.js';

export interface ConsumerModuleOptions {
  readonly name: string;
  /** Work before the first subscription (the projector lays out its read schema). */
  readonly prepare?: () => Promise<void>;
  /** The consumer groups the module runs, each with its handler. */
  readonly subscriptions: readonly SubscribeOptions[];
  /**
   * Parks what a durable group cannot apply, so that one event stops nobody else (API.md §12);
   * transient subscriptions, which keep no progress, are not parked.
   */
  readonly parking?: Parking | undefined;
}

/**
 * A module of bus consumers: it subscribes its groups on start, is ready once all are subscribed, and
 * on stop waits for each group's batch in hand before it lets go. The projector, the process
 * managers, the webhook intake and the revocation feed are each one.
 */
export function consumerModule(bus: Bus, options: ConsumerModuleOptions): Module {
  let subscriptions: Subscription[] = [];
  return {
    name: options.name,
    async start() {
      await options.prepare?.();
      const parking = options.parking;
      await parking?.open();
      subscriptions = await Promise.all(
        options.subscriptions.map((each) => {
          const handle = parking && !each.transient ? parking.guard(each.group, each.handle) : each.handle;
          return bus.subscribe({
            ...each,
            // Each batch continues the traces of its events (API.md §9's ce_traceparent).
            handle: (events) =>
              inTracesOf(
                events.map((event) => validTraceparent(event.metadata.traceparent)),
                `process ${each.group}`,
                'consumer',
                () => handle(events),
                {
                  'messaging.system': bus.system,
                  'messaging.operation.type': 'process',
                  'messaging.consumer.group.name': each.group,
                  'messaging.batch.message_count': events.length,
                },
              ),
          });
        }),
      );
    },
    async stop() {
      const stopping = subscriptions;
      subscriptions = [];
      await Promise.all(stopping.map((subscription) => subscription.stop()));
    },
    ready: () => subscriptions.length === options.subscriptions.length,
  };
}
