import { randomUUID } from 'node:crypto';
import { baseError, fieldError, recordStreamId, type RecordJson } from '@ofp/contracts';
import { handleCommand, type Decided, type EventStore } from '@ofp/event-store';
import { deleteRecord, eventPayload, getRecord, writeRecord, type Queryable } from '@ofp/models';
import { TEST_EVENT_TYPE, webhookDeliveries, webhooks } from '../models.js';
import { inTransaction, type Pool, type PoolClient, type SecretsKeyring } from '@ofp/runtime';
import type { CommitWith, DeliveryQueue } from '../delivery/delivery-queue.js';
import { generateSecret } from '../delivery/signing.js';
import { TABLES, endpointSecretContext } from '../schema.js';
import type { UrlPolicy } from './url-policy.js';
import {
  decide,
  toApiRecord,
  toStoredRecord,
  type DisableReason,
  type WebhookCommand,
  type WebhookEvent,
  type WebhookFields,
} from './webhook-decider.js';

/** API.md §8: after a rotation, the previous secret signs too for 24 hours. */
export const ROTATION_GRACE_MS = 24 * 3_600_000;

/** API.md §8: `recover` reaches at most 14 days back. */
export const RECOVERY_WINDOW_MS = 14 * 24 * 3_600_000;

/** Who asks for a change: the token's organization and client, and the request. */
export interface Requester {
  readonly orgId: number;
  readonly clientId: string;
  readonly requestId: string;
}

/** A webhook with its secret: what only create and rotate_secret answer. */
export interface WebhookWithSecret {
  readonly record: RecordJson;
  readonly secret: string;
}

/** The dispatcher itself, as the author of the changes it makes. */
const DISPATCHER = 'webhook-dispatcher';

/**
 * The write side of the `webhooks` model. Each change appends its event (`webhook.created|updated|
 * deleted|disabled`, stream `webhooks-<id>`, the record without its secret) and, in the same
 * transaction, writes the registry table and the endpoint's secrets and health, so that what GET shows,
 * what is delivered and what the event store says never disagree. Each change a request asks for
 * takes a `commitWith`, given the change's result in its transaction: what the request answers, and
 * records for its Idempotency-Key (API.md §5), commits with the change or not at all.
 */
export class WebhookCommands {
  constructor(
    private readonly pool: Pool,
    private readonly store: EventStore,
    private readonly queue: DeliveryQueue,
    private readonly urls: UrlPolicy,
    private readonly clock: () => Date,
    private readonly secrets: SecretsKeyring,
  ) {}

  /** The organization's webhook `id` in its API form, or undefined. */
  async get(orgId: number, id: number, db: Queryable = this.pool): Promise<RecordJson | undefined> {
    const stored = await getRecord(db, webhooks, orgId, id, TABLES);
    return stored && toApiRecord(stored);
  }

  async create(
    requester: Requester,
    fields: Partial<WebhookFields>,
    chosenId?: number,
    commitWith?: CommitWith<WebhookWithSecret>,
  ): Promise<WebhookWithSecret> {
    await this.checkUrl(fields.url);
    const secret = generateSecret();
    const record = await handleCommand(this.store, {
      load: async () => ({ id: chosenId ?? (await this.nextId()), at: this.now() }),
      decide: ({ id, at }) =>
        this.decided(
          requester,
          id,
          undefined,
          decide({ kind: 'create', id, fields, at }, undefined),
          async (client, record) => {
            await client.query(
              'INSERT INTO webhooks.endpoints (webhook_id, org_id, secret) VALUES ($1, $2, $3)',
              [id, requester.orgId, this.secrets.seal(secret, endpointSecretContext(id))],
            );
            await commitWith?.(client, { record, secret });
          },
        ),
      onRace: () => {
        // Any organization's webhook, deleted ones included, keeps its id (API.md §5: "the id is taken").
        if (chosenId !== undefined) throw fieldError('Conflict', 'id', 'has already been taken');
      },
    });
    return { record, secret };
  }

  async update(
    requester: Requester,
    id: number,
    fields: Partial<WebhookFields>,
    ifMatch?: readonly number[],
    commitWith?: CommitWith<RecordJson>,
  ): Promise<RecordJson> {
    await this.checkUrl(fields.url);
    const command = (at: string): WebhookCommand => ({
      kind: 'update',
      fields,
      at,
      ...(ifMatch === undefined ? {} : { ifMatch }),
    });
    return this.change(requester, id, ifMatch, command, commitWith);
  }

  async delete(
    requester: Requester,
    id: number,
    ifMatch?: readonly number[],
    commitWith?: CommitWith<RecordJson>,
  ): Promise<RecordJson> {
    const command = (at: string): WebhookCommand => ({
      kind: 'delete',
      at,
      ...(ifMatch === undefined ? {} : { ifMatch }),
    });
    return this.change(requester, id, ifMatch, command, commitWith);
  }

