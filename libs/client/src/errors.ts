/** Column errors as the envelope carries them (API.md §2): `{ "<column>": ["message", ...] }`. */
export type FieldErrors = Readonly<Record<string, readonly string[]>>;

/**
 * A response the platform refused (4xx) or failed (5xx, after the retries the client allows): its
 * status, the envelope's `errors` by column path (`base` for the request as a whole), and the request
 * id to quote to the platform's operators.
 */
export class PlatformError extends Error {
  override readonly name = 'PlatformError';

  constructor(
    readonly status: number,
    readonly errors: FieldErrors,
    /** `X-Request-Id` of the response. */
    readonly requestId: string | undefined,
    /** `Retry-After` in seconds, on a 429 or 503 that the client gave up waiting for. */
    readonly retryAfterSeconds?: number,
  ) {
    super(
      `${status}: ${
        Object.entries(errors)
          .map(([column, messages]) => `${column} ${messages.join(', ')}`)
          .join('; ') || 'no details'
      }${requestId === undefined ? '' : ` (request ${requestId})`}`,
    );
  }

  /** The error a refused response carries: the envelope's `errors`, or OAuth's `error_description`. */
  static async of(response: Response): Promise<PlatformError> {
    const text = await response.text();
    let errors: FieldErrors = { base: [text.slice(0, 500) || response.statusText] };
    try {
      const body = JSON.parse(text) as { errors?: unknown; error?: unknown; error_description?: unknown };
      if (body.errors !== null && typeof body.errors === 'object') errors = body.errors as FieldErrors;
      else if (typeof body.error === 'string')
        errors = {
          base: [
            `${body.error}: ${typeof body.error_description === 'string' ? body.error_description : ''}`,
          ],
        };
    } catch {
      // Not JSON (a proxy's page): its text is the message.
    }
    const retryAfter = Number(response.headers.get('retry-after') ?? Number.NaN);
    return new PlatformError(
      response.status,
      errors,
      response.headers.get('x-request-id') ?? undefined,
      Number.isFinite(retryAfter) ? retryAfter : undefined,
    );
  }
}
