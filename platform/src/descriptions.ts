import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { z } from 'zod';
import { apiServiceRouteSpecs } from '@ofp/api';
import { authServiceRouteSpecs, oauthErrorSchema } from '@ofp/auth';
import type { SCOPES } from '@ofp/auth-tokens';
import { CLOUDEVENTS_HEADERS } from '@ofp/bus';
import { errorEnvelopeSchema, recordStreamId } from '@ofp/contracts';
import { MODELS, eventExample, recordSchema, schemaName, type ModelDefinition } from '@ofp/models';
import {
  ComponentSchemas,
  PUBLIC,
  bindRoutes,
  openApiDocument,
  type Operations,
  type Route,
  type RouteSpec,
} from '@ofp/http-api';
import { dispatcherRouteSpecs, eventCatalog } from '@ofp/webhook-dispatcher';
import { platformConfigSchema } from './config.js';
import { DATA_SCHEMAS } from './streams.js';

type Json = Record<string, unknown>;

/** The published descriptions of the platform (API.md §9, §11). */
export interface PlatformDescriptions {
  readonly openapi: Json;
  readonly asyncapi: Json;
}

const VERSION = '2';

/** What a scope allows (API.md §7). */
const SCOPE_DESCRIPTIONS: Record<(typeof SCOPES)[number], string> = {
  read: 'Every GET',
  write:
    "Writes of the integrator's records: people, phone number types, items, orders, fulfillment orders, purchase orders, inventory adjustments, webhooks",
  operations: "The fulfillment operator's writes: shipments, fulfillment status, receiving, invoices",
};

/**
 * The OpenAPI and AsyncAPI documents of the whole platform, generated from the route specs of every
 * service (data: nothing is built or connected to describe them) and from the model registry. Every
 * process serves both whatever its TARGET. The admin API is left out: it is for operators, on a port
 * of its own (API.md §10).
 */
export function describePlatform(settings: { publicUrl: string; topicPrefix: string }): PlatformDescriptions {
  const catalog = eventCatalog();
  const routes: RouteSpec[] = [
    ...authServiceRouteSpecs(settings.publicUrl),
    ...apiServiceRouteSpecs(catalog),
    ...dispatcherRouteSpecs(),
    ...DESCRIPTION_ROUTES,
  ];
  return {
    openapi: openApiDocument(routes, {
      title: 'Order-fulfillment integration platform',
      version: VERSION,
      description:
        'The public contract: records under /v2 (also /api/v2) in the envelope of API.md §2, searched with q, ' +
        'written with Idempotency-Key and If-Match; OAuth 2.0; webhooks signed per Standard Webhooks. ' +
        'Every response carries X-Request-Id; bearer requests carry RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset.',
      server: settings.publicUrl,
      scopes: SCOPE_DESCRIPTIONS,
      errorSchema: errorEnvelopeSchema,
      oauthErrorSchema,
      webhooks: catalog,
      tags: [
        { name: 'Authentication', description: 'Whether a token works' },
        { name: 'OAuth', description: 'OAuth 2.0 authorization server (API.md §7)' },
        ...Object.values(MODELS).map((model) => ({
          name: model.name,
          description: `The ${model.name.replace(/_/g, ' ')} model (API.md §6)`,
        })),
        {
          name: 'events',
          description:
            "The organization's events in order, for integrators that poll instead of receiving webhooks (docs/events-feed.md)",
        },
        { name: 'webhooks', description: 'Webhook subscriptions and their event types (API.md §8)' },
        {
          name: 'webhook_deliveries',
          description: 'Deliveries of events to subscriptions, with their attempts',
        },
        { name: 'Descriptions', description: 'This document, the reference page and the AsyncAPI document' },
      ],
    }),
    asyncapi: asyncApiDocument(settings.topicPrefix, catalog),
  };
}

/** The documents the repository keeps (`npm run describe` writes them), by path from its root. */
export const DESCRIPTION_FILES = {
  openapi: 'docs/openapi.json',
  asyncapi: 'docs/asyncapi.json',
} as const satisfies Record<keyof PlatformDescriptions, string>;

