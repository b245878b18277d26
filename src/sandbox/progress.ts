// Progress lines for the sandbox commands: each step with the time since the command started.

export class Progress {
  private readonly t0 = performance.now();

  constructor(private readonly out: NodeJS.WritableStream = process.stderr) {}

  elapsedMs(): number {
    return performance.now() - this.t0;
  }

  note(message: string): void {
    this.out.write(`[${(this.elapsedMs() / 1000).toFixed(1).padStart(5)}s] ${message}\n`);
  }

  async step<T>(label: string, fn: () => Promise<T> | T): Promise<T> {
    const start = performance.now();
    const result = await fn();
    this.note(`${label} (${((performance.now() - start) / 1000).toFixed(1)}s)`);
    return result;
  }
}
