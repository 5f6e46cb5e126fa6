// Test tiers by file name (STYLE.md): *.test.ts unit, *.int.test.ts real Postgres/Kafka, *.e2e.test.ts processes over HTTP.
// Workspace packages resolve to their TypeScript sources, so tests never need a build first.
import { readdirSync, existsSync } from 'node:fs';

const workspaceSources = {};
for (const dir of ['libs', 'services']) {
  if (!existsSync(dir)) continue;
  for (const name of readdirSync(dir)) {
    if (existsSync(`${dir}/${name}/src/index.ts`)) {
      workspaceSources[`^@ofp/${name}$`] = `<rootDir>/${dir}/${name}/src/index.ts`;
      workspaceSources[`^@ofp/${name}/([a-z-]+)$`] = `<rootDir>/${dir}/${name}/src/$1.ts`;
    }
  }
}

const base = {
  rootDir: import.meta.dirname,
  roots: ['<rootDir>/libs', '<rootDir>/services', '<rootDir>/platform', '<rootDir>/scripts'].filter((r) =>
    existsSync(r.replace('<rootDir>/', '')),
  ),
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { ...workspaceSources, '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.base.json' }] },
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};

// The global setup and the runner run outside jest's module system, so they are the compiled ones:
// `npm test` builds first.
const withInfrastructure = {
  globalSetup: '<rootDir>/libs/testing/dist/jest-global-setup.js',
  // Each worker's own Postgres and Kafka, of those the global setup started.
  setupFiles: ['<rootDir>/libs/testing/src/jest-worker-setup.ts'],
  globalTeardown: '<rootDir>/libs/testing/dist/jest-global-teardown.js',
  runner: '<rootDir>/libs/testing/dist/jest-runner.js',
};

export default {
  // Two test files at a time, each in a worker process rather than in jest's own (whatever a failed
  // test leaves open ends with its worker instead of outliving the run's Postgres in the runner; a
  // memory limit is what makes jest use workers whatever their number). One at a time left half of two
  // cores idle: most integration and end-to-end files wait more than they compute. A file that must not
  // share the machine says `// @runs-alone: <why>` and runs after the others, one at a time
  // (libs/testing/src/jest-runner.ts).
  maxWorkers: 2,
  // Integration files start databases and brokers on a two-core machine shared with Postgres and Kafka:
  // jest's default of 5 s per test or hook fails healthy tests there whenever the machine is busy.
  testTimeout: 30_000,
  workerIdleMemoryLimit: '1GB',
  projects: [
    {
      ...base,
      displayName: 'unit',
      testMatch: ['**/*.test.ts'],
      testPathIgnorePatterns: [...base.testPathIgnorePatterns, '\\.int\\.test\\.ts$', '\\.e2e\\.test\\.ts$'],
    },
    { ...base, ...withInfrastructure, displayName: 'int', testMatch: ['**/*.int.test.ts'] },
    { ...base, ...withInfrastructure, displayName: 'e2e', testMatch: ['**/*.e2e.test.ts'] },
  ],
};
