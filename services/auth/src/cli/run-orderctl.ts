import { parseArgs } from 'node:util';

export interface OrderctlIo {
  env: Readonly<Record<string, string | undefined>>;
  fetch: typeof fetch;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const USAGE = `Usage: orderctl [--url URL] [--admin-token TOKEN] <command> [options]

Commands:
  create-organization --name NAME
  create-client --organization ID --name NAME --redirect-uri URI --scopes read,write[,operations]
  rotate-signing-key

--url defaults to $ORDERCTL_URL or http://localhost:8080; --admin-token to $ADMIN_TOKEN.
Prints the API's JSON answer; exits 1 when the API refuses.`;

const OPTIONS = {
  url: { type: 'string' },
  'admin-token': { type: 'string' },
  name: { type: 'string' },
  organization: { type: 'string' },
  'redirect-uri': { type: 'string' },
  scopes: { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

class UsageError extends Error {}

function option(values: Record<string, unknown>, name: string): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

/** Turns a command line into an admin API call (API.md §10). */
function request(
  command: string | undefined,
  values: Record<string, unknown>,
): { path: string; body: object } {
  switch (command) {
    case 'create-organization':
      return { path: '/admin/organizations', body: { name: option(values, 'name') } };
    case 'create-client':
      return {
        path: `/admin/organizations/${encodeURIComponent(option(values, 'organization'))}/clients`,
        body: {
          name: option(values, 'name'),
          redirect_uri: option(values, 'redirect-uri'),
          scopes: option(values, 'scopes')
            .split(',')
            .map((s) => s.trim())
            .filter((s) => s !== ''),
        },
      };
    case 'rotate-signing-key':
      return { path: '/admin/signing_keys/rotate', body: {} };
    default:
      throw new UsageError(command === undefined ? 'a command is required' : `unknown command ${command}`);
  }
}

/** Runs one orderctl command line and returns the exit code. */
export async function runOrderctl(argv: readonly string[], io: OrderctlIo): Promise<number> {
  let call: { path: string; body: object };
  let url: string;
  let adminToken: string;
  try {
    const { values, positionals } = parseArgs({ args: [...argv], options: OPTIONS, allowPositionals: true });
    if (values.help === true) {
      io.stdout(USAGE);
      return 0;
    }
    if (positionals.length > 1) throw new UsageError(`unexpected argument ${positionals[1]}`);
    call = request(positionals[0], values);
    url = values.url ?? io.env.ORDERCTL_URL ?? 'http://localhost:8080';
    const token = values['admin-token'] ?? io.env.ADMIN_TOKEN;
    if (token === undefined || token === '') throw new UsageError('--admin-token or ADMIN_TOKEN is required');
    adminToken = token;
  } catch (error) {
    if (!(
      error instanceof UsageError || (error as { code?: unknown }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION'
    )) {
      throw error;
    }
    io.stderr(`orderctl: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }

  let response: Response;
  try {
    response = await io.fetch(new URL(call.path, url), {
      method: 'POST',
      headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
      body: JSON.stringify(call.body),
    });
  } catch (error) {
    io.stderr(`orderctl: cannot reach ${url}: ${(error as Error).message}`);
    return 1;
  }
  const text = await response.text();
  let output = text;
  try {
    output = JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    // Not JSON (a proxy's error page, say): print it as it came.
  }
  if (response.ok) {
    io.stdout(output);
    return 0;
  }
  io.stderr(output);
  return 1;
}
