import { RunsInTurn } from './runs-in-turn.js';

/** A RunsInTurn whose first run lasts until `endFirst` is called; the runs after it end at once. */
function counted(): { turns: RunsInTurn; runs: () => number; endFirst: () => void } {
  let runs = 0;
  let endFirst: (() => void) | undefined;
  const turns = new RunsInTurn(() => {
    runs++;
    return runs === 1 ? new Promise<void>((resolve) => (endFirst = resolve)) : Promise.resolve();
  });
  return { turns, runs: () => runs, endFirst: () => endFirst?.() };
}

describe('RunsInTurn', () => {
  it('runs once more for a request that comes as a run ends, wherever it comes', async () => {
    // The request comes 0 to 8 microtasks after the task's first run resolves: every step between the
    // end of the task and the end of the run is tried. No clock.
    const missed: number[] = [];
    for (let hops = 0; hops <= 8; hops++) {
      const { turns, runs, endFirst } = counted();
      turns.request();
      endFirst();
      for (let hop = 0; hop < hops; hop++) await Promise.resolve();
      turns.request();
      await turns.idle();
      if (runs() !== 2) missed.push(hops);
    }
    expect(missed).toEqual([]);
  });

  it('runs once after a run, however many requests came during it', async () => {
    const { turns, runs, endFirst } = counted();
    turns.request();
    turns.request();
    turns.request();
    endFirst();
    await turns.idle();
    expect(runs()).toBe(2);
  });
});
