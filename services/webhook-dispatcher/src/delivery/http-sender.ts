import { isIP } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Agent, type Dispatcher } from 'undici';
import { currentTraceparent, inTracesOf } from '@ofp/runtime';
import type { AttemptErrorKind, AttemptRecord } from './attempt.js';
import { BlockedTargetError, guardedLookup, type AddressGuard, type HostResolver } from './address-guard.js';
import { DeliverySigner } from './signing.js';

/** Sent with every delivery, so subscribers can tell our requests apart in their logs. */
const USER_AGENT = 'ofp-webhook-dispatcher/0.1';

/** Endpoint URLs whose parsed target is kept; beyond it, the least recently added is dropped. */
const KEPT_TARGETS = 1_000;

/** Where a URL's requests go, as the agent takes it. */
interface Target {
  readonly origin: string;
  /** The path and query. */
  readonly path: string;
}

/** What a delivery sends: a signed POST of `payload` to `url`. */
export interface OutgoingDelivery {
  readonly url: string;
  /** The event id: the `webhook-id`, the same on every attempt. */
  readonly eventId: string;
  readonly payload: string;
  /** The current secret, then the previous one while a rotation is in its grace period. */
  readonly secrets: readonly string[];
  /** The trace context of the change (API.md §8), when it was made inside a trace. */
  readonly traceparent?: string | null;
}

export interface HttpSenderOptions {
  readonly guard: AddressGuard;
  readonly resolve: HostResolver;
  /** Stamps `startedAt` (the injected clock, so the attempt log lines up with the retry schedule). */
  readonly clock: () => Date;
  readonly connectTimeoutMs: number;
  /** The whole request, connect included: a 2xx after it is no success (API.md §8, 15 s). */
  readonly requestTimeoutMs: number;
  /** Connections kept per origin: the per-endpoint concurrency limit. */
  readonly connectionsPerOrigin: number;
  /** How much of a response body the attempt log keeps. */
  readonly maxExcerptBytes: number;
}

/**
 * POSTs deliveries with undici: one keep-alive agent whose connections resolve through the SSRF
 * guard, a connect timeout, and a timeout over the whole request. Never throws: every outcome,
 * refused or timed out included, is an {@link AttemptRecord}.
 */
export class HttpSender {
  private readonly agent: Agent;
  private readonly deadline: SharedDeadline;
  private readonly signer = new DeliverySigner();
  /** Each endpoint's URL parsed and judged once, not at every delivery. */
  private readonly targets = new Map<string, Target>();

  constructor(private readonly options: HttpSenderOptions) {
    this.agent = new Agent({
      connect: { timeout: options.connectTimeoutMs, lookup: guardedLookup(options.resolve, options.guard) },
      connections: options.connectionsPerOrigin,
      headersTimeout: options.requestTimeoutMs,
      bodyTimeout: options.requestTimeoutMs,
    });
    this.deadline = new SharedDeadline(options.requestTimeoutMs);
  }

  /** Sends a delivery once, signed with each of its secrets (Standard Webhooks, API.md §8). */
  async deliver(delivery: OutgoingDelivery): Promise<AttemptRecord> {
    const traceparent = delivery.traceparent ?? undefined;
    // The POST is a span of the change's trace. When this process is traced, the undici
    // instrumentation sends that trace's context; when it is not, the change's own goes out.
    return inTracesOf(
      [traceparent],
      'webhook POST',
      'client',
      () => {
        const own = currentTraceparent() === undefined ? traceparent : undefined;
        const headers = {
          'content-type': 'application/json',
          'user-agent': USER_AGENT,
          ...this.signer.headers(delivery.secrets, delivery.eventId, this.options.clock(), delivery.payload),
          ...(own === undefined ? {} : { traceparent: own }),
        };
        return this.post(delivery.url, headers, delivery.payload);
      },
      {
        'http.request.method': 'POST',
        'url.full': delivery.url,
        'ofp.webhook.event_id': delivery.eventId,
      },
    );
  }

