/**
 * Progress of a long import or export on stderr: a bar redrawn in place on a terminal, plain
 * lines otherwise (logs, CI), so that neither is flooded.
 */
export interface ProgressOptions {
  /** Total bytes, when known, for a percentage. */
  readonly totalBytes?: number | undefined;
  /** On a non-terminal, a line every this many items. */
  readonly lineEvery?: number;
  readonly now?: () => number;
}

const count = (n: number): string => n.toLocaleString('en-US');

export class Progress {
  private readonly started: number;
  private lastDraw = 0;
  private nextLine: number;

  constructor(
    private readonly out: NodeJS.WritableStream & { isTTY?: boolean; columns?: number },
    private readonly noun: string,
    private readonly options: ProgressOptions = {},
  ) {
    this.started = this.now();
    this.nextLine = options.lineEvery ?? 100_000;
  }

  private now(): number {
    return this.options.now?.() ?? Date.now();
  }

  /** ", 1,234/s" once some time has passed; nothing before. */
  private rate(done: number, separator: string): string {
    const seconds = (this.now() - this.started) / 1000;
    return seconds > 0 ? `${separator}${count(Math.round(done / seconds))}/s` : '';
  }

  update(done: number, bytes?: number): void {
    const total = this.options.totalBytes;
    const fraction = total && bytes !== undefined ? Math.min(1, bytes / total) : undefined;
    if (this.out.isTTY) {
      const now = this.now();
      if (now - this.lastDraw < 100) return;
      this.lastDraw = now;
      const percent = fraction === undefined ? '' : ` ${(fraction * 100).toFixed(0).padStart(3)}%`;
      const bar = fraction === undefined ? '' : `[${'#'.repeat(Math.round(fraction * 30)).padEnd(30, '.')}]`;
      this.out.write(`\r\x1b[K${bar}${percent} ${count(done)} ${this.noun}${this.rate(done, ' ')}`);
    } else if (done >= this.nextLine) {
      this.nextLine = done + (this.options.lineEvery ?? 100_000);
      const percent = fraction === undefined ? '' : ` (${(fraction * 100).toFixed(0)}%)`;
      this.out.write(`progress: ${count(done)} ${this.noun}${percent}${this.rate(done, ', ')}\n`);
    }
  }

  /** Clears the bar and prints the summary line. */
  finish(summary: string): void {
    if (this.out.isTTY) this.out.write('\r\x1b[K');
    const seconds = ((this.now() - this.started) / 1000).toFixed(1);
    this.out.write(`${summary} in ${seconds} s.\n`);
  }
}

export { count as formatCount };
