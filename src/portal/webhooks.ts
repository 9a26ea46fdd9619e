import { type Child, button, byId, h, replaceKeepingFocus } from './dom.js';
import { FormDialog, type SecretDialog } from './dialogs.js';
import type { Page } from './page.js';
import { EVENT_TYPES, type EventType, type Webhook, type WithSecret, targetText } from './shapes.js';
import { failingSince, localInputValue, localTime, recoveredWords, statusWords } from './words.js';

// The Webhooks panel: the caller's webhooks (GET /webhooks) with what can be done to each.

const path = (webhook: Webhook, rest = ''): string => `webhooks/${encodeURIComponent(webhook.id)}${rest}`;

export class WebhooksPanel {
  private webhooks: readonly Webhook[] = [];
  private selectedId: string | undefined;
  private readonly list = byId('webhooks', HTMLUListElement);
  private readonly form = new FormDialog(byId('webhook-dialog', HTMLDialogElement));
  private readonly rotate = new FormDialog(byId('rotate-dialog', HTMLDialogElement));
  private readonly remove = new FormDialog(byId('delete-dialog', HTMLDialogElement));
  private readonly enable = new FormDialog(byId('enable-dialog', HTMLDialogElement));

  constructor(
    private readonly page: () => Page,
    private readonly secrets: SecretDialog,
  ) {
    byId('add-webhook', HTMLButtonElement).addEventListener('click', () => this.add());
  }

  /** The webhook whose deliveries are shown: the one chosen, else the first. */
  get selected(): Webhook | undefined {
    return this.webhooks.find((webhook) => webhook.id === this.selectedId) ?? this.webhooks[0];
  }

  async refresh(): Promise<void> {
    const { body } = await this.page().api.get<Webhook[]>('webhooks');
    this.webhooks = body;
    this.render();
  }

  clear(): void {
    this.webhooks = [];
    this.selectedId = undefined;
    this.list.replaceChildren();
  }

  private render(): void {
    const now = Date.now();
    if (this.webhooks.length === 0) {
      return replaceKeepingFocus(
        this.list,
        h('li', { class: 'muted' }, 'No webhooks yet. Add one to receive plant.created and plant.deleted events.'),
      );
    }
    replaceKeepingFocus(this.list, ...this.webhooks.map((webhook) => this.item(webhook, now)));
  }

  private item(webhook: Webhook, now: number): HTMLLIElement {
    const heading = `webhook-${webhook.id}`;
    const failing = webhook.failingSince;
    const key = (action: string): string => `${action}:${webhook.id}`;
    const shown = this.selected?.id === webhook.id;
    const details: Array<[string, Child]> = [
      ['Events', webhook.events.join(', ')],
      ['Status', statusWords(webhook.status, webhook.disabledReason)],
      ['Created', localTime(webhook.createdAt)],
    ];
    return h(
      'li',
      {
        class: `webhook ${webhook.status}${failing === null ? '' : ' failing'}`,
        'aria-labelledby': heading,
      },
      h('h3', { id: heading }, targetText(webhook)),
      webhook.description !== '' && h('p', { class: 'description' }, webhook.description),
      failing !== null && h('p', { class: 'failing-since' }, failingSince(failing, now)),
      h('dl', {}, ...details.flatMap(([term, value]) => [h('dt', {}, term), h('dd', {}, value)])),
      h(
        'div',
        { class: 'actions' },
        button('Deliveries', () => this.select(webhook), { 'aria-pressed': String(shown), 'data-key': key('show') }),
        button('Edit', () => this.edit(webhook), { 'data-key': key('edit') }),
        webhook.status === 'active'
          ? button('Disable', () => void this.act(() => this.patch(webhook, { status: 'disabled' })), {
              'data-key': key('status'),
            })
          : button('Enable', () => this.openEnable(webhook), { 'data-key': key('status') }),
        button('Ping', () => void this.act(() => this.ping(webhook)), { 'data-key': key('ping') }),
        button('Rotate secret', () => this.rotateSecret(webhook), { 'data-key': key('rotate') }),
        button('Delete', () => this.delete(webhook), { 'data-key': key('delete'), class: 'danger-outline' }),
      ),
    );
  }

  private select(webhook: Webhook): void {
    this.selectedId = webhook.id;
    this.render();
    this.page().refresh();
  }

  /** Runs a change, then says so or why not, and shows what it changed. */
  private async act(change: () => Promise<string>): Promise<void> {
    try {
      this.page().notify(await change());
    } catch (error) {
      this.page().fail(error);
    }
    this.page().refresh();
  }

  private async patch(webhook: Webhook, changes: Record<string, unknown>): Promise<string> {
    await this.page().api.send('PATCH', path(webhook), changes);
    return changes.status === 'disabled'
      ? `Disabled ${targetText(webhook)}: nothing is sent to it, and the events meanwhile are not kept for it; Enable can send them.`
      : 'Saved.';
  }