  /**
   * Disables an endpoint on the dispatcher's own decision (a 410, or 5 days of failures) and clears the
   * request for it; `webhook.disabled` then reaches the organization's other endpoints (API.md §8).
   */
  async disable(webhookId: number, reason: DisableReason): Promise<void> {
    const { rows } = await this.pool.query<{ org_id: number }>(
      'SELECT org_id FROM webhooks.endpoints WHERE webhook_id = $1 AND disable_reason IS NOT NULL',
      [webhookId],
    );
    const orgId = rows[0]?.org_id;
    if (orgId === undefined) return;
    const requester: Requester = { orgId, clientId: DISPATCHER, requestId: `disable:${reason}` };
    await this.change(requester, webhookId, undefined, (at) => ({ kind: 'disable', reason, at }));
    // The disable's own transaction cleared the request; an endpoint its owner had disabled already
    // decides no event, and its request is done all the same.
    await this.pool.query('UPDATE webhooks.endpoints SET disable_reason = NULL WHERE webhook_id = $1', [
      webhookId,
    ]);
  }

  /** A new secret; the previous one keeps signing for {@link ROTATION_GRACE_MS} (API.md §8). */
  async rotateSecret(
    orgId: number,
    id: number,
    commitWith?: CommitWith<WebhookWithSecret>,
  ): Promise<WebhookWithSecret> {
    const secret = generateSecret();
    return inTransaction(this.pool, async (client) => {
      const { rowCount } = await client.query(
        `UPDATE webhooks.endpoints
            SET previous_secret = secret, previous_secret_expires_at = $3, secret = $4
          WHERE webhook_id = $1 AND org_id = $2`,
        [
          id,
          orgId,
          new Date(this.clock().getTime() + ROTATION_GRACE_MS),
          this.secrets.seal(secret, endpointSecretContext(id)),
        ],
      );
      const record = rowCount === 1 ? await this.get(orgId, id, client) : undefined;
      if (!record) throw baseError('NotFound', `webhook ${id} not found`);
      await commitWith?.(client, { record, secret });
      return { record, secret };
    });
  }

  /**
   * Queues one `webhook.test` event for this endpoint alone (API.md §8), disabled or not: a subscriber
   * may check that an endpoint works again before enabling it. Returns the delivery's id.
   */
  async sendTest(orgId: number, id: number, commitWith?: CommitWith<number>): Promise<number> {
    const record = await this.get(orgId, id);
    if (!record) throw baseError('NotFound', `webhook ${id} not found`);
    const now = this.clock();
    const eventId = randomUUID();
    const [deliveryId] = await this.queue.enqueue(
      [
        {
          orgId,
          webhookId: id,
          eventId,
          eventType: TEST_EVENT_TYPE,
          streamId: null,
          sequence: null,
          payload: eventPayload({
            id: eventId,
            type: TEST_EVENT_TYPE,
            timestamp: now,
            sequence: record.version,
            change: { record, previous: {}, deleted: false },
          }),
        },
      ],
      now,
      {
        includeDisabled: true,
        commitWith: async (client, [queued]) => {
          // Deleted meanwhile: nothing was queued.
          if (queued === undefined) throw baseError('NotFound', `webhook ${id} not found`);
          await commitWith?.(client, queued);
        },
      },
    );
    return deliveryId!;
  }

  /**
   * Re-sends every given-up delivery of the endpoint queued since `since`, at most
   * {@link RECOVERY_WINDOW_MS} back (API.md §8). Returns how many.
   */
  async recover(orgId: number, id: number, since: Date, commitWith?: CommitWith<number>): Promise<number> {
    const now = this.clock();
    if (since.getTime() < now.getTime() - RECOVERY_WINDOW_MS)
      throw fieldError('Unprocessable', 'since', 'must be at most 14 days ago');
    if (since.getTime() > now.getTime())
      throw fieldError('Unprocessable', 'since', 'must not be in the future');
    await this.enabledEndpoint(orgId, id);
    return this.queue.recover(orgId, id, since, now, async (client, recovered) => {
      // Disabled meanwhile: nothing was queued again, and the answer says why.
      if (recovered === 0) await this.enabledEndpoint(orgId, id, client);
      await commitWith?.(client, recovered);
    });
  }

  /** The organization's delivery `id`, or undefined. */
  async delivery(orgId: number, id: number, db: Queryable = this.pool): Promise<RecordJson | undefined> {
    return (await getRecord(db, webhookDeliveries, orgId, id, TABLES)) as RecordJson | undefined;
  }

  /** Sends a finished delivery again, in a new round of attempts (API.md §8 `retry`). */
  async retryDelivery(orgId: number, id: number, commitWith?: CommitWith<void>): Promise<void> {
    const current = await this.delivery(orgId, id);
    if (!current) throw baseError('NotFound', `webhook_delivery ${id} not found`);
    if (current.status !== 'succeeded' && current.status !== 'failed')
      throw fieldError('Conflict', 'status', `cannot retry a delivery that is ${String(current.status)}`);
    const webhookId = Number(current.webhook_id);
    await this.enabledEndpoint(orgId, webhookId);
    await this.queue.retry(orgId, id, this.clock(), async (client, requeued) => {
      if (requeued !== 1) {
        await this.enabledEndpoint(orgId, webhookId, client);
        throw fieldError('Conflict', 'status', 'the delivery was queued again meanwhile');
      }
      await commitWith?.(client);
    });
  }

