import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import {
  createIntegrator,
  freePort,
  searchPath,
  startTestPlatform,
  type Integrator,
  type RunningPlatform,
} from '@ofp/testing';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

describe('examples/webhook-receiver.mjs with a token', () => {
  let platform: RunningPlatform;
  let integrator: Integrator;
  beforeAll(async () => {
    platform = await startTestPlatform('standalone', { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    integrator = await createIntegrator(platform, { name: 'Receiver' });
  }, 120_000);
  afterAll(() => platform?.stop());

  it('subscribes itself through the typed client, prints verified events, and unsubscribes when stopped', async () => {
    const port = await freePort();
    const receiver = spawn(process.execPath, ['examples/webhook-receiver.mjs', 'person.created'], {
      cwd: ROOT,
      env: {
        PATH: process.env.PATH ?? '',
        PORT: String(port),
        TOKEN: integrator.accessToken,
        API_URL: platform.apiUrl,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    receiver.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    receiver.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) => receiver.once('exit', resolve));
    const printed = async (pattern: RegExp) => {
      const deadline = Date.now() + 20_000;
      while (!pattern.test(output)) {
        if (Date.now() > deadline || receiver.exitCode !== null)
          throw new Error(`the receiver did not print ${String(pattern)}:\n${output}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    try {
      await printed(/^webhook-receiver: subscribed as webhook (\d+) to person\.created$/m);
      const webhookId = Number(/subscribed as webhook (\d+)/.exec(output)![1]);
      const person = await integrator.request<{ id: number }>('POST', '/v2/people', {
        body: { last_name: 'Babbage' },
      });
      await printed(
        new RegExp(`^person\\.created ${person.body.results.id} sequence 1 \\(signature verified`, 'm'),
      );

      receiver.kill('SIGTERM');
      expect(await exited).toBe(0);
      expect(output).toContain(`webhook-receiver: removed webhook ${webhookId} (200)`);
      const left = await integrator.request<unknown[]>(
        'GET',
        searchPath('webhooks', { filters: [{ operand: 'id', operator: '=', value: webhookId }] }),
      );
      expect(left.body.results).toEqual([]);
    } finally {
      receiver.kill('SIGKILL');
    }
  }, 60_000);
});
