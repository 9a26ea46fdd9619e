/**
 * The longest line `import` reads, in bytes without the line break. The longest valid plant line,
 * with every character of owner, name and tag escaped as a surrogate pair, is about 6 KB: 64 KiB
 * leaves room for any whitespace a tool may add, and bounds what one line can cost.
 */
export const MAX_LINE_BYTES = 64 * 1024;

/** A line longer than the cap: only its length was counted, nothing of it was kept. */
export class OverlongLine {
  constructor(readonly length: number) {}
}

export type SplitLine = Buffer | OverlongLine;

/**
 * Splits bytes into lines at LF, dropping a CR before it; a final line may lack the line break.
 * Lines are bytes, so that invalid UTF-8 can be refused: readline would quietly turn it into U+FFFD.
 *
 * Linear in the input whatever the chunks and lines: an unfinished line is never copied again with
 * every chunk, which would be quadratic in a long line's length. A line inside one chunk is handed
 * out as a view of it; only an unfinished line is copied, once into a buffer of the cap's size
 * (plus a CR) and once more when it ends, and a line that outgrows the cap is from then on only
 * counted, until its line break.
 */
export class LineSplitter {
  private readonly pending: Buffer;
  private held = 0;
  /** The length so far of an over-long line being skipped; -1 when none is. */
  private skipped = -1;
  private skippedCr = false;
  private copiedBytes = 0;

  constructor(readonly maxLineBytes = MAX_LINE_BYTES) {
    this.pending = Buffer.allocUnsafe(maxLineBytes + 1);
  }

  /** Bytes of an unfinished line held between chunks: never more than the cap plus one (a CR). */
  get buffered(): number {
    return this.held;
  }

  /** Bytes copied so far: at most twice the input, and at most the cap plus one for a single line. */
  get copied(): number {
    return this.copiedBytes;
  }

  /** The lines that end in this chunk. A line is a view of the chunk, valid as long as the chunk. */
  push(chunk: Buffer): SplitLine[] {
    const lines: SplitLine[] = [];
    let start = 0;
    for (let end = chunk.indexOf(10); end !== -1; end = chunk.indexOf(10, start)) {
      lines.push(this.complete(chunk.subarray(start, end)));
      start = end + 1;
    }
    this.hold(chunk.subarray(start));
    return lines;
  }

  /** The final line, when the input does not end with a line break. */
  end(): SplitLine[] {
    if (this.skipped >= 0) {
      const line = new OverlongLine(this.skipped);
      this.skipped = -1;
      return [line];
    }
    if (this.held === 0) return [];
    const line = this.held > this.maxLineBytes ? new OverlongLine(this.held) : this.take(Buffer.alloc(0));
    this.held = 0;
    return [line];
  }

  private complete(tail: Buffer): SplitLine {
    if (this.skipped >= 0) {
      const cr = tail.length > 0 ? tail[tail.length - 1] === 13 : this.skippedCr;
      const line = new OverlongLine(this.skipped + tail.length - (cr ? 1 : 0));
      this.skipped = -1;
      return line;
    }
    const whole = this.held + tail.length;
    let length = whole;
    if (length > 0 && (tail.length > 0 ? tail[tail.length - 1] : this.pending[this.held - 1]) === 13) length -= 1;
    if (length > this.maxLineBytes) {
      this.held = 0;
      return new OverlongLine(length);
    }
    const line = this.held === 0 ? tail : this.take(tail);
    this.held = 0;
    return line.subarray(0, length);
  }

  /** The held start of a line joined with its end, as a new buffer: `pending` is reused. */
  private take(tail: Buffer): Buffer {
    this.copiedBytes += this.held + tail.length;
    return Buffer.concat([this.pending.subarray(0, this.held), tail], this.held + tail.length);
  }

  private hold(rest: Buffer): void {
    if (rest.length === 0) return;
    if (this.skipped >= 0) {
      this.skipped += rest.length;
      this.skippedCr = rest[rest.length - 1] === 13;
      return;
    }
    const length = this.held + rest.length;
    if (length > this.maxLineBytes + 1) {
      // Over the cap even if its last byte is the CR of a CRLF: count the rest, keep nothing.
      this.skipped = length;
      this.skippedCr = rest[rest.length - 1] === 13;
      this.held = 0;
      return;
    }
    rest.copy(this.pending, this.held);
    this.held = length;
    this.copiedBytes += rest.length;
  }
}

/** The lines of a stream, through a {@link LineSplitter}. */
export async function* splitLines(
  input: AsyncIterable<Buffer | string>,
  maxLineBytes = MAX_LINE_BYTES,
): AsyncGenerator<SplitLine> {
  const splitter = new LineSplitter(maxLineBytes);
  for await (const chunk of input) {
    yield* splitter.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  }
  yield* splitter.end();
}
