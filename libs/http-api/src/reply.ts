// A response as handlers, the idempotency store and the server pass it around: below the routes and
// the idempotency store, which both use it.

import type { FieldErrors } from '@ofp/contracts';

/** What a handler answers. `body` is the serialized body; JSON unless `Content-Type` says otherwise. */
export interface Reply {
  readonly status: number;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string;
}

/** What an error answers, whatever format renders it: its status, messages and headers. */
export interface ErrorAnswer {
  readonly status: number;
  readonly errors: FieldErrors;
  readonly headers?: Readonly<Record<string, string>>;
}

/** A JSON reply. */
export function jsonReply(status: number, value: unknown, headers?: Readonly<Record<string, string>>): Reply {
  return { status, body: JSON.stringify(value), ...(headers ? { headers } : {}) };
}
