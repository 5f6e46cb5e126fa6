import express, { type RequestHandler } from 'express';
import { OAuthError } from './errors.js';

/** The parameters of a form-encoded OAuth request, each present at most once. */
export type OAuthParams = ReadonlyMap<string, string>;

declare module 'express-serve-static-core' {
  interface Locals {
    /** Set by {@link parseForm}. */
    form?: OAuthParams;
  }
}

/**
 * Reads one value per name from URL-encoded parameters. RFC 6749 §3.1-3.2: parameters without a value
 * count as omitted, and a parameter sent more than once makes the request invalid.
 */
export function singleValued(params: URLSearchParams): OAuthParams {
  const values = new Map<string, string>();
  for (const name of new Set(params.keys())) {
    const given = params.getAll(name).filter((v) => v !== '');
    if (given.length > 1) throw new OAuthError('invalid_request', `The ${name} parameter is repeated`);
    if (given[0] !== undefined) values.set(name, given[0]);
  }
  return values;
}

const FORM = 'application/x-www-form-urlencoded';
const readText = express.text({ type: FORM, limit: '64kb' });

/**
 * Parses an `application/x-www-form-urlencoded` body (RFC 6749 §3.2, RFC 7009 §2.1, RFC 7662 §2.1)
 * into `res.locals.form`. Other content types are an `invalid_request`.
 */
export const parseForm: RequestHandler = (req, res, next) => {
  readText(req, res, (error?: unknown) => {
    if (error !== undefined) {
      next(new OAuthError('invalid_request', 'The request body could not be read'));
      return;
    }
    if (!req.is(FORM) || typeof req.body !== 'string') {
      next(new OAuthError('invalid_request', `The request body must be ${FORM}`));
      return;
    }
    try {
      res.locals.form = singleValued(new URLSearchParams(req.body));
      next();
    } catch (parseError) {
      next(parseError);
    }
  });
};

/** The parsed form of a request behind {@link parseForm}. */
export function formOf(locals: { form?: OAuthParams }): OAuthParams {
  if (locals.form === undefined) throw new Error('parseForm must run before this handler');
  return locals.form;
}