/**
 * The descriptions as the repository keeps them in {@link DESCRIPTION_FILES}: those a standalone
 * instance with the default settings serves (`http://localhost:8080`, topics `ofp.events.*`).
 */
export function repositoryDescriptions(): PlatformDescriptions {
  const defaults = platformConfigSchema.parse({});
  return describePlatform({
    publicUrl: `http://localhost:${defaults.PORT}`,
    topicPrefix: defaults.KAFKA_TOPIC_PREFIX,
  });
}

/**
 * The AsyncAPI 3 document of the Kafka topics (API.md §9): one channel per stream type, each record
 * event a CloudEvent in binary mode (headers as described), keyed by the record's stream id, its body
 * the change (`<Model>Change`, of the version the `ce_dataschema` header names). Schemas are JSON
 * Schema draft-07, AsyncAPI 3's own schema format, kept once in `components.schemas`.
 */
function asyncApiDocument(topicPrefix: string, catalog: readonly { type: string }[]): Json {
  const types = (model: ModelDefinition) =>
    catalog.filter(({ type }) => type.startsWith(`${model.singular}.`)).map(({ type }) => type);
  const channels: Json = {};
  const operations: Json = {};
  const messages: Json = {};
  const schemas = new ComponentSchemas('draft-07');
  const headers = (eventTypes: readonly string[], dataschema: string): Json => ({
    type: 'object',
    required: ['ce_specversion', 'ce_id', 'ce_source', 'ce_type', 'ce_time', 'ce_subject', 'content-type'],
    properties: Object.fromEntries(
      Object.entries(CLOUDEVENTS_HEADERS).map(([name, description]) => [
        name,
        name === 'ce_type'
          ? { type: 'string', enum: eventTypes, description }
          : name === 'ce_dataschema'
            ? { type: 'string', const: dataschema, description }
            : { type: 'string', description },
      ]),
    ),
  });
  const add = (
    streamType: string,
    name: string,
    eventTypes: readonly string[],
    dataschema: string,
    payload: z.ZodType,
    examples: readonly { readonly headers: Json; readonly payload: Json }[],
  ) => {
    const reference = schemas.add(payload, 'output', name);
    messages[name] = {
      name,
      title: `${name} (${eventTypes.join(', ')})`,
      summary: `Its body's schema, ${dataschema}, is named by the ce_dataschema header`,
      contentType: 'application/json',
      headers: headers(eventTypes, dataschema),
      payload: reference,
      // One example per event type the message carries.
      examples: examples.map((example) => ({
        name: String(example.headers.ce_type),
        headers: { ...example.headers, ce_dataschema: dataschema, 'content-type': 'application/json' },
        payload: example.payload,
      })),
      bindings: {
        kafka: {
          key: {
            type: 'string',
            description: 'The stream id: one record’s events stay in one partition, in order',
          },
        },
      },
    };
    channels[streamType] = {
      address: `${topicPrefix}${streamType}`,
      messages: { [name]: { $ref: `#/components/messages/${name}` } },
    };
    operations[`receive${schemaName(streamType)}`] = {
      action: 'receive',
      channel: { $ref: `#/channels/${streamType}` },
      messages: [{ $ref: `#/channels/${streamType}/messages/${name}` }],
    };
  };
  for (const model of Object.values(MODELS)) {
    const record = recordSchema(model);
    const events = types(model).flatMap((type) => eventExample(model, type) ?? []);
    add(
      model.name,
      `${schemaName(model.singular)}Change`,
      types(model),
      DATA_SCHEMAS.recordChange,
      z.strictObject({
        record,
        previous: record.partial().describe("The changed fields' values before the change"),
        deleted: z.boolean().describe('True when the change deleted the record'),
        heldFrom: z.string().optional().describe('While the record is on hold: the status it returns to'),
      }),
      events.map((event) => ({
        headers: {
          ce_specversion: '1.0',
          ce_id: event.id,
          ce_source: `/ofp/${model.name}`,
          ce_type: event.type,
          ce_time: event.timestamp,
          ce_subject: recordStreamId(model.name, event.data.id as number),
          ce_sequence: String(event.sequence),
          ce_streamtype: model.name,
          ce_orgid: '17',
        },
        payload: {
          record: event.data,
          previous: event.previous_attributes,
          deleted: event.type === `${model.singular}.deleted`,
        },
      })),
    );
  }
  add(
    'revocations',
    'GrantRevoked',
    ['grant.revoked'],
    DATA_SCHEMAS.grantRevoked,
    z.strictObject({
      grant_id: z
        .string()
        .nullable()
        .describe('The grant whose tokens are revoked; null: a token of no grant, or a client'),
      token_id: z
        .string()
        .nullable()
        .describe('The one token revoked (its jti); null with a grant_id: every token of the grant'),
      client_id: z
        .string()
        .nullable()
        .optional()
        .describe('Every token of this client is revoked (it was disabled); absent in older announcements'),
      expires_at: z.iso.datetime().describe('When the last token concerned expires'),
    }),
    [
      {
        headers: {
          ce_specversion: '1.0',
          ce_id: '8d0b6c4e-2f7a-4b19-a3d5-71e9c0f4b2a6',
          ce_source: '/ofp/revocations',
          ce_type: 'grant.revoked',
          ce_time: '2026-11-21T07:31:12.000Z',
          ce_subject: 'grants-4b7e1c2a',
          ce_streamtype: 'revocations',
        },
        payload: {
          grant_id: '4b7e1c2a-9d3f-4e6b-8a15-2c7d9e0f1a3b',
          token_id: null,
          client_id: null,
          expires_at: '2026-11-21T10:31:12.000Z',
        },
      },
    ],
  );
  return {
    asyncapi: '3.1.0',
    info: {
      title: 'Order-fulfillment platform events',
      version: VERSION,
      description:
        'Every change as a CloudEvents 1.0 event in Kafka binary mode, keyed by stream id. Delivery is at least once: deduplicate on ce_id.',
    },
    defaultContentType: 'application/json',
    servers: {
      kafka: {
        host: 'kafka:9092',
        protocol: 'kafka',
        description: "The deployment's bootstrap servers (KAFKA_BROKERS)",
      },
    },
    channels,
    operations,
    components: { messages, schemas: schemas.components() },
  };
}

