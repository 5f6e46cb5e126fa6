import { ModuleRunner, type Module } from './lifecycle.js';
import type { Logger } from './logger.js';

/**
 * What a module's `init` returns: the value it gives the modules that depend on it (`value`, left
 * out when it gives nothing), and its lifecycle. `start` runs right after `init`, before any module
 * that depends on it is built; `stop` runs after every module that depends on it has stopped.
 */
export type ModulePart<T> = {
  readonly start?: () => Promise<void>;
  readonly stop?: () => Promise<void>;
  /** Whether it can take work now (default: once started). */
  readonly ready?: () => boolean;
} & (undefined extends T ? { readonly value?: T } : { readonly value: T });

/**
 * One module of a graph (compare Grafana Loki's `pkg/loki/modules.go`): the modules it needs
 * (`deps`: built first, and pulled into every graph that has this one), the modules it uses when the
 * graph has them (`optional`: built first when present, never pulled in), and `init`, which builds
 * it from their values. `P` maps each module's name to the value it provides; `C` is what every
 * module is given (the config, the logger).
 */
export interface ModuleDefinition<P, C, T, D extends keyof P = keyof P, O extends keyof P = never> {
  readonly deps: readonly D[];
  readonly optional?: readonly O[];
  init(given: C & Pick<P, D> & Partial<Pick<P, O>>): ModulePart<T> | Promise<ModulePart<T>>;
}

/** Every module of a graph by name, each providing its `P[name]`. */
export type ModuleDefinitions<P, C> = {
  readonly [N in keyof P]: ModuleDefinition<P, C, P[N], keyof P, keyof P>;
};

/** A definition as the runner handles it, whatever it provides. */
interface Node<P> {
  readonly deps: readonly (keyof P)[];
  readonly optional?: readonly (keyof P)[];
  init(given: Record<PropertyKey, unknown>): ModulePart<unknown> | Promise<ModulePart<unknown>>;
}

function nodeOf<P, C>(modules: ModuleDefinitions<P, C>, name: keyof P): Node<P> | undefined {
  return modules[name];
}

/**
 * The modules a graph of `roots` holds, dependencies first: the roots and everything they need,
 * depth first in the order declared (a module's optional dependencies before its required ones, where
 * present). A module that needs one not declared, or a cycle, is a programming error found before
 * anything is built.
 */
export function moduleOrder<P, C>(
  modules: ModuleDefinitions<P, C>,
  roots: readonly (keyof P)[],
): (keyof P)[] {
  const needed = new Set<keyof P>();
  const collect = (name: keyof P, path: readonly (keyof P)[]): void => {
    const definition = nodeOf(modules, name);
    if (!definition)
      throw new Error(`module ${String(path.at(-1))} depends on ${String(name)}, which is not declared`);
    if (needed.has(name)) return;
    needed.add(name);
    for (const dependency of definition.deps) collect(dependency, [...path, name]);
  };
  for (const root of roots) collect(root, []);

  const ordered: (keyof P)[] = [];
  const state = new Map<keyof P, 'visiting' | 'done'>();
  const visit = (name: keyof P, path: readonly (keyof P)[]): void => {
    const seen = state.get(name);
    if (seen === 'done') return;
    if (seen === 'visiting')
      throw new Error(`module dependency cycle: ${[...path, name].map(String).join(' -> ')}`);
    state.set(name, 'visiting');
    const definition = nodeOf(modules, name)!;
    for (const dependency of [
      ...(definition.optional ?? []).filter((o) => needed.has(o)),
      ...definition.deps,
    ])
      visit(dependency, [...path, name]);
    state.set(name, 'done');
    ordered.push(name);
  };
  for (const root of roots) visit(root, []);
  return ordered;
}

/**
 * A runner of the graph of `roots`: started, it builds and starts each module of {@link moduleOrder}
 * in turn, handing each the values of its dependencies; stopped, it stops them in reverse. Only the
 * modules of that graph are ever built.
 */
export function moduleGraph<P, C>(
  modules: ModuleDefinitions<P, C>,
  roots: readonly (keyof P)[],
  given: C,
  logger: Logger,
): ModuleRunner {
  const order = moduleOrder(modules, roots);
  const values = new Map<keyof P, unknown>();
  const nodes = order.map((name): Module => {
    const definition = nodeOf(modules, name)!;
    let part: ModulePart<unknown> | undefined;
    let started = false;
    return {
      name: String(name),
      async start() {
        const inputs: Record<PropertyKey, unknown> = { ...(given as object) };
        for (const dependency of [...definition.deps, ...(definition.optional ?? [])])
          if (values.has(dependency)) inputs[dependency] = values.get(dependency);
        const built = await definition.init(inputs);
        part = built;
        values.set(name, built.value);
        try {
          await built.start?.();
        } catch (error) {
          // Release what init acquired; the runner stops only the modules that started.
          await built.stop?.().catch((failure: unknown) => {
            logger.error(
              { module: String(name), err: failure },
              'module failed to stop after a failed start',
            );
          });
          throw error;
        }
        started = true;
      },
      async stop() {
        started = false;
        await part?.stop?.();
      },
      ready: () => started && (part?.ready?.() ?? true),
    };
  });
  return new ModuleRunner(nodes, logger);
}

/** The graph of `roots` as text, one module a line with what it needs: `npm run describe -- --modules`. */
export function describeModuleGraph<P, C>(
  modules: ModuleDefinitions<P, C>,
  roots: readonly (keyof P)[],
): string {
  const order = moduleOrder(modules, roots);
  return order
    .map((name) => {
      const { deps, optional = [] } = nodeOf(modules, name)!;
      const present = optional.filter((o) => order.includes(o));
      const needs = [...deps.map(String), ...present.map((o) => `${String(o)}?`)];
      return needs.length > 0 ? `${String(name)} ← ${needs.join(', ')}` : String(name);
    })
    .join('\n');
}
