// dependency-cruiser (`npm run lint`): no module may reach itself through its imports, type-only imports
// included. A cycle ties modules that read as separate into one (neither can be understood, tested or
// moved without the other) and makes what an import evaluates first depend on who imports whom.
// Cycles between workspaces cannot happen (tsc -b refuses circular project references), so the check
// reads each workspace's sources and stops at other packages.
/** @type {import('dependency-cruiser').IConfiguration} */
export default {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Move what both sides need into a module of its own, below both (a type, a constant).',
      from: {},
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)(dist|node_modules|\\.cache|coverage)/' },
    // Type-only imports are edges too (`import type`): a cycle of types is still a cycle to read.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.base.json' },
  },
};
