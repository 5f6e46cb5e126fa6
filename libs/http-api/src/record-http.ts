import { baseError } from '@ofp/contracts';

/** `ETag: W/"<version>"` (API.md §4). */
export function etagOf(version: number): string {
  return `W/"${version}"`;
}

/**
 * The versions an `If-Match` header pins (API.md §5): a write applies when the record's current version
 * is one of them. Undefined without the header or for `*` (any current version). The header is a list
 * (RFC 9110 §13.1.1: `W/"3", W/"4"`); an entity tag that is none of ours is no version and matches
 * nothing, and a header that names no version of ours can never match: 412.
 */
export function parseIfMatch(header: string | undefined): readonly number[] | undefined {
  if (header === undefined || header.trim() === '*') return undefined;
  const versions = header.split(',').flatMap((tag) => {
    const match = /^\s*(?:W\/)?"(\d{1,15})"\s*$/.exec(tag);
    return match ? [Number(match[1])] : [];
  });
  if (versions.length === 0)
    throw baseError('PreconditionFailed', 'If-Match does not match the current ETag');
  return versions;
}

/** Whether the client asked not to wait for the read model (`Prefer: respond-async`, RFC 7240). */
export function prefersAsync(header: string | undefined): boolean {
  return header !== undefined && header.split(',').some((p) => p.trim().toLowerCase() === 'respond-async');
}

const RECORD_ID = /^[1-9]\d{0,15}$/;

/**
 * A record id from a path segment: a positive integer up to 2^53 - 1 (API.md §1, the registry's
 * `MAX_ID`), else the record cannot exist (404).
 */
export function recordIdOf(segment: unknown, what: string): number {
  const id = typeof segment === 'string' && RECORD_ID.test(segment) ? Number(segment) : 0;
  if (!Number.isSafeInteger(id) || id < 1)
    throw baseError('NotFound', `${what} ${String(segment)} not found`);
  return id;
}

/**
 * Whether an `If-None-Match` header names `etag` (RFC 9110 §13.1.2, weak comparison; `*` names any):
 * the client's copy is current, and a GET answers 304.
 */
export function noneMatchHits(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  const opaque = (tag: string): string => tag.trim().replace(/^W\//, '');
  return header.split(',').some((tag) => tag.trim() === '*' || opaque(tag) === opaque(etag));
}
