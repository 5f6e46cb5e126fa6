import { execFile } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import ts from 'typescript';
import { createIntegrator, REPOSITORY_ROOT, startTestPlatform, type RunningPlatform } from '@ofp/testing';

const README = fileURLToPath(new URL('../README.md', import.meta.url));
/** Where the example is written to run: inside the repository, so that `@ofp/client` resolves to the package. */
const FOLDER = `${REPOSITORY_ROOT}.cache/client-readme`;

/**
 * The README's example, as a user would copy it: type-checked against the package's published
 * declarations (dist, as `npm pack` ships them), then run against a running platform.
 */
describe("@ofp/client's README example", () => {
  let platform: RunningPlatform;
  beforeAll(async () => {
    platform = await startTestPlatform('standalone');
    await mkdir(FOLDER, { recursive: true });
  }, 120_000);
  afterAll(async () => {
    await platform?.stop();
    await rm(FOLDER, { recursive: true, force: true });
  }, 60_000);

  it('compiles with the published types and runs', async () => {
    const examples = [...(await readFile(README, 'utf8')).matchAll(/^```ts example\n([\s\S]*?)^```$/gm)];
    expect(examples).toHaveLength(1);
    const source = examples[0]![1]!;
    expect(source.split('\n').filter((line) => line.trim() !== '').length).toBeLessThanOrEqual(25);
    const file = `${FOLDER}/example.mts`;
    await writeFile(file, source);

    const program = ts.createProgram([file], {
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      target: ts.ScriptTarget.ES2023,
      strict: true,
      noEmit: true,
      types: ['node'],
      typeRoots: [`${REPOSITORY_ROOT}node_modules/@types`],
    });
    expect(
      ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' ')),
    ).toEqual([]);

    const integrator = await createIntegrator(platform, { name: 'README' });
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', file], {
      cwd: FOLDER,
      env: {
        PATH: process.env.PATH ?? '',
        OFP_URL: platform.apiUrl,
        OFP_CLIENT_ID: integrator.clientId,
        OFP_CLIENT_SECRET: integrator.clientSecret,
      },
    });
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toBe('found Lovelace (just created)');
    expect(lines[1]).toMatch(/^person\.created \d+$/);
    expect(lines[lines.length - 1]).toMatch(/^resume from \S+$/);
  }, 120_000);
});
