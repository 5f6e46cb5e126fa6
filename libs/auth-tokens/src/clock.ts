/** The current time. Injected everywhere a decision depends on it, so that tests can move it. */
export type Clock = () => Date;

/** Whole seconds since the epoch, the unit of JWT `iat`/`exp`/`nbf` (RFC 7519 §2 NumericDate). */
export function epochSeconds(at: Date): number {
  return Math.floor(at.getTime() / 1000);
}