/**
 * What the description routes serve: Redoc read at start-up, the documents generated and serialized by
 * the first request that needs them (then kept), as FastAPI does. Generating them costs about a second
 * of CPU (zod's JSON Schema of every operation), which every start of every process paid before it was
 * ready, though most processes never serve them; serializing the OpenAPI document (1.1 MB) costs tens
 * of milliseconds, which every request of it paid.
 */
interface Served {
  /** The documents as the JSON text every request of them is answered with. */
  readonly documents: () => { readonly openapi: string; readonly asyncapi: string };
  /** Redoc's standalone bundle (from the npm package: no CDN). */
  readonly script: string;
}

/** The reference page: Redoc renders `/openapi.json`; its script is served here too. */
const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Order-fulfillment platform API reference</title>
  <link rel="icon" href="/favicon.ico" type="image/svg+xml">
</head>
<body>
  <div id="redoc"></div>
  <script src="/docs/redoc.standalone.js"></script>
  <script src="/docs/start.js"></script>
</body>
</html>
`;

const START = `Redoc.init('/openapi.json', { expandResponses: '200,201', jsonSampleExpandLevel: 3 }, document.getElementById('redoc'));\n`;

/** The platform's icon (a parcel), for the reference page and as `/favicon.ico`: browsers take SVG by its type. */
const ICON = `<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32"><rect width="32" height="32" rx="6" fill="#1f4e79"/><path d="M7 11.5 16 7l9 4.5v10L16 26l-9-4.5z M7 11.5l9 4.5 9-4.5 M16 16v10" fill="none" stroke="#fff" stroke-width="2" stroke-linejoin="round"/></svg>\n`;

/**
 * Redoc's standalone bundle shows its attribution with a logo from its CDN, which the page's policy
 * blocks (an error in every visitor's console): the bundle is served with that image's source empty,
 * so Redoc hides the image (its onError) and keeps the attribution's text.
 */
function withoutOutsideAssets(script: string): string {
  return script.replaceAll('"https://cdn.redoc.ly/redoc/logo-mini.svg"', '""');
}

