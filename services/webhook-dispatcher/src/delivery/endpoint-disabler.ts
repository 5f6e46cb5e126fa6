import type { Logger, Pool } from '@ofp/runtime';
import type { WebhookCommands } from '../subscriptions/webhook-commands.js';
import type { DisableReason } from '../subscriptions/webhook-decider.js';
import type { DeliveryMetrics } from './delivery-metrics.js';
import { RunsInTurn } from './runs-in-turn.js';

/**
 * Carries out the disables that recorded attempts asked for (`webhooks.endpoints.disable_reason`): a
 * 410, or 5 days of failures (API.md §8). One run at a time; a request during a run gets another run.
 * Also run at start, for requests a process left behind when it died.
 */
export class EndpointDisabler {
  private readonly runs = new RunsInTurn(() => this.run());

  constructor(
    private readonly pool: Pool,
    private readonly commands: WebhookCommands,
    private readonly logger: Logger,
    private readonly metrics?: DeliveryMetrics,
  ) {}

  request(): void {
    this.runs.request();
  }

  /** Resolves once no run is under way. */
  async idle(): Promise<void> {
    await this.runs.idle();
  }

  private async run(): Promise<void> {
    const { rows } = await this.pool
      .query<{ webhook_id: number; disable_reason: DisableReason }>(
        'SELECT webhook_id, disable_reason FROM webhooks.endpoints WHERE disable_reason IS NOT NULL',
      )
      .catch((error: unknown) => {
        this.logger.error({ err: error }, 'reading endpoints to disable failed');
        return { rows: [] };
      });
    for (const { webhook_id: webhookId, disable_reason: reason } of rows) {
      try {
        await this.commands.disable(webhookId, reason);
        this.metrics?.disabled(reason);
        this.logger.warn({ webhook_id: webhookId, reason }, 'webhook endpoint disabled');
      } catch (error) {
        this.logger.error({ err: error, webhook_id: webhookId }, 'disabling a webhook endpoint failed');
      }
    }
  }
}
