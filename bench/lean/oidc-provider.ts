// A peer of the platform's token endpoint for `bench:auth` (issue 28): node-oidc-provider, configured as a
// user would run it for server-to-server clients (client credentials, RFC 9068 JWT access tokens signed
// RS256 for one resource, 10,800 s), with its clients in Postgres through an adapter: one named SELECT per
// lookup, as its documentation's database adapters do. What it stores per token is nothing (a JWT access
// token is not persisted); its other models are kept in memory and unused here. It is not a lean baseline
// (it does more than the least), but runs through the same lifecycle (`startLean`).
import { generateKeyPairSync } from 'node:crypto';
import pg from 'pg';
import Provider, { type Adapter, type AdapterPayload } from 'oidc-provider';
import { leanSetting, serveLean } from '../lean.js';

const pool = new pg.Pool({ connectionString: leanSetting('DATABASE_URL'), max: 10 });
const audience = leanSetting('AUDIENCE');

await pool.query('CREATE TABLE IF NOT EXISTS oidc_clients (id text PRIMARY KEY, payload jsonb NOT NULL)');

const memory = new Map<string, AdapterPayload>();

/** oidc-provider's adapter interface: clients from Postgres, everything else (unused here) in memory. */
class ClientsInPostgres implements Adapter {
  constructor(private readonly model: string) {}

  async find(id: string): Promise<AdapterPayload | undefined> {
    if (this.model !== 'Client') return memory.get(`${this.model}:${id}`);
    const { rows } = await pool.query<{ payload: AdapterPayload }>({
      name: 'oidc-client',
      text: 'SELECT payload FROM oidc_clients WHERE id = $1',
      values: [id],
    });
    return rows[0]?.payload;
  }

  upsert(id: string, payload: AdapterPayload): Promise<void> {
    memory.set(`${this.model}:${id}`, payload);
    return Promise.resolve();
  }

  destroy(id: string): Promise<void> {
    memory.delete(`${this.model}:${id}`);
    return Promise.resolve();
  }

  consume(): Promise<void> {
    return Promise.resolve();
  }

  findByUid(): Promise<undefined> {
    return Promise.resolve(undefined);
  }

  findByUserCode(): Promise<undefined> {
    return Promise.resolve(undefined);
  }

  revokeByGrantId(): Promise<void> {
    return Promise.resolve();
  }
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const scope = 'read write operations';
const provider = new Provider(leanSetting('ISSUER'), {
  adapter: ClientsInPostgres,
  jwks: { keys: [{ ...privateKey.export({ format: 'jwk' }), kid: 'bench', alg: 'RS256', use: 'sig' }] },
  scopes: scope.split(' '),
  ttl: { ClientCredentials: 10_800 },
  clientDefaults: {
    grant_types: ['client_credentials'],
    response_types: [],
    token_endpoint_auth_method: 'client_secret_basic',
  },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => audience,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope,
        audience,
        accessTokenTTL: 10_800,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'RS256' } },
      }),
    },
  },
});

const callback = provider.callback();
serveLean(async (req, res) => {
  await callback(req, res);
});
