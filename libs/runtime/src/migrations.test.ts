import { mkdtemp, readdir, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrationFiles } from './migrations.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

describe('migrationFiles', () => {
  it('lists the migrations in order with their versions, leaving other files out', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'migrations-'));
    await writeFile(join(directory, '010_later.sql'), '');
    await writeFile(join(directory, '002_add.sql'), '');
    await writeFile(join(directory, 'README.txt'), '');
    expect(await migrationFiles(directory)).toEqual([
      { file: '002_add.sql', version: '002' },
      { file: '010_later.sql', version: '010' },
    ]);
  });

  it('refuses two files with one version, naming both', async () => {
    const directory = await mkdtemp(join(tmpdir(), 'migrations-'));
    await writeFile(join(directory, '011_claims.sql'), '');
    await writeFile(join(directory, '011_subscribers.sql'), '');
    await expect(migrationFiles(directory)).rejects.toThrow(
      `migrations 011_claims.sql and 011_subscribers.sql in ${directory} share version 011`,
    );
  });

  // Two branches that each add the next number merge without a conflict; this fails on the merge.
  it.each(['libs', 'services'])(
    'finds one file per version in every migrations folder under %s/',
    async (top) => {
      const folders = (await readdir(join(ROOT, top))).map((name) => join(ROOT, top, name, 'migrations'));
      const listed = await Promise.all(
        folders.map((folder) =>
          migrationFiles(folder).catch((error: NodeJS.ErrnoException) => {
            if (error.code === 'ENOENT') return [];
            throw error;
          }),
        ),
      );
      expect(listed.flat().length).toBeGreaterThan(0);
    },
  );
});
