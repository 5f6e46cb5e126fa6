import type { IdempotencyStore } from './idempotency.js';
import { PUBLIC, bindRoutes, type RouteSpec } from './routes.js';

const spec = (operationId: string, more: Partial<RouteSpec> = {}): RouteSpec => ({
  method: 'GET',
  path: `/${operationId}`,
  operationId,
  summary: operationId,
  description: `The ${operationId} of the test`,
  tag: 'test',
  access: { kind: 'public' },
  responses: { 200: { description: 'ok' } },
  ...more,
});
const reply = { handle: () => Promise.resolve({ status: 200 }) };

describe('bindRoutes', () => {
  it('binds each spec to the operation of its operationId, admitted as its access says', async () => {
    const admitted: string[] = [];
    const routes = bindRoutes(
      [spec('a'), spec('b', { access: { kind: 'bearer', scopes: ['read'] } })],
      { a: reply, b: { handle: () => Promise.resolve({ status: 204 }) } },
      (access) => {
        admitted.push(`${access.kind}:${(access.scopes ?? []).join()}`);
        return PUBLIC;
      },
    );
    expect(routes.map((route) => [route.operationId, route.path])).toEqual([
      ['a', '/a'],
      ['b', '/b'],
    ]);
    expect(admitted).toEqual(['public:', 'bearer:read']);
    expect((await routes[1]!.handle({} as never)).status).toBe(204);
  });

  it('refuses a spec without an operation, and an operation without a spec', () => {
    expect(() => bindRoutes([spec('a'), spec('b')], { a: reply }, () => PUBLIC)).toThrow(
      'no operation serves b (GET /b)',
    );
    expect(() => bindRoutes([spec('a')], { a: reply, c: reply }, () => PUBLIC)).toThrow(
      'operations without a spec: c',
    );
  });

  it('refuses an OAuth-format spec whose operation renders no errors, and the other way round', () => {
    expect(() => bindRoutes([spec('a', { errorFormat: 'oauth' })], { a: reply }, () => PUBLIC)).toThrow(
      "a: its errorFormat and its operation's renderError disagree",
    );
    expect(() =>
      bindRoutes([spec('a')], { a: { ...reply, renderError: () => ({ status: 400 }) } }, () => PUBLIC),
    ).toThrow("a: its errorFormat and its operation's renderError disagree");
  });

  it("gives the service's idempotency store to the writes that declare Idempotency-Key, and refuses one without a store", () => {
    const store = {} as IdempotencyStore;
    const write = spec('w', { method: 'POST', headers: ['Idempotency-Key', 'Prefer'] });
    const routes = bindRoutes([spec('a'), write], { a: reply, w: reply }, () => PUBLIC, store);
    expect(routes.map((route) => route.idempotency)).toEqual([undefined, store]);
    expect(() => bindRoutes([write], { w: reply }, () => PUBLIC)).toThrow(
      'w: takes Idempotency-Key, and no store keeps them',
    );
  });
});
