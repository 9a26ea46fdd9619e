// A parser of text/event-stream, as the WHATWG HTML standard's "event stream interpretation" says
// (§9.2.6), for a stream read with fetch: EventSource cannot send an Authorization header.
// Pure: no DOM, so the unit tests run it under Node.

export interface StreamEvent {
  /** The `id:` in force when it was dispatched: the stream's last event id. */
  readonly id: string;
  readonly type: string;
  readonly data: string;
}

export class EventStreamParser {
  /** The last event id, to resume with (`Last-Event-ID`); kept across events as the standard says. */
  lastEventId = '';
  /** The reconnection time the server asked for with `retry:`, in ms; undefined until it does. */
  retryMs: number | undefined;
  private buffer = '';
  private data: string[] = [];
  private type = '';
  private sawCarriageReturn = false;

  constructor(private readonly dispatch: (event: StreamEvent) => void) {}

  /** Takes the next piece of decoded text; lines may be cut anywhere, and end in CRLF, LF or CR. */
  push(text: string): void {
    let chunk = text;
    // A CR at the end of the last piece and an LF at the start of this one are one line end.
    if (this.sawCarriageReturn && chunk.startsWith('\n')) chunk = chunk.slice(1);
    this.sawCarriageReturn = chunk.endsWith('\r');
    this.buffer += chunk;
    const lines = this.buffer.split(/\r\n|\r|\n/);
    this.buffer = lines.pop() ?? '';
    for (const line of lines) this.line(line);
  }

  /** The stream ended: an event not ended by a blank line is dropped (§9.2.6), and so is a partial line. */
  reset(): void {
    this.buffer = '';
    this.data = [];
    this.type = '';
    this.sawCarriageReturn = false;
  }

  private line(line: string): void {
    if (line === '') return this.end();
    if (line.startsWith(':')) return; // a comment: the server's heartbeat
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'data':
        this.data.push(value);
        break;
      case 'event':
        this.type = value;
        break;
      case 'id':
        if (!value.includes('\0')) this.lastEventId = value;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retryMs = Number(value);
        break;
      default: // unknown fields are ignored
    }
  }

  private end(): void {
    const data = this.data;
    const type = this.type;
    this.data = [];
    this.type = '';
    if (data.length === 0) return;
    this.dispatch({ id: this.lastEventId, type: type === '' ? 'message' : type, data: data.join('\n') });
  }
}
