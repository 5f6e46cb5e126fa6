import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { describeError } from '@ofp/runtime';
import { instanceSettings } from '@ofp/standalone';
import type { OrderctlIo } from './orderctl-io.js';
import { rotateSecretsKeyCommand } from './rotate-secrets-key.js';

const USAGE = `Usage: orderctl [--url URL] [--admin-token TOKEN] [--json] <command> [options]

Commands:
  list-organizations [--limit N] [--offset N]
  create-organization --name NAME
  list-clients --organization ID [--limit N] [--offset N]
  create-client --organization ID --name NAME --scopes read,write,operations [--redirect-uri URI]
                [--jwks FILE] [--dpop]
                (without --redirect-uri: a client of the client_credentials grant alone; with --jwks,
                a JWKS file of its public keys: it authenticates with private_key_jwt and has no secret;
                with --dpop, it gets tokens only with a DPoP proof, bound to its key: RFC 9449)
  set-client-keys --client CLIENT_ID --jwks FILE
                (a private_key_jwt client's public keys, replaced: rotate by listing the new with the old)
  rotate-client-secret --client CLIENT_ID
  disable-client --client CLIENT_ID      (its grants are revoked; its tokens stop working)
  rotate-signing-key
  list-parked-events [--group GROUP] [--limit N] [--offset N]
                (events a consumer group could not apply, with the reason; API.md §12)
  retry-parked-event --id ID             (applies it, then the events of its stream behind it, in order)
  rotate-secrets-key [--wait SECONDS]
                (re-seals every stored secret under the first key of SECRETS_KEY_FILE, else
                DATA_DIR/secrets-key, in the database of DATABASE_URL, else of the instance on DATA_DIR;
                waits up to --wait seconds, default 120, until every running process seals with that key;
                docs/secrets.md)

--url: the admin API, else $ORDERCTL_URL, http://localhost:$ADMIN_PORT (in the auth service's
  container), $PUBLIC_URL, http://localhost:$PORT, or the standalone instance running on $DATA_DIR
  (default ./.data). Distributed, the admin API is on the auth service's ADMIN_PORT, not the public URL.
--admin-token: else $ADMIN_TOKEN, or the one the instance keeps in DATA_DIR/admin-token.
--json: print the API's JSON answer as it came (on stdout, also when the API refuses).
Exit codes: 0 done, 1 the API refused or could not be reached, 2 a bad command line.`;

const OPTIONS = {
  url: { type: 'string' },
  'admin-token': { type: 'string' },
  json: { type: 'boolean' },
  version: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  name: { type: 'string' },
  organization: { type: 'string' },
  client: { type: 'string' },
  'redirect-uri': { type: 'string' },
  jwks: { type: 'string' },
  dpop: { type: 'boolean' },
  scopes: { type: 'string' },
  limit: { type: 'string' },
  offset: { type: 'string' },
  group: { type: 'string' },
  id: { type: 'string' },
  wait: { type: 'string' },
} as const;

class UsageError extends Error {}

/** An admin API call (API.md §10) and how to tell its answer to a person. */
interface Call {
  method: 'GET' | 'POST' | 'PUT';
  path: string;
  body?: object;
  describe: (results: unknown, envelope: Envelope) => string;
}

interface Envelope {
  count?: number;
  total_results?: number;
  offset?: number;
  results?: unknown;
  errors?: Record<string, string[]> | null;
}

interface ParkedEventJson {
  id: number;
  consumer_group: string;
  stream_id: string;
  version: number;
  organization_id: number | null;
  reason: string;
  waiting: number;
  parked_at: string;
}

interface OrganizationJson {
  id: number;
  name: string;
  created_at: string;
}

interface ClientJson {
  client_id: string;
  client_secret?: string;
  organization_id: number;
  name: string;
  redirect_uri: string | null;
  scopes: string[];
  created_at: string;
  disabled_at: string | null;
  jwks?: { keys: unknown[] } | null;
  dpop_bound_access_tokens?: boolean;
  revoked_grants?: number;
}

