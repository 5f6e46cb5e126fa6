import { randomBytes } from 'node:crypto';
import {
  createTestDatabase,
  freePort,
  runCommand,
  runToExit,
  spawnStandalone,
  waitUntil,
  type StandaloneProcess,
  type TestDatabase,
  testSecretsKeyFile,
} from '@ofp/testing';

/**
 * API.md §10: in the distributed shape the admin API listens on its own port (ADMIN_PORT), which the
 * chart keeps inside the cluster; the public port, behind the Ingress, does not serve it.
 */
describe('the auth service in the distributed shape (TARGET=auth)', () => {
  const adminToken = randomBytes(24).toString('base64url');
  let database: TestDatabase;
  let auth: StandaloneProcess;
  let adminUrl: string;

  beforeAll(async () => {
    database = await createTestDatabase();
    const adminPort = await freePort();
    adminUrl = `http://127.0.0.1:${adminPort}`;
    auth = await spawnStandalone({
      env: {
        TARGET: 'auth',
        DATABASE_URL: database.url,
        ADMIN_TOKEN: adminToken,
        SECRETS_KEY_FILE: testSecretsKeyFile(),
        ADMIN_PORT: String(adminPort),
      },
    });
    await waitUntil(auth.url, 200, auth, 60_000);
  }, 120_000);

  afterAll(async () => {
    await auth?.stop();
    await database?.drop();
  }, 60_000);

  const bearer = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };

  it('serves the admin API on ADMIN_PORT, with its token', async () => {
    const created = await fetch(`${adminUrl}/admin/organizations`, {
      method: 'POST',
      headers: bearer,
      body: JSON.stringify({ name: 'Admin port' }),
    });
    expect(created.status).toBe(201);
    const refused = await fetch(`${adminUrl}/admin/organizations`, {
      headers: { authorization: 'Bearer nope' },
    });
    expect(refused.status).toBe(401);
    expect((await fetch(`${adminUrl}/readyz`)).status).toBe(200);
  });

  it('does not serve it on the public port, which serves OAuth', async () => {
    const answer = await fetch(`${auth.url}/admin/organizations`, { headers: bearer });
    expect(answer.status).toBe(404);
    expect(await answer.json()).toMatchObject({ errors: expect.anything() });
    expect((await fetch(`${auth.url}/.well-known/oauth-authorization-server`)).status).toBe(200);
    expect((await fetch(`${adminUrl}/.well-known/oauth-authorization-server`)).status).toBe(404);
  });

  it('orderctl finds the admin API by ADMIN_PORT, as in the auth container', async () => {
    const listed = await runCommand(
      [process.execPath, 'services/auth/dist/cli/orderctl.js', '--json', 'list-organizations'],
      {
        env: {
          ADMIN_PORT: new URL(adminUrl).port,
          ADMIN_TOKEN: adminToken,
          SECRETS_KEY_FILE: testSecretsKeyFile(),
          PUBLIC_URL: 'https://ofp.example',
        },
      },
    );
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.stdout)).toMatchObject({
      results: expect.arrayContaining([expect.objectContaining({ name: 'Admin port' })]),
    });
  });

  it('refuses ADMIN_PORT equal to PORT with one line naming it', async () => {
    const port = String(await freePort());
    const result = await runToExit({
      env: {
        TARGET: 'auth',
        DATABASE_URL: database.url,
        ADMIN_TOKEN: adminToken,
        SECRETS_KEY_FILE: testSecretsKeyFile(),
        PORT: port,
        ADMIN_PORT: port,
      },
    });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`ADMIN_PORT: must differ from PORT (${port})`);
  });
});
