// Shared setup of the Kafka benchmarks: fresh topics on the one broker they start, and each measured run
// in a process of its own.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Kafka, ensureTopics, kafkaClientConfig, type TopicSettings } from '@ofp/bus';
import { createLogger } from '@ofp/runtime';

/**
 * Creates the topics `names` gives for a fresh prefix (six partitions, one replica) on `brokers`,
 * through a client named `name`, and returns their settings for the benchmark's processes.
 */
export async function createBenchTopics(
  brokers: readonly string[],
  name: string,
  names: (topics: TopicSettings) => readonly string[],
): Promise<TopicSettings> {
  const topics: TopicSettings = {
    prefix: `bench.${randomUUID().slice(0, 8)}.`,
    partitions: 6,
    replicationFactor: 1,
    create: true,
  };
  await ensureTopics(
    new Kafka(kafkaClientConfig(brokers, name)),
    topics,
    names(topics),
    createLogger({ name, level: 'warn' }),
  );
  return topics;
}

/**
 * Runs `script` with `argument` in a process of its own and resolves with the result it printed
 * through `printResult`. The result is the last line of its standard output: the Kafka clients' warnings,
 * if any, are log lines before it.
 */
export function runInProcess<T>(
  script: string,
  argument: string,
  environment: Record<string, string>,
): Promise<T> {
  const child = spawn(process.execPath, ['--import', 'tsx', script, argument], {
    env: { ...process.env, ...environment },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((resolve, reject) =>
    child.once('exit', (code) =>
      code === 0
        ? resolve(JSON.parse(output.trim().split('\n').at(-1)!) as T)
        : reject(new Error(`${argument} exited with ${code}`)),
    ),
  );
}

/** Prints a run's result for `runInProcess`, on a line of its own. */
export function printResult(result: unknown): void {
  process.stdout.write(`\n${JSON.stringify(result)}\n`);
}
