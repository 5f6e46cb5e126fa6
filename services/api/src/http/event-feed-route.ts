import { closest } from 'fastest-levenshtein';
import { z } from 'zod';
import { fieldError } from '@ofp/contracts';
import type { AuthContext } from '@ofp/auth-tokens';
import type { EventType } from '@ofp/models';
import type { Operation, Operations, RouteSpec } from '@ofp/http-api';
import { FEED_LIMITS, FEED_RETENTION_DAYS, type EventFeed, type FeedRequest } from '../queries/event-feed.js';

/** An event type of the catalog with the schema of its published body. */
export interface PublishedEventType extends EventType {
  readonly payload: z.ZodType;
}

export interface EventFeedDependencies {
  readonly feed: EventFeed;
  /** Every event type the platform publishes (the webhook catalog, API.md §8). */
  readonly eventTypes: readonly PublishedEventType[];
}

const PARAMETERS = ['starting_after', 'limit', 'type', 'model', 'record_id'] as const;

/** The event types of each model in the catalog. */
function typesByModel(eventTypes: readonly EventType[]): Map<string, string[]> {
  const models = new Map<string, string[]>();
  for (const { type, model } of eventTypes) models.set(model, [...(models.get(model) ?? []), type]);
  return models;
}

/**
 * `GET /v2/events` (docs/events-feed.md): the organization's events in order, for integrators that
 * cannot receive webhooks, with the bodies webhooks carry. Needs `read`.
 */
export function eventFeedRouteSpec(eventTypes: readonly PublishedEventType[]): RouteSpec {
  const models = typesByModel(eventTypes);
  return {
    method: 'GET',
    path: '/v2/events',
    operationId: 'events.list',
    summary: 'List events',
    description:
      "The organization's events, oldest first, with the bodies webhooks carry: for integrators that cannot receive webhooks, or that reconcile. Each page's `next_cursor` goes in `starting_after` to read on; a cursor kept is where a reader resumes. Filtered by `type`, or by `model` and `record_id`. Events are kept 30 days: a cursor older than that is a 410. Needs the `read` scope (docs/events-feed.md).",
    tag: 'events',
    access: { kind: 'bearer', scopes: ['read'] },
    query: {
      names: PARAMETERS,
      schemas: {
        starting_after: {
          description:
            'The `next_cursor` of the page before: this page starts after it. Left out, the feed starts at the oldest event it keeps. Opaque: keep it as it came.',
          schema: z.string().max(100),
          examples: { cursor: { summary: 'A cursor from a previous page', value: 'NzQ1NjMuMTAyMzQ' } },
        },
        limit: {
          description: `Events per page, ${1} to ${FEED_LIMITS.maxLimit}`,
          schema: z.int().min(1).max(FEED_LIMITS.maxLimit).default(FEED_LIMITS.defaultLimit),
          examples: { hundred: { summary: 'A hundred events', value: 100 } },
        },
        type: {
          description: `Only events of these types, comma-separated (at most ${FEED_LIMITS.maxTypes}; \`GET /v2/webhook_event_types\` lists them)`,
          schema: z
            .array(z.enum([...eventTypes.map(({ type }) => type)] as [string, ...string[]]))
            .min(1)
            .max(FEED_LIMITS.maxTypes),
          examples: {
            orders: {
              summary: 'Cancelled and shipped orders',
              value: ['order.cancelled', 'fulfillment_order.shipped'],
            },
          },
        },
        model: {
          description: 'Only events of records of this model (`orders`, `people`, ...)',
          schema: z.enum([...models.keys()] as [string, ...string[]]),
          examples: { orders: { summary: 'Orders only', value: 'orders' } },
        },
        record_id: {
          description: 'With `model`: only the events of the record with this id, in its version order',
          schema: z.int().min(1),
          examples: { one: { summary: 'Record 42', value: 42 } },
        },
      },
    },
    responses: {
      200: { description: 'A page of events, oldest first', schema: eventsPageSchema(eventTypes) },
    },
    errors: [410],
  };
}

