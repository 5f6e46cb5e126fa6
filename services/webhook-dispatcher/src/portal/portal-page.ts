import { readFile } from 'node:fs/promises';
import type { Operations, RouteSpec } from '@ofp/http-api';
import { webhooks } from '../models.js';

/** The page's files, kept as they are served (`portal/` beside `src/`, shipped with the package). */
const FILES = new URL('../../portal/', import.meta.url);

/**
 * Nothing but the platform's own origin: the page works offline and behind a proxy (as `/docs`,
 * API.md §11), and a script that got in could neither load code nor send the token elsewhere.
 */
const CONTENT_SECURITY_POLICY =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

const PAGE_FILES = [
  {
    path: '/portal',
    file: 'index.html',
    operationId: 'portal',
    summary: 'The subscriber portal',
    description:
      "The page a portal session's link opens (`POST /v2/webhooks/portal_sessions`): the organization's endpoints, event types and deliveries with their attempts, the receiver's answers and payloads, with retry, recover, a test event, secret rotation and enabling or disabling an endpoint. It calls this API with the session's token from the link's fragment, and loads nothing from elsewhere.",
    type: 'text/html; charset=utf-8',
  },
  {
    path: '/portal/portal.js',
    file: 'portal.js',
    operationId: 'portalScript',
    summary: "The subscriber portal's script",
    description:
      'What the portal page runs: it calls `/v2/webhooks*` and `/v2/webhook_deliveries*` with the session token.',
    type: 'text/javascript; charset=utf-8',
  },
  {
    path: '/portal/portal.css',
    file: 'portal.css',
    operationId: 'portalStyle',
    summary: "The subscriber portal's style sheet",
    description: "The portal page's one style sheet.",
    type: 'text/css; charset=utf-8',
  },
] as const;

/** `GET /portal` and its script and style sheet: public, about no organization until a token is given. */
export function portalPageRouteSpecs(): RouteSpec[] {
  return PAGE_FILES.map(({ path, operationId, summary, description, type }) => ({
    method: 'GET',
    path,
    operationId,
    summary,
    description,
    tag: webhooks.name,
    access: { kind: 'public' },
    responses: { 200: { description: summary, mediaType: type } },
  }));
}

/** What serves {@link portalPageRouteSpecs}: each file read once, on its first request. */
export function portalPageOperations(): Operations {
  return Object.fromEntries(
    PAGE_FILES.map(({ file, operationId, type }) => {
      let body: Promise<string> | undefined;
      return [
        operationId,
        {
          handle: async () => {
            body ??= readFile(new URL(file, FILES), 'utf8').catch((error: unknown) => {
              body = undefined;
              throw error;
            });
            return {
              status: 200,
              headers: {
                'Content-Type': type,
                'Cache-Control': 'no-cache',
                'Content-Security-Policy': CONTENT_SECURITY_POLICY,
                // The token is in the fragment, which no Referer carries; this keeps the page's address out too.
                'Referrer-Policy': 'no-referrer',
                'X-Content-Type-Options': 'nosniff',
              },
              body: await body,
            };
          },
        },
      ];
    }),
  );
}