  /**
   * Enable, and (interface 1.3.0) on request what the pause missed: POST …/enable, then POST
   * …/recover since the chosen time, two calls as the API has them.
   */
  private openEnable(webhook: Webhook): void {
    byId('enable-of', HTMLParagraphElement).textContent = targetText(webhook);
    const also = byId('enable-recover', HTMLInputElement);
    const field = byId('enable-since', HTMLInputElement);
    also.checked = false;
    const dayAgo = Date.now() - 86_400_000;
    field.value = localInputValue(new Date(Math.max(dayAgo, Date.parse(webhook.createdAt))));
    this.enable.open(async () => {
      const since = new Date(field.value); // the reader's local time, as the picker shows it
      if (also.checked && Number.isNaN(since.getTime())) throw new Error('Choose a date and time.');
      await this.page().api.send('POST', path(webhook, '/enable'));
      let said = `Enabled ${targetText(webhook)}: new events are sent to it.`;
      if (also.checked) {
        const { body } = await this.page().api.send<{ requeued: number; created: number }>(
          'POST',
          path(webhook, '/recover'),
          { since: since.toISOString() },
        );
        said = `Enabled ${targetText(webhook)}. ${recoveredWords(body)}`;
      }
      this.page().notify(said);
      this.page().refresh();
    });
  }

  private async ping(webhook: Webhook): Promise<string> {
    await this.page().api.send('POST', path(webhook, '/ping'));
    this.selectedId = webhook.id;
    return `Ping sent to ${targetText(webhook)}: it is in the deliveries as webhook.ping.`;
  }

  private add(): void {
    this.fillForm('Add webhook', 'Create webhook', {
      url: '',
      destination: null,
      description: '',
      events: EVENT_TYPES,
    });
    this.form.open(async () => {
      const { body } = await this.page().api.send<WithSecret>('POST', 'webhooks', this.formValues());
      this.selectedId = body.id;
      this.page().notify(`Added ${targetText(body)}.`);
      this.page().refresh();
      return () => this.secrets.show(body.secret, '');
    });
  }

  private edit(webhook: Webhook): void {
    this.fillForm('Edit webhook', 'Save changes', webhook);
    this.form.open(async () => {
      const values = this.formValues();
      // PATCH takes the fields that change, and at least one.
      const changes = Object.fromEntries(
        Object.entries(values).filter(
          ([name, value]) => String(value) !== String(webhook[name as 'url' | 'description' | 'events']),
        ),
      );
      if (Object.keys(changes).length === 0) return;
      this.page().notify(await this.patch(webhook, changes));
      this.page().refresh();
    });
  }

  private rotateSecret(webhook: Webhook): void {
    byId('rotate-of', HTMLParagraphElement).textContent = targetText(webhook);
    this.rotate.open(async () => {
      const overlapSeconds = Number(byId('overlap', HTMLSelectElement).value);
      const { body } = await this.page().api.send<WithSecret>('POST', path(webhook, '/secret'), { overlapSeconds });
      const until = localTime(new Date(Date.now() + overlapSeconds * 1000).toISOString());
      this.page().notify(`Rotated the secret of ${targetText(webhook)}.`);
      const overlap =
        overlapSeconds === 0
          ? 'The old secret no longer signs: only this one does.'
          : `The old secret keeps signing beside this one until ${until}.`;
      return () => this.secrets.show(body.secret, overlap);
    });
  }

  private delete(webhook: Webhook): void {
    byId('delete-of', HTMLParagraphElement).textContent = targetText(webhook);
    this.remove.open(async () => {
      await this.page().quietly(() => this.page().api.send('DELETE', path(webhook)));
      this.page().notify(`Deleted ${targetText(webhook)}.`);
    });
  }

  private fillForm(
    title: string,
    submit: string,
    values: Pick<Webhook, 'url' | 'destination' | 'description' | 'events'>,
  ): void {
    byId('webhook-dialog-heading', HTMLHeadingElement).textContent = title;
    byId('webhook-submit', HTMLButtonElement).textContent = submit;
    // A destination is shown, not edited here: the API or the CLI changes its subject or key.
    const url = byId('webhook-url', HTMLInputElement);
    url.value = targetText(values);
    url.readOnly = values.url === null;
    byId('webhook-description', HTMLInputElement).value = values.description;
    for (const box of this.eventBoxes()) box.checked = values.events.includes(box.value as EventType);
  }

  private formValues(): { url?: string; description: string; events: EventType[] } {
    const events = this.eventBoxes()
      .filter((box) => box.checked)
      .map((box) => box.value as EventType);
    if (events.length === 0) throw new Error('Choose at least one event type.');
    const url = byId('webhook-url', HTMLInputElement);
    return {
      ...(!url.readOnly && { url: url.value.trim() }),
      description: byId('webhook-description', HTMLInputElement).value,
      events,
    };
  }

  private eventBoxes(): HTMLInputElement[] {
    return [...byId('webhook-form', HTMLFormElement).querySelectorAll<HTMLInputElement>('input[name="event"]')];
  }
}
