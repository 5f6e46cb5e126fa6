/**
 * Runs a task one run at a time: a request while a run is under way gets one more run after it, however
 * many requests came meanwhile. The task handles its own errors.
 */
export class RunsInTurn {
  private running: Promise<void> | undefined;
  private again = false;

  constructor(private readonly task: () => Promise<void>) {}

  request(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runWhileRequested();
  }

  /** Resolves once no run is under way. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /**
   * Clears `running` in the step that last found no request: cleared a microtask or two later (in a
   * `finally` chained to this promise), a request in between found a run under way and was never run.
   * The loop awaits the task before it can get there, so `running` is set before it is cleared.
   */
  private async runWhileRequested(): Promise<void> {
    try {
      do {
        this.again = false;
        await this.task();
      } while (this.again);
    } finally {
      this.running = undefined;
    }
  }
}
