import { apiUrl } from './api.js';
import { byId, h } from './dom.js';
import { FeedClient, type FeedState } from './feed-client.js';
import type { StreamEvent } from './sse.js';
import { clockTime } from './words.js';

// The Live feed panel: GET /events as it happens, filtered by type, newest on top.

const KEPT = 200;

export class FeedPanel {
  private client: FeedClient | undefined;
  private token: string | undefined;
  private lastEventId = '';
  private paused = false;
  private readonly list = byId('feed', HTMLOListElement);
  private readonly state = byId('feed-state', HTMLParagraphElement);
  private readonly pause = byId('feed-pause', HTMLButtonElement);
  private readonly boxes = [...document.querySelectorAll<HTMLInputElement>('input[name="feed-type"]')];

  /** `onEvent` is told of each event: the deliveries it makes are then worth reading. */
  constructor(private readonly onEvent: () => void) {
    for (const box of this.boxes) box.addEventListener('change', () => this.restart());
    this.pause.addEventListener('click', () => {
      this.paused = !this.paused;
      this.pause.textContent = this.paused ? 'Resume' : 'Pause';
      this.restart();
    });
  }

  start(token: string): void {
    this.token = token;
    this.restart();
  }

  stop(): void {
    this.token = undefined;
    this.disconnect();
    this.lastEventId = '';
    this.list.replaceChildren();
    this.state.textContent = '';
  }

  private disconnect(): void {
    if (this.client) this.lastEventId = this.client.lastEventId;
    this.client?.stop();
    this.client = undefined;
  }

  /** Connects again with the types chosen, from the last event seen: a pause misses nothing. */
  private restart(): void {
    this.disconnect();
    if (this.token === undefined) return;
    if (this.paused) return void (this.state.textContent = 'Paused: events wait on the server until you resume.');
    const types = this.boxes.filter((box) => box.checked).map((box) => box.value);
    if (types.length === 0) return void (this.state.textContent = 'Choose at least one event type to follow.');
    const filtered = types.length < this.boxes.length ? `?types=${types.map(encodeURIComponent).join(',')}` : '';
    const client = new FeedClient({
      url: apiUrl(`events${filtered}`),
      token: this.token,
      lastEventId: this.lastEventId,
      onEvent: (event) => this.show(event),
      onState: (state) => {
        if (this.client !== client) return;
        this.state.textContent = stateWords(state);
        if (state.kind === 'waiting' && state.gap === true) {
          this.list.prepend(
            h('li', { class: 'gap' }, 'Events were missed here (past the retention): following from now.'),
          );
        }
      },
    });
    this.client = client;
    void client.run();
  }

  private show(event: StreamEvent): void {
    const item = h(
      'li',
      {},
      h('time', { datetime: new Date().toISOString() }, clockTime(new Date().toISOString())),
      h('code', {}, event.type),
      ` #${event.id} `,
      // The payload as the server sent it: its ids stay exact (JSON.parse would round them).
      h('code', { class: 'mono' }, event.data),
    );
    this.list.prepend(item);
    while (this.list.children.length > KEPT) this.list.lastElementChild?.remove();
    this.onEvent();
  }
}

function stateWords(state: FeedState): string {
  switch (state.kind) {
    case 'connecting':
      return 'Connecting…';
    case 'open':
      return 'Following: new events appear here as they happen.';
    case 'waiting':
      return `Reconnecting in ${Math.ceil(state.ms / 1000)} s (${state.why}).`;
    case 'stopped':
      if (state.status === 403) return 'The live feed needs the plants:read scope, which this token lacks.';
      if (state.status === 401) return 'The server refused this token for the live feed.';
      return `The live feed stopped: ${state.why}.`;
  }
}
