import pg from 'pg';
import { PROJECTION_CHANNEL, projectedVersions } from '@ofp/models';
import type { Logger, Pool } from '@ofp/runtime';

interface Waiter {
  streamId: string;
  version: number;
  resolve: (caughtUp: boolean) => void;
  timer: NodeJS.Timeout;
}

/**
 * Read-your-writes (API.md §5): a write's response waits until the projector has applied the
 * written stream version. All pending waits are checked together with one query whenever the
 * projector announces progress, and at a short interval in case a notification was missed.
 */
export class ProjectionWaiter {
  private readonly waiters = new Set<Waiter>();
  private listener: pg.Client | undefined;
  private checking = false;
  private recheck = false;
  private poller: NodeJS.Timeout | undefined;

  constructor(
    private readonly pool: Pool,
    private readonly connectionString: string,
    private readonly logger: Logger,
    private readonly options: { timeoutMs: number; pollIntervalMs: number },
  ) {}

  async start(): Promise<void> {
    const listener = new pg.Client({
      connectionString: this.connectionString,
      application_name: 'projection-waiter',
    });
    listener.on('notification', () => void this.check());
    listener.on('error', (error) =>
      this.logger.warn({ err: error }, 'projection listener lost; polling only'),
    );
    await listener.connect();
    await listener.query(`LISTEN ${PROJECTION_CHANNEL}`);
    this.listener = listener;
    this.poller = setInterval(() => void this.check(), this.options.pollIntervalMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.poller);
    for (const waiter of this.waiters) this.settle(waiter, false);
    await this.listener?.end().catch(() => {});
  }

  /** Resolves true once `streamId` is projected at `version` or later, false after the timeout. */
  waitFor(streamId: string, version: number): Promise<boolean> {
    return new Promise((resolve) => {
      const waiter: Waiter = {
        streamId,
        version,
        resolve,
        timer: setTimeout(() => {
          this.logger.warn({ streamId, version }, 'read model did not catch up in time; answering anyway');
          this.settle(waiter, false);
        }, this.options.timeoutMs),
      };
      this.waiters.add(waiter);
      void this.check();
    });
  }

  private settle(waiter: Waiter, caughtUp: boolean): void {
    clearTimeout(waiter.timer);
    this.waiters.delete(waiter);
    waiter.resolve(caughtUp);
  }

  private async check(): Promise<void> {
    if (this.waiters.size === 0) return;
    if (this.checking) {
      this.recheck = true;
      return;
    }
    this.checking = true;
    try {
      do {
        this.recheck = false;
        const pending = [...this.waiters];
        const projected = await projectedVersions(this.pool, [...new Set(pending.map((w) => w.streamId))]);
        for (const waiter of pending) {
          if ((projected.get(waiter.streamId) ?? 0) >= waiter.version) this.settle(waiter, true);
        }
      } while (this.recheck && this.waiters.size > 0);
    } catch (error) {
      this.logger.warn({ err: error }, 'projection check failed');
    } finally {
      this.checking = false;
    }
  }
}