  private async post(
    url: string,
    headers: Readonly<Record<string, string>>,
    body: string,
  ): Promise<AttemptRecord> {
    const startedAt = this.options.clock();
    const began = performance.now();
    const durationMs = (): number => Math.round(performance.now() - began);
    try {
      // The agent's own dispatch takes the parsed URL, and hands the response to a handler that keeps
      // what the attempt records: undici's `request` would wrap it in a stream and an async resource
      // that the attempt only reads to its end.
      const { origin, path } = this.target(url);
      const response = await new Promise<KeptResponse>((resolve, reject) => {
        const handler = new ResponseHandler(this.options.maxExcerptBytes, this.deadline, resolve, reject);
        this.agent.dispatch({ origin, path, method: 'POST', headers, body }, handler);
      });
      const ok = response.statusCode >= 200 && response.statusCode < 300;
      return {
        startedAt,
        durationMs: durationMs(),
        statusCode: response.statusCode,
        errorKind: ok ? null : 'http_status',
        error: ok ? null : `HTTP ${response.statusCode}`,
        responseExcerpt: response.excerpt,
        retryAfter: response.retryAfter,
      };
    } catch (error) {
      const failure = classifyFailure(error);
      return {
        startedAt,
        durationMs: durationMs(),
        statusCode: null,
        errorKind: failure.kind,
        error: failure.message,
        responseExcerpt: null,
        retryAfter: null,
      };
    }
  }

  async close(): Promise<void> {
    await this.agent.close();
  }

  /** Where `url` sends a request; throws when it cannot be parsed or names a blocked literal address. */
  private target(url: string): Target {
    let target = this.targets.get(url);
    if (target === undefined) {
      const parsed = new URL(url);
      this.refuseBlockedLiteral(parsed);
      target = { origin: parsed.origin, path: `${parsed.pathname}${parsed.search}` };
      if (this.targets.size >= KEPT_TARGETS) this.targets.delete(this.targets.keys().next().value!);
      this.targets.set(url, target);
    }
    return target;
  }

  /** `net.connect` skips `lookup` for an IP literal, so a literal host is judged here. */
  private refuseBlockedLiteral(target: URL): void {
    const host = target.hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host) === 0) return;
    const reason = this.options.guard.refusal(host);
    if (reason !== undefined) throw new BlockedTargetError(`${host}: ${reason}`);
  }
}

/** What an attempt keeps of a response. */
interface KeptResponse {
  readonly statusCode: number;
  /** The `retry-after` header, when it came once. */
  readonly retryAfter: string | null;
  /** The body's first bytes, or null when it stalled or broke before its end or the limit. */
  readonly excerpt: string | null;
}

/**
 * One POST's response, gathered as undici reports it: the status decides the outcome; a body that
 * stalls or breaks only loses the excerpt. The body is kept up to `maxBytes`, then the request is
 * aborted (which destroys that connection): the excerpt is bounded. The whole request is aborted at its
 * {@link SharedDeadline}.
 */
class ResponseHandler implements Dispatcher.DispatchHandler {
  private controller: Dispatcher.DispatchController | undefined;
  /** Set when the deadline passed before the request had a connection: it is aborted when it gets one. */
  private expired: Error | undefined;
  private response: { statusCode: number; retryAfter: string | null } | undefined;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private settled = false;
  private readonly deadlined: Set<ResponseHandler>;

  constructor(
    private readonly maxBytes: number,
    deadline: SharedDeadline,
    private readonly resolve: (response: KeptResponse) => void,
    private readonly reject: (error: unknown) => void,
  ) {
    this.deadlined = deadline.join(this);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.expired !== undefined) controller.abort(this.expired);
  }

  onResponseStart(
    _controller: Dispatcher.DispatchController,
    statusCode: number,
    headers: Record<string, string | string[] | undefined>,
  ): void {
    // Informational answers (1xx) come before the response.
    if (statusCode < 200) return;
    const retryAfter = headers['retry-after'];
    this.response = { statusCode, retryAfter: typeof retryAfter === 'string' ? retryAfter : null };
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.settled) return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.size < this.maxBytes) return;
    this.settle(this.excerpt());
    // Paused too, as undici's own request does when a handler aborts while its parser is in a callback.
    controller.abort(new Error('response excerpt complete'));
    controller.pause();
  }

  onResponseEnd(): void {
    this.settle(this.excerpt());
  }

  onResponseError(_controller: Dispatcher.DispatchController | undefined, error: Error): void {
    if (!this.finish()) return;
    if (this.response === undefined) this.reject(error);
    else this.resolve({ ...this.response, excerpt: null });
  }

  /** Aborts the request at its deadline, with the error `AbortSignal.timeout` would give. */
  expire(): void {
    this.expired = new DOMException('The operation was aborted due to timeout', 'TimeoutError');
    this.controller?.abort(this.expired);
  }

  /** Resolves with the status and `excerpt`, unless it was settled before. */
  private settle(excerpt: string): void {
    if (this.finish()) this.resolve({ ...this.response!, excerpt });
  }

  /** Whether this is the first outcome; the request then leaves its deadline. */
  private finish(): boolean {
    if (this.settled) return false;
    this.settled = true;
    this.deadlined.delete(this);
    return true;
  }

  private excerpt(): string {
    if (this.chunks.length === 0) return '';
    // Postgres text cannot hold NUL.
    return Buffer.concat(this.chunks).subarray(0, this.maxBytes).toString('utf8').replaceAll('\u0000', '');
  }
}

