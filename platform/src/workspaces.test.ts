import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

interface Workspace {
  readonly path: string;
  readonly name: string;
  readonly dependencies: ReadonlySet<string>;
  readonly devDependencies: ReadonlySet<string>;
}

/** Every workspace of the repository (package.json `workspaces`), with its @ofp dependencies. */
function workspaces(): Workspace[] {
  const folders = [
    ...['libs', 'services'].flatMap((group) =>
      readdirSync(join(ROOT, group)).map((name) => `${group}/${name}`),
    ),
    'platform',
  ].filter((path) => existsSync(join(ROOT, path, 'package.json')));
  return folders.map((path) => {
    const manifest = JSON.parse(readFileSync(join(ROOT, path, 'package.json'), 'utf8')) as {
      name: string;
      dependencies?: Record<string, string>;
      devDependencies?: Record<string, string>;
    };
    const ours = (deps?: Record<string, string>) =>
      new Set(Object.keys(deps ?? {}).filter((name) => name.startsWith('@ofp/')));
    return {
      path,
      name: manifest.name,
      dependencies: ours(manifest.dependencies),
      devDependencies: ours(manifest.devDependencies),
    };
  });
}

function sources(folder: string): string[] {
  return readdirSync(folder, { withFileTypes: true }).flatMap((entry) => {
    const path = join(folder, entry.name);
    if (entry.isDirectory())
      return entry.name === 'node_modules' || entry.name === 'dist' ? [] : sources(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Tests, fixtures and test harnesses (`src/testing/`): what only a development install runs. */
const forTests = (file: string) => /\.(test|fixture)\.ts$/.test(file) || file.includes('/src/testing/');

describe('the workspaces (issue 29 item 5: libraries along their seams)', () => {
  const all = workspaces();
  const byName = new Map(all.map((workspace) => [workspace.name, workspace]));

  it('declare every workspace their code imports: dependencies for what runs, devDependencies for tests', () => {
    const undeclared: string[] = [];
    for (const workspace of all)
      for (const file of sources(join(ROOT, workspace.path, 'src'))) {
        const text = readFileSync(file, 'utf8');
        for (const [, imported] of text.matchAll(/from '(@ofp\/[a-z-]+)/g)) {
          if (imported === workspace.name) continue;
          const declared =
            workspace.dependencies.has(imported!) ||
            (forTests(file) && workspace.devDependencies.has(imported!));
          if (!declared) undeclared.push(`${relative(ROOT, file)} imports ${imported}`);
        }
      }
    expect([...new Set(undeclared)]).toEqual([]);
  });

  it('are layered: a library depends on libraries only, a service on no other service', () => {
    const above: string[] = [];
    for (const workspace of all) {
      const group = workspace.path.split('/')[0];
      for (const dependency of workspace.dependencies) {
        const target = byName.get(dependency)?.path.split('/')[0];
        if (group === 'libs' && target !== 'libs') above.push(`${workspace.name} → ${dependency}`);
        if (group === 'services' && target === 'services') above.push(`${workspace.name} → ${dependency}`);
      }
    }
    expect(above).toEqual([]);
  });

  it('leave the test harness out of what runs: nothing depends on @ofp/testing but for its tests', () => {
    expect(all.filter((workspace) => workspace.dependencies.has('@ofp/testing')).map((w) => w.name)).toEqual(
      [],
    );
  });
});