  /** The endpoint `id`, which must exist and be enabled for its deliveries to be sent again. */
  async enabledEndpoint(orgId: number, id: number, db: Queryable = this.pool): Promise<RecordJson> {
    const record = await this.get(orgId, id, db);
    if (!record) throw baseError('NotFound', `webhook ${id} not found`);
    if (record.enabled !== true)
      throw fieldError('Conflict', 'enabled', 'the webhook is disabled: enable it before sending again');
    return record;
  }

  private async change(
    requester: Requester,
    id: number,
    ifMatch: readonly number[] | undefined,
    command: (at: string) => WebhookCommand,
    commitWith?: CommitWith<RecordJson>,
  ): Promise<RecordJson> {
    return handleCommand(this.store, {
      load: async () => ({ current: await this.get(requester.orgId, id), at: this.now() }),
      decide: ({ current, at }): Decided<RecordJson> => {
        const event = decide(command(at), current);
        if (!event) {
          if (!current) throw baseError('NotFound', `webhook ${id} not found`);
          return {
            appends: [],
            outcome: () => current,
            ...(commitWith && { alsoInTransaction: (client: PoolClient) => commitWith(client, current) }),
          };
        }
        return this.decided(requester, id, current, event, async (client, record) => {
          await this.alongside(client, id, event);
          await commitWith?.(client, record);
        });
      },
      onRace: () => {
        if (ifMatch !== undefined)
          throw baseError(
            'PreconditionFailed',
            'The webhook was changed concurrently; If-Match no longer matches',
          );
      },
    });
  }

  /** The endpoint's secrets, health and queue follow the record's change, in its transaction. */
  private async alongside(client: PoolClient, id: number, event: WebhookEvent): Promise<void> {
    const { record, previous, deleted } = event.data;
    const now = this.clock();
    if (deleted) {
      await this.queue.abandon(client, id, 'endpoint deleted', now);
      await client.query(
        `WITH rate AS (DELETE FROM webhooks.endpoint_rates WHERE webhook_id = $1)
         DELETE FROM webhooks.endpoints WHERE webhook_id = $1`,
        [id],
      );
    } else if (previous.enabled === true && record.enabled === false) {
      await this.queue.abandon(client, id, 'endpoint disabled', now);
      await client.query('UPDATE webhooks.endpoints SET disable_reason = NULL WHERE webhook_id = $1', [id]);
    } else if (previous.enabled === false && record.enabled === true) {
      // A fresh start: the failures that led to the disable no longer count towards the next one.
      await client.query(
        'UPDATE webhooks.endpoints SET failing_since = NULL, disable_reason = NULL WHERE webhook_id = $1',
        [id],
      );
    }
    if (!deleted && Object.hasOwn(previous, 'rate_limit')) await this.queue.respace(client, id);
  }

  /**
   * The event's append, with the registry table's row (and `alsoInTransaction`) written in its
   * transaction, so that what GET shows, what is delivered and what the event store says never
   * disagree.
   */
  private decided(
    requester: Requester,
    id: number,
    current: RecordJson | undefined,
    event: WebhookEvent | undefined,
    alsoInTransaction: (client: PoolClient, record: RecordJson) => Promise<void>,
  ): Decided<RecordJson> {
    if (!event) throw new Error('a create always decides an event');
    const { record, deleted } = event.data;
    const { orgId } = requester;
    return {
      appends: [
        {
          streamId: recordStreamId(webhooks.name, id),
          streamType: webhooks.name,
          expectedVersion: current?.version ?? 0,
          orgId,
          events: [
            {
              eventId: randomUUID(),
              type: event.type,
              data: event.data,
              metadata: { actor: requester.clientId, request_id: requester.requestId },
            },
          ],
        },
      ],
      alsoInTransaction: async (client) => {
        try {
          if (deleted) await deleteRecord(client, webhooks, orgId, id, record.version, TABLES);
          else await writeRecord(client, webhooks, orgId, toStoredRecord(record), TABLES);
        } catch (error) {
          const { code, constraint } = error as { code?: string; constraint?: string };
          if (code === '23505' && constraint === 'webhooks_external_id')
            throw fieldError('Conflict', 'external_id', 'has already been taken');
          throw error;
        }
        await alsoInTransaction(client, record);
      },
      outcome: () => record,
    };
  }

  private async checkUrl(url: string | undefined): Promise<void> {
    if (url === undefined) return;
    const problem = await this.urls.problem(url);
    if (problem !== undefined) throw fieldError('Unprocessable', 'url', problem);
  }

  private async nextId(): Promise<number> {
    const { rows } = await this.pool.query<{ id: number }>("SELECT nextval('webhooks.webhook_ids') AS id");
    return rows[0]!.id;
  }

  private now(): string {
    return this.clock().toISOString();
  }
}
