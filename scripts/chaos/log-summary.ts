import { readFile } from 'node:fs/promises';

/**
 * The platform log's most frequent warnings and errors, one line each: how many, the wall-clock times
 * of the first and the last, which service said it and what. A failed run prints it, since CI keeps
 * the run's output and not the log file.
 */
export async function logSummary(file: string, lines: number): Promise<string[]> {
  const seen = new Map<string, { count: number; first: number; last: number }>();
  for (const line of (await readFile(file, 'utf8')).split('\n')) {
    let entry: { level?: number; time?: number; name?: string; msg?: string };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    if ((entry.level ?? 0) < 40 || entry.time === undefined) continue;
    const key = `${entry.name ?? '?'}: ${(entry.msg ?? '').replace(/\s+/g, ' ').slice(0, 110)}`;
    const was = seen.get(key);
    if (was) {
      was.count++;
      was.first = Math.min(was.first, entry.time);
      was.last = Math.max(was.last, entry.time);
    } else seen.set(key, { count: 1, first: entry.time, last: entry.time });
  }
  const clock = (ms: number): string => new Date(ms).toISOString().slice(11, 19);
  return [...seen]
    .sort(([, a], [, b]) => b.count - a.count)
    .slice(0, lines)
    .map(
      ([key, { count, first, last }]) =>
        `${String(count).padStart(5)}x ${clock(first)}-${clock(last)} ${key}`,
    );
}