/** What serves {@link eventFeedRouteSpec}. */
export function eventFeedOperations(deps: EventFeedDependencies): Operations {
  const known = new Set(deps.eventTypes.map(({ type }) => type));
  const models = typesByModel(deps.eventTypes);
  const list: Operation<AuthContext> = {
    handle: async (request) => {
      const page = await deps.feed.page(
        feedRequest(request.principal.orgId, request.query, { known, models }),
      );
      return {
        status: 200,
        body: `{"count":${page.payloads.length},"results":[${page.payloads.join(',')}],"errors":null,"has_more":${page.hasMore},"next_cursor":${JSON.stringify(page.nextCursor)}}`,
      };
    },
  };
  return { 'events.list': list };
}

/** The request a feed query names; a value it cannot take is a 400 naming the parameter. */
function feedRequest(
  orgId: number,
  query: Readonly<Record<string, string | undefined>>,
  catalog: { readonly known: ReadonlySet<string>; readonly models: ReadonlyMap<string, readonly string[]> },
): FeedRequest {
  const invalid = (parameter: string, message: string) => fieldError('Invalid', parameter, message);
  let limit: number = FEED_LIMITS.defaultLimit;
  if (query.limit !== undefined) {
    if (
      !/^\d{1,4}$/.test(query.limit) ||
      Number(query.limit) < 1 ||
      Number(query.limit) > FEED_LIMITS.maxLimit
    )
      throw invalid('limit', `must be an integer from 1 to ${FEED_LIMITS.maxLimit}`);
    limit = Number(query.limit);
  }
  let types: string[] | undefined;
  if (query.type !== undefined) {
    types = query.type.split(',').map((type) => type.trim());
    if (types.length > FEED_LIMITS.maxTypes)
      throw invalid('type', `names at most ${FEED_LIMITS.maxTypes} event types`);
    for (const type of types) {
      if (!catalog.known.has(type))
        throw invalid(
          'type',
          `${JSON.stringify(type)} is not an event type; did you mean ${closest(type, [...catalog.known])}?`,
        );
    }
  }
  let record: FeedRequest['record'];
  if (query.model !== undefined) {
    const modelTypes = catalog.models.get(query.model);
    if (modelTypes === undefined)
      throw invalid(
        'model',
        `${JSON.stringify(query.model)} is not a model; one of ${[...catalog.models.keys()].join(', ')}`,
      );
    if (query.record_id !== undefined) {
      if (!/^[1-9]\d{0,14}$/.test(query.record_id)) throw invalid('record_id', 'must be a positive integer');
      record = { model: query.model, id: Number(query.record_id) };
    } else {
      types = (types ?? modelTypes).filter((type) => modelTypes.includes(type));
    }
  } else if (query.record_id !== undefined) {
    throw invalid('record_id', 'needs model, the model of the record');
  }
  return {
    orgId,
    limit,
    ...(query.starting_after === undefined ? {} : { startingAfter: query.starting_after }),
    ...(types === undefined ? {} : { types }),
    ...(record === undefined ? {} : { record }),
  };
}

let eventsPage: z.ZodType | undefined;

/** The page's schema: each event is one of the catalog's bodies (zod ids are global: built once). */
function eventsPageSchema(eventTypes: readonly PublishedEventType[]): z.ZodType {
  return (eventsPage ??= z
    .strictObject({
      count: z.int().min(0).describe('Events in this page'),
      results: z
        .array(z.union(eventTypes.map(({ payload }) => payload) as unknown as [z.ZodType, z.ZodType]))
        .describe('The events, oldest first, each exactly as a webhook delivery of it carries it'),
      errors: z.null().describe('null: errors come in the error envelope'),
      has_more: z
        .boolean()
        .describe(
          'Whether more events may follow already: ask again at once with next_cursor; false: poll later',
        ),
      next_cursor: z
        .string()
        .describe('Where the next page starts: pass it as starting_after, now or later (keep it to resume)'),
    })
    .meta({
      id: 'EventsPage',
      description: `A page of the events feed: the organization's events of the last ${FEED_RETENTION_DAYS} days, in order`,
      examples: [
        {
          count: 1,
          results: eventTypes
            .map(({ payload }) => z.globalRegistry.get(payload)?.examples?.[0 as never] as unknown)
            .filter((example) => example !== undefined)
            .slice(0, 1),
          errors: null,
          has_more: false,
          next_cursor: 'NzQ1NjMuMTAyMzQ',
        },
      ],
    }));
}
