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
  roots: ['<rootDir>/libs', '<rootDir>/services'].filter((r) => existsSync(r.replace('<rootDir>/', ''))),
  testEnvironment: 'node',
  extensionsToTreatAsEsm: ['.ts'],
  moduleNameMapper: { ...workspaceSources, '^(\\.{1,2}/.*)\\.js$': '$1' },
  transform: { '^.+\\.ts$': ['ts-jest', { useESM: true, tsconfig: '<rootDir>/tsconfig.base.json' }] },
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
};

// The global setup runs outside jest's module system, so it is the compiled one: `npm test` builds first.
const withInfrastructure = {
  globalSetup: '<rootDir>/libs/testing/dist/jest-global-setup.js',
  globalTeardown: '<rootDir>/libs/testing/dist/jest-global-teardown.js',
};

export default {
  // Test files run in worker processes, two at a time, even on a 2-core machine (where jest would
  // otherwise run them all in its own process): the int and e2e tiers wait on I/O, and whatever a
  // failed test leaves open ends with its worker rather than outliving the run's Postgres.
  maxWorkers: 2,
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
