/**
 * A wake-up call for a polling loop: `wait(ms)` resolves after `ms`, or at once when `notify()` was
 * called since the last wait, so a notification that arrives while the loop is busy is not lost.
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

  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.resolveWaiter = undefined;
        this.pending = false;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.resolveWaiter = done;
    });
  }
}
