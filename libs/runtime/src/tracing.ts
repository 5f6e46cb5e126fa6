import {
  context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  propagation,
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Link,
} from '@opentelemetry/api';
import { RPCType, W3CTraceContextPropagator, getRPCMetadata } from '@opentelemetry/core';

/** W3C Trace Context (https://www.w3.org/TR/trace-context/), as OpenTelemetry parses and writes it. */
const W3C = new W3CTraceContextPropagator();

/**
 * A `traceparent` value as W3C Trace Context defines it (version 00, a trace id and a parent id that
 * are not all zeros, flags), in the form OpenTelemetry writes it; else undefined.
 */
export function validTraceparent(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  const spanContext = trace.getSpanContext(
    W3C.extract(ROOT_CONTEXT, { traceparent: value }, defaultTextMapGetter),
  );
  if (!spanContext || !isSpanContextValid(spanContext)) return undefined;
  const carrier: Record<string, string> = {};
  W3C.inject(trace.setSpanContext(ROOT_CONTEXT, spanContext), carrier, defaultTextMapSetter);
  return carrier.traceparent;
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

/**
 * Names the active server span after its route template and operation (OpenTelemetry's HTTP server
 * conventions: `http.route`, a span named `METHOD /route`), once the request is routed: the HTTP
 * instrumentation knows only the URL. Without an SDK there is no span, and this does nothing.
 */
export function nameServerSpan(method: string, route: string, operationId: string): void {
  const span = trace.getActiveSpan();
  if (!span) return;
  // The HTTP instrumentation names its span from this at the response's end.
  const rpc = getRPCMetadata(context.active());
  if (rpc?.type === RPCType.HTTP) rpc.route = route;
  span.updateName(`${method} ${route}`);
  span.setAttributes({ 'http.route': route, 'ofp.operation_id': operationId });
}

/** Attributes of the active span (a command's record, a batch's size), when this process is traced. */
export function describeActiveSpan(attributes: Attributes): void {
  trace.getActiveSpan()?.setAttributes(attributes);
}

/** The context a `traceparent` names (the active one when it names none). */
function contextOf(traceparent: string | undefined): Context {
  if (traceparent === undefined) return context.active();
  // The W3C propagator is the SDK's default; without an SDK, extraction gives the root context.
  const extracted = propagation.extract(ROOT_CONTEXT, { traceparent });
  return trace.getSpanContext(extracted) ? extracted : context.active();
}

const tracer = trace.getTracer('ofp');

const SPAN_KINDS = {
  consumer: SpanKind.CONSUMER,
  producer: SpanKind.PRODUCER,
  client: SpanKind.CLIENT,
  internal: SpanKind.INTERNAL,
} as const;

/**
 * Runs `work` in a span that continues the traces of `traceparents` (the events it works on, as the
 * OpenTelemetry messaging conventions say): a child of the one trace they share, else a new span
 * linked to each of them; with none, a child of the active span. `attributes` say what it works on.
 * Without an SDK the span is a no-op and costs next to nothing.
 */
export async function inTracesOf<T>(
  traceparents: readonly (string | undefined)[],
  name: string,
  kind: 'consumer' | 'producer' | 'client' | 'internal',
  work: () => Promise<T>,
  attributes: Attributes = {},
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
  const spanKind = SPAN_KINDS[kind];
  return tracer.startActiveSpan(name, { kind: spanKind, links, attributes }, parent, async (span) => {
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
