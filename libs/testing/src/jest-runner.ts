import { readFileSync } from 'node:fs';
import jestRunner, { type TestEvents, type UnsubscribeFn } from 'jest-runner';
import { provideInfrastructure } from './jest-infrastructure.js';

const TestRunner = jestRunner.default;
type Runner = InstanceType<typeof TestRunner>;
type Listener = (eventData: TestEvents[keyof TestEvents]) => void | Promise<void>;

/**
 * A test file that runs alone says so on a line of its own, with why: `// @runs-alone: <why>`. Such a
 * file measures time under a load it makes itself (latency before and after a fault, a bound on how
 * long the event loop is held), or faults what other files use at the same time.
 */
const RUNS_ALONE = /^\/\/ @runs-alone: \S/m;

/** Whether a test file runs with no other file beside it ({@link RUNS_ALONE}). */
function runsAlone(path: string): boolean {
  return RUNS_ALONE.test(readFileSync(path, 'utf8'));
}

/**
 * jest's own runner, in two rounds: first every file that may run beside another, `maxWorkers` at a
 * time (jest.config.js), each worker with a Postgres and a Kafka of its own (jest-infrastructure.ts);
 * then the files that run alone, one at a time. Most integration and end-to-end files wait more than
 * they compute (a broker's election, a platform's start, a consumer's session), so two at a time use
 * the two cores that one at a time left half idle.
 */
export default class RunsAloneLast extends TestRunner {
  readonly #listeners: [keyof TestEvents, Listener][] = [];

  override on<Name extends keyof TestEvents>(
    eventName: Name,
    listener: (eventData: TestEvents[Name]) => void | Promise<void>,
  ): UnsubscribeFn {
    const entry: [keyof TestEvents, Listener] = [eventName, listener as Listener];
    this.#listeners.push(entry);
    return () => {
      this.#listeners.splice(this.#listeners.indexOf(entry), 1);
    };
  }

  override async runTests(...[tests, watcher, options]: Parameters<Runner['runTests']>): Promise<void> {
    const alone = tests.filter((test) => runsAlone(test.path));
    const rounds = [
      { tests: tests.filter((test) => !alone.includes(test)), maxWorkers: this._globalConfig.maxWorkers },
      { tests: alone, maxWorkers: 1 },
    ];
    for (const round of rounds) {
      if (round.tests.length === 0) continue;
      await provideInfrastructure(options.serial ? 1 : Math.min(round.maxWorkers, round.tests.length));
      const runner = new TestRunner({ ...this._globalConfig, maxWorkers: round.maxWorkers }, this._context);
      const unsubscribes = this.#listeners.map(([eventName, listener]) => runner.on(eventName, listener));
      try {
        await runner.runTests(round.tests, watcher, options);
      } finally {
        for (const unsubscribe of unsubscribes) unsubscribe();
      }
    }
  }
}
