import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { logSummary } from './log-summary.js';

describe('the platform log summary of a failed chaos run', () => {
  it('counts warnings and errors by service and message, most frequent first, with their times', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'chaos-log-'));
    const at = Date.parse('2026-11-28T07:45:00Z');
    const line = (level: number, seconds: number, name: string, msg: string) =>
      JSON.stringify({ level, time: at + seconds * 1000, name, msg });
    await writeFile(
      join(dir, 'log'),
      [
        line(50, 30, 'ofp-api', 'Kafka does not answer'),
        'not json: a line the process printed',
        line(30, 31, 'ofp-api', 'an info line, left out'),
        line(40, 40, 'ofp-projector', 'event handler failed;\n retrying'),
        line(50, 95, 'ofp-api', 'Kafka does not answer'),
        '',
      ].join('\n'),
    );
    try {
      expect(await logSummary(join(dir, 'log'), 5)).toEqual([
        '    2x 07:45:30-07:46:35 ofp-api: Kafka does not answer',
        '    1x 07:45:40-07:45:40 ofp-projector: event handler failed; retrying',
      ]);
    } finally {
      await rm(dir, { recursive: true });
    }
  });
});
