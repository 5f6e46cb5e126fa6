/** A clock that tests move by hand, for code that takes an injected `() => Date`. */
export interface ManualClock {
  (): Date;
  /** Moves the clock forward. */
  advance(ms: number): void;
  /** Sets the clock to `at`. */
  set(at: Date): void;
}

export function manualClock(start: Date = new Date()): ManualClock {
  let now = start.getTime();
  return Object.assign(() => new Date(now), {
    advance(ms: number) {
      now += ms;
    },
    set(at: Date) {
      now = at.getTime();
    },
  });
}