/**
 * The page loads nothing from elsewhere (API.md §11: it works offline and behind a proxy), and this
 * policy keeps a browser from fetching anything that would.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; worker-src 'self' blob:; connect-src 'self'";

/** What each description route serves, and as what. */
const DESCRIPTION_BODIES: readonly {
  readonly path: string;
  readonly operationId: string;
  readonly summary: string;
  readonly description: string;
  readonly type: string;
  readonly body: (served: Served) => string;
}[] = [
  {
    path: '/openapi.json',
    operationId: 'openapi',
    summary: 'This OpenAPI 3.1 document',
    description:
      'Every operation, its parameters, bodies and answers, and the webhook events, as this deployment serves them: what client generators and this page read.',
    type: 'application/json',
    body: ({ documents }) => documents().openapi,
  },
  {
    path: '/asyncapi.json',
    operationId: 'asyncapi',
    summary: 'The AsyncAPI 3 document of the Kafka topics',
    description:
      "Every topic and event of the platform's Kafka binding (CloudEvents 1.0), for platform teams that consume the events inside the deployment.",
    type: 'application/json',
    body: ({ documents }) => documents().asyncapi,
  },
  {
    path: '/docs',
    operationId: 'docs',
    summary: 'The API reference, rendered from this document',
    description:
      'This reference as a page (Redoc), served by the platform itself: it loads nothing from elsewhere, so it works offline and behind a proxy.',
    type: 'text/html; charset=utf-8',
    body: () => PAGE,
  },
  {
    path: '/favicon.ico',
    operationId: 'favicon',
    summary: "The platform's icon",
    description: "The platform's icon (SVG), for browsers' tabs and bookmarks.",
    type: 'image/svg+xml',
    body: () => ICON,
  },
  {
    path: '/docs/redoc.standalone.js',
    operationId: 'docsRenderer',
    summary: "The reference page's renderer (Redoc)",
    description: "Redoc's standalone bundle, from its npm package, served so that the page needs no CDN.",
    type: 'text/javascript; charset=utf-8',
    body: ({ script }) => script,
  },
  {
    path: '/docs/start.js',
    operationId: 'docsStart',
    summary: 'Starts the renderer on this document',
    description:
      "The script that starts Redoc on `/openapi.json` (a script of its own, as the page's Content-Security-Policy allows no inline script).",
    type: 'text/javascript; charset=utf-8',
    body: () => START,
  },
];

/** `/openapi.json`, `/asyncapi.json` and `/docs` (API.md §11): public, about no organization. */
const DESCRIPTION_ROUTES: readonly RouteSpec[] = DESCRIPTION_BODIES.map(
  ({ path, operationId, summary, description, type }) => ({
    method: 'GET',
    path,
    operationId,
    summary,
    description,
    tag: 'Descriptions',
    access: { kind: 'public' },
    responses: { 200: { description: summary, mediaType: type } },
  }),
);

/** The description routes of a running platform: Redoc read once, the documents generated and serialized once. */
export async function servedDescriptions(settings: {
  publicUrl: string;
  topicPrefix: string;
}): Promise<Route[]> {
  const script = await readFile(
    createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'),
    'utf8',
  );
  let documents: ReturnType<Served['documents']> | undefined;
  const served: Served = {
    documents: () => {
      if (documents === undefined) {
        const { openapi, asyncapi } = describePlatform(settings);
        documents = { openapi: JSON.stringify(openapi), asyncapi: JSON.stringify(asyncapi) };
      }
      return documents;
    },
    script: withoutOutsideAssets(script),
  };
  const operations: Operations = Object.fromEntries(
    DESCRIPTION_BODIES.map(({ operationId, type, body }) => [
      operationId,
      {
        handle: () =>
          Promise.resolve({
            status: 200,
            headers: {
              'Content-Type': type,
              'Cache-Control': 'public, max-age=300',
              'Content-Security-Policy': CONTENT_SECURITY_POLICY,
            },
            body: body(served),
          }),
      },
    ]),
  );
  return bindRoutes(DESCRIPTION_ROUTES, operations, () => PUBLIC);
}