/** Requests started within this many milliseconds of each other share a deadline. */
const DEADLINE_SHARED_MS = 10;

/**
 * The whole-request timeout, as one timer per {@link DEADLINE_SHARED_MS} of request starts: a timer
 * and an abort signal per request cost about 10 µs of CPU each here, a third of a bare POST's. A shared
 * timer fires the timeout after the first request it covers started, so each request gets at most the
 * timeout, and at least the timeout less {@link DEADLINE_SHARED_MS}.
 */
class SharedDeadline {
  private current: Set<ResponseHandler> | undefined;
  private sharedUntil = 0;

  constructor(private readonly timeoutMs: number) {}

  /** Puts `request` under the deadline of the requests started with it; returns their set, to leave. */
  join(request: ResponseHandler): Set<ResponseHandler> {
    const now = performance.now();
    if (this.current === undefined || now >= this.sharedUntil) {
      const requests = new Set<ResponseHandler>();
      // Unreferenced, as `AbortSignal.timeout`'s: a request in flight keeps the process up, not its deadline.
      setTimeout(() => {
        for (const each of requests) each.expire();
      }, this.timeoutMs).unref();
      this.current = requests;
      this.sharedUntil = now + DEADLINE_SHARED_MS;
    }
    this.current.add(request);
    return this.current;
  }
}

const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'EAI_NONAME', 'ENODATA']);
// OpenSSL verification codes (`CERT_HAS_EXPIRED`, `DEPTH_ZERO_SELF_SIGNED_CERT`, ...) and Node's TLS errors.
const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|HOSTNAME_MISMATCH)/;

/** The parts of an error (or a DOMException, or anything thrown) that tell what went wrong. */
interface ErrorLike {
  readonly name?: unknown;
  readonly message?: unknown;
  readonly code?: unknown;
  readonly cause?: unknown;
  readonly errors?: unknown;
}

/**
 * The error kind of a failed request, from the error or the causes it wraps (undici wraps socket
 * errors; happy-eyeballs connects throw an AggregateError of one error per address).
 */
export function classifyFailure(error: unknown): { kind: AttemptErrorKind; message: string } {
  const causes = causesOf(error);
  for (const candidate of causes) {
    const kind = kindOf(candidate);
    if (kind !== undefined) return { kind, message: messageOf(candidate) ?? messageOf(error) ?? kind };
  }
  return { kind: 'network', message: messageOf(error) ?? String(error) };
}

function messageOf(error: unknown): string | undefined {
  const { message, name } = (typeof error === 'object' && error !== null ? error : {}) as ErrorLike;
  if (typeof message === 'string' && message !== '') return message;
  return typeof name === 'string' ? name : undefined;
}

function kindOf(error: ErrorLike): AttemptErrorKind | undefined {
  const { code, name } = error;
  if (error instanceof BlockedTargetError) return 'blocked';
  // AbortSignal.timeout aborts with a TimeoutError; only that signal aborts these requests.
  if (name === 'TimeoutError' || name === 'AbortError') return 'timeout';
  if (typeof code !== 'string') return undefined;
  if (TIMEOUT_CODES.has(code)) return 'timeout';
  if (DNS_CODES.has(code)) return 'dns';
  if (code === 'ECONNREFUSED') return 'refused';
  if (TLS_CODE.test(code)) return 'tls';
  return undefined;
}

function causesOf(error: unknown, depth = 0): ErrorLike[] {
  if (typeof error !== 'object' || error === null || depth > 5) return [];
  const { cause, errors } = error as ErrorLike;
  const nested = [
    ...(Array.isArray(errors) ? (errors as unknown[]) : []),
    ...(cause === undefined ? [] : [cause]),
  ];
  return [error, ...nested.flatMap((inner) => causesOf(inner, depth + 1))];
}
