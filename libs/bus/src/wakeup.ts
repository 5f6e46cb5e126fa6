/**
 * A wake-up call for a polling loop: `wait(ms)` resolves after `ms`, or at once when `notify()` was
 * called since the last wait, so a notification that arrives while the loop is busy is not lost; it
 * answers which of the two it was.
 */
export class Wakeup {
  private pending = false;
  private resolveWaiter: (() => void) | undefined;

  notify(): void {
    this.pending = true;
    this.resolveWaiter?.();
  }

  /** Whether `notify()` was called since the last wait (or take), which it then answers. */
  take(): boolean {
    const pending = this.pending;
    this.pending = false;
    return pending;
  }

  /** Resolves with true when woken by `notify()`, false when `ms` passed first. */
  wait(ms: number): Promise<boolean> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const done = (woken: boolean): void => {
        clearTimeout(timer);
        this.resolveWaiter = undefined;
        this.pending = false;
        resolve(woken);
      };
      const timer = setTimeout(() => done(false), ms);
      this.resolveWaiter = () => done(true);
    });
  }
}
