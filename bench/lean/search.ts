// The lean baseline of `bench:query`: what answering a search as the api does takes at the least. A
// `node:http` server and a `pg` pool of the platform's size, the project's own `parseQuery` and
// `compileSearch`, the statement prepared as the api prepares it, and the same bytes written back; no
// token, rate limit, router, metrics or logs. Searches `/v2/<model>?q=...` of one organization.
import pg from 'pg';
import { preparedQuery, searchEnvelopeJson } from '@ofp/api';
import { compileSearch, findModel, parseQuery, type SearchRowText } from '@ofp/models';
import { leanSetting, serveLean } from '../lean.js';

const pool = new pg.Pool({
  connectionString: leanSetting('DATABASE_URL'),
  max: Number(leanSetting('POOL_SIZE')),
});
const orgId = Number(leanSetting('ORG_ID'));

serveLean(async (req, res) => {
  const url = new URL(req.url!, 'http://lean');
  const model = findModel(url.pathname.slice('/v2/'.length))!;
  const query = parseQuery(model, url.searchParams.get('q') ?? undefined);
  const { rows } = await pool.query<SearchRowText>(preparedQuery(compileSearch(model, orgId, query)));
  const row = rows[0]!;
  const body = searchEnvelopeJson({
    count: row.count,
    totalResults: row.total_results,
    offset: query.offset,
    results: row.results,
  });
  res.writeHead(200, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': Buffer.byteLength(body),
  });
  res.end(body);
});
