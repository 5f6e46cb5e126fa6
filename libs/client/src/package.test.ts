import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));

describe('the published package (npm pack)', () => {
  it('ships the licence, the README and the built modules with their types, nothing else', async () => {
    // What `npm publish` would upload, from the build in dist (npm test builds first).
    const { stdout } = await promisify(execFile)('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
      cwd: PACKAGE,
    });
    const [packed] = JSON.parse(stdout) as [{ files: { path: string }[] }];
    const files = packed.files.map(({ path }) => path).sort();
    expect(files).toEqual(
      expect.arrayContaining(['LICENSE', 'README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts']),
    );
    expect(
      files.filter((path) => !/^(LICENSE|README\.md|package\.json|dist\/[a-z-]+\.(js|d\.ts))$/.test(path)),
    ).toEqual([]);
    expect(files.filter((path) => /test|fixture/.test(path))).toEqual([]);
  }, 60_000);
});
