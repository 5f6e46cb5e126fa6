import {
  context,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Context,
  type Link,
} from '@opentelemetry/api';

// W3C Trace Context (https://www.w3.org/TR/trace-context/ §3.2): version 00, a trace id and a parent
// id that are not all zeros, flags.
const TRACEPARENT = /^00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}$/;

/** A `traceparent` value as W3C Trace Context defines it, else undefined. */
export function validTraceparent(value: unknown): string | undefined {
  return typeof value === 'string' && TRACEPARENT.test(value) ? value : undefined;
}

/**
 * The `traceparent` of the active span when OpenTelemetry traces this process, else undefined. A
 * change made now carries it with its events (API.md §8, §9).
 */
export function currentTraceparent(): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return validTraceparent(carrier.traceparent);
}

/** The context a `traceparent` names (the active one when it names none). */
function contextOf(traceparent: string | undefined): Context {
  if (traceparent === undefined) return context.active();
  // The W3C propagator is the SDK's default; without an SDK, extraction gives the root context.
  const extracted = propagation.extract(ROOT_CONTEXT, { traceparent });
  return trace.getSpanContext(extracted) ? extracted : context.active();
}

const tracer = trace.getTracer('ofp');

/**
 * Runs `work` in a span that continues the traces of `traceparents` (the events it works on, as the
 * OpenTelemetry messaging conventions say): a child of the one trace they share, else a new span
 * linked to each of them. Without an SDK the span is a no-op and costs next to nothing.
 */
export async function inTracesOf<T>(
  traceparents: readonly (string | undefined)[],
  name: string,
  kind: 'consumer' | 'producer' | 'client',
  work: () => Promise<T>,
): Promise<T> {
  const distinct = [...new Set(traceparents.filter((each) => each !== undefined))];
  const parent = distinct.length === 1 ? contextOf(distinct[0]) : context.active();
  const links: Link[] =
    distinct.length > 1
      ? distinct.flatMap((each) => {
          const spanContext = trace.getSpanContext(contextOf(each));
          return spanContext ? [{ context: spanContext }] : [];
        })
      : [];
  const spanKind =
    kind === 'consumer' ? SpanKind.CONSUMER : kind === 'producer' ? SpanKind.PRODUCER : SpanKind.CLIENT;
  return tracer.startActiveSpan(name, { kind: spanKind, links }, parent, async (span) => {
    try {
      return await work();
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw error;
    } finally {
      span.end();
    }
  });
}