/** The JWKS file `--jwks` names, as JSON (the admin API checks its keys). */
function jwksFile(values: Record<string, unknown>): unknown {
  const path = option(values, 'jwks');
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new UsageError(`--jwks: cannot read ${path}: ${(error as Error).message}`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new UsageError(`--jwks: ${path} is not JSON`);
  }
}

function option(values: Record<string, unknown>, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function pageQuery(values: Record<string, unknown>): string {
  const query = new URLSearchParams();
  for (const name of ['limit', 'offset']) {
    if (typeof values[name] === 'string') query.set(name, values[name]);
  }
  return query.size === 0 ? '' : `?${query.toString()}`;
}

/** Rows under a header, each column as wide as its widest cell. */
function table(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]!.length)));
  return [header, ...rows]
    .map((row) =>
      row
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

function pageLine(envelope: Envelope, noun: string): string {
  const shown = envelope.count ?? 0;
  const total = envelope.total_results ?? shown;
  if (total === 0) return `No ${noun}.`;
  const offset = envelope.offset ?? 0;
  return shown === total
    ? `${total} ${noun}.`
    : `${noun} ${offset + 1}-${offset + shown} of ${total} (--offset, --limit for more).`;
}

function clientLines(client: ClientJson): string[] {
  return [
    `client_id:     ${client.client_id}`,
    ...(client.client_secret === undefined
      ? []
      : [`client_secret: ${client.client_secret}   (shown this once)`]),
    `organization:  ${client.organization_id}`,
    `name:          ${client.name}`,
    `scopes:        ${client.scopes.join(' ')}`,
    `redirect_uri:  ${client.redirect_uri ?? '(none: client_credentials only)'}`,
    ...(client.jwks == null
      ? []
      : [`auth method:   private_key_jwt (${client.jwks.keys.length} public keys, no secret)`]),
    ...(client.dpop_bound_access_tokens === true
      ? ['tokens:        DPoP-bound (a proof with every token request and API call: RFC 9449)']
      : []),
  ];
}

/** Turns a command line into an admin API call. */
function callOf(command: string | undefined, values: Record<string, unknown>): Call {
  switch (command) {
    case 'list-organizations':
      return {
        method: 'GET',
        path: `/admin/organizations${pageQuery(values)}`,
        describe: (results, envelope) => {
          const organizations = results as OrganizationJson[];
          return [
            ...(organizations.length === 0
              ? []
              : [
                  table(
                    ['ID', 'NAME', 'CREATED'],
                    organizations.map((o) => [String(o.id), o.name, o.created_at]),
                  ),
                ]),
            pageLine(envelope, 'organizations'),
          ].join('\n');
        },
      };
    case 'create-organization':
      return {
        method: 'POST',
        path: '/admin/organizations',
        body: { name: option(values, 'name') },
        describe: (results) => {
          const organization = results as OrganizationJson;
          return `Created organization ${organization.id} (${organization.name}).`;
        },
      };
    case 'list-clients':
      return {
        method: 'GET',
        path: `/admin/organizations/${encodeURIComponent(option(values, 'organization'))}/clients${pageQuery(values)}`,
        describe: (results, envelope) => {
          const clients = results as ClientJson[];
          return [
            ...(clients.length === 0
              ? []
              : [
                  table(
                    ['CLIENT_ID', 'NAME', 'SCOPES', 'REDIRECT_URI', 'STATUS'],
                    clients.map((c) => [
                      c.client_id,
                      c.name,
                      c.scopes.join(','),
                      c.redirect_uri ?? '-',
                      c.disabled_at === null ? 'active' : `disabled ${c.disabled_at}`,
                    ]),
                  ),
                ]),
            pageLine(envelope, 'clients'),
          ].join('\n');
        },
      };
    case 'create-client': {
      const redirectUri = values['redirect-uri'];
      return {
        method: 'POST',
        path: `/admin/organizations/${encodeURIComponent(option(values, 'organization'))}/clients`,
        body: {
          name: option(values, 'name'),
          ...(typeof redirectUri === 'string' ? { redirect_uri: redirectUri } : {}),
          ...(values.jwks === undefined ? {} : { jwks: jwksFile(values) }),
          ...(values.dpop === true ? { dpop_bound_access_tokens: true } : {}),
          scopes: option(values, 'scopes')
            .split(',')
            .map((s) => s.trim())
            .filter((s) => s !== ''),
        },
        describe: (results) => ['Created the client:', ...clientLines(results as ClientJson)].join('\n'),
      };
    }
    case 'set-client-keys':
      return {
        method: 'PUT',
        path: `/admin/clients/${encodeURIComponent(option(values, 'client'))}/jwks`,
        body: { jwks: jwksFile(values) },
        describe: (results) =>
          [
            'New public keys; assertions signed by others are refused:',
            ...clientLines(results as ClientJson),
          ].join('\n'),
      };
    case 'rotate-client-secret':
      return {
        method: 'POST',
        path: `/admin/clients/${encodeURIComponent(option(values, 'client'))}/rotate_secret`,
        describe: (results) =>
          ['New secret; the old one no longer works:', ...clientLines(results as ClientJson)].join('\n'),
      };
    case 'disable-client':
      return {
        method: 'POST',
        path: `/admin/clients/${encodeURIComponent(option(values, 'client'))}/disable`,
        describe: (results) => {
          const client = results as ClientJson;
          return `Client ${client.client_id} is disabled (since ${client.disabled_at}); ${client.revoked_grants ?? 0} grants revoked now.`;
        },
      };
    case 'rotate-signing-key':
      return {
        method: 'POST',
        path: '/admin/signing_keys/rotate',
        describe: (results) => {
          const { kid, retired_kid } = results as { kid: string; retired_kid: string | null };
          return `Tokens are now signed with key ${kid}${retired_kid ? `; ${retired_kid} stays published until its tokens expire` : ''}.`;
        },
      };
    case 'list-parked-events': {
      const group = values.group;
      const page = pageQuery(values);
      const groupQuery = typeof group === 'string' ? `consumer_group=${encodeURIComponent(group)}` : '';
      return {
        method: 'GET',
        path: `/admin/parked_events${page}${groupQuery && (page ? `&${groupQuery}` : `?${groupQuery}`)}`,
        describe: (results, envelope) => {
          const parked = results as ParkedEventJson[];
          return [
            ...(parked.length === 0
              ? []
              : [
                  table(
                    ['ID', 'GROUP', 'STREAM', 'VERSION', 'ORGANIZATION', 'WAITING', 'PARKED', 'REASON'],
                    parked.map((p) => [
                      String(p.id),
                      p.consumer_group,
                      p.stream_id,
                      String(p.version),
                      String(p.organization_id ?? '-'),
                      String(p.waiting),
                      p.parked_at,
                      p.reason,
                    ]),
                  ),
                ]),
            pageLine(envelope, 'parked events'),
          ].join('\n');
        },
      };
    }
    case 'retry-parked-event':
      return {
        method: 'POST',
        path: `/admin/parked_events/${encodeURIComponent(option(values, 'id'))}/retry`,
        describe: (results) => {
          const parked = results as ParkedEventJson;
          return `Retry of parked event ${parked.id} asked for: ${parked.consumer_group} applies ${parked.stream_id} v${parked.version}, then the ${parked.waiting} event(s) behind it (list-parked-events shows it again if it fails).`;
        },
      };
    default:
      throw new UsageError(command === undefined ? 'a command is required' : `unknown command ${command}`);
  }
}

/** What the API's errors say, one line (`name: is required; scopes[1]: must be one of ...`). */
function errorsOf(envelope: Envelope): string | undefined {
  if (!envelope.errors) return undefined;
  return Object.entries(envelope.errors)
    .map(([column, messages]) =>
      column === 'base' ? messages.join('; ') : `${column}: ${messages.join('; ')}`,
    )
    .join('; ');
}

/** Runs one orderctl command line (API.md §10) and returns the exit code. */
export async function runOrderctl(argv: readonly string[], io: OrderctlIo): Promise<number> {
  // rotate-secrets-key talks to the database, not the admin API.
  let command: Call | { rotateWaitSeconds: number };
  let json: boolean;
  let values: Record<string, unknown>;
  try {
    const parsed = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true });
    values = parsed.values;
    if (values.help === true) {
      io.stdout(USAGE);
      return 0;
    }
    if (values.version === true) {
      io.stdout(`orderctl ${io.version}`);
      return 0;
    }
    if (parsed.positionals.length > 1) throw new UsageError(`unexpected argument ${parsed.positionals[1]}`);
    if (parsed.positionals[0] === 'rotate-secrets-key') {
      const rotateWaitSeconds = Number(values.wait ?? 120);
      if (!Number.isInteger(rotateWaitSeconds) || rotateWaitSeconds < 0)
        throw new UsageError('--wait: a whole number of seconds');
      command = { rotateWaitSeconds };
    } else command = callOf(parsed.positionals[0], values);
    json = values.json === true;
  } catch (error) {
    const code = (error as { code?: unknown }).code;
    if (!(error instanceof UsageError || (typeof code === 'string' && code.startsWith('ERR_PARSE_ARGS')))) {
      throw error;
    }
    io.stderr(`orderctl: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if ('rotateWaitSeconds' in command) return rotateSecretsKeyCommand(command.rotateWaitSeconds, io);
  const call = command;

  const settings = await instanceSettings(io.env);
  const url =
    typeof values.url === 'string'
      ? { value: values.url, from: '--url' }
      : io.env.ORDERCTL_URL
        ? { value: io.env.ORDERCTL_URL, from: 'ORDERCTL_URL' }
        : io.env.ADMIN_PORT
          ? { value: `http://localhost:${io.env.ADMIN_PORT}`, from: 'ADMIN_PORT' }
          : settings.url;
  if (url === undefined) {
    io.stderr(
      `orderctl: no platform to talk to: no instance runs on DATA_DIR ${settings.dataDir}; start one (npm start), or give --url (or set PUBLIC_URL or PORT)`,
    );
    return 1;
  }
  const adminToken =
    typeof values['admin-token'] === 'string' ? values['admin-token'] : settings.adminToken?.value;
  if (adminToken === undefined || adminToken === '') {
    io.stderr(
      `orderctl: no admin token: give --admin-token or set ADMIN_TOKEN (a standalone instance keeps its own in DATA_DIR/admin-token; none in ${settings.dataDir})`,
    );
    return 1;
  }

  let response: Response;
  let target: URL;
  try {
    target = new URL(call.path, url.value);
  } catch {
    io.stderr(`orderctl: ${url.value} (from ${url.from}) is not a URL`);
    return 1;
  }
  try {
    response = await io.fetch(target, {
      method: call.method,
      headers: {
        authorization: `Bearer ${adminToken}`,
        ...(call.body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(call.body === undefined ? {} : { body: JSON.stringify(call.body) }),
    });
  } catch (error) {
    io.stderr(`orderctl: cannot reach ${url.value} (from ${url.from}): ${describeError(error)}`);
    return 1;
  }
  const text = await response.text();
  let envelope: Envelope | undefined;
  try {
    envelope = JSON.parse(text) as Envelope;
  } catch {
    // Not JSON (a proxy's error page, say): shown as it came.
  }
  if (json) {
    io.stdout(envelope === undefined ? text : JSON.stringify(envelope, null, 2));
    return response.ok ? 0 : 1;
  }
  if (!response.ok || envelope === undefined) {
    const reason = (envelope && errorsOf(envelope)) ?? text.trim().slice(0, 500);
    io.stderr(`orderctl: ${call.method} ${target.pathname} answered ${response.status}: ${reason}`);
    return 1;
  }
  io.stdout(call.describe(envelope.results, envelope));
  return 0;
}
