import { byId } from './dom.js';

// The page's dialogs (index.html): native <dialog> elements opened with showModal(), which keeps
// keyboard focus inside, closes on Escape and gives focus back to the button that opened it.

/** What an error says to a person: the API's message (api.ts), or a plain fallback. */
export const messageOf = (error: unknown): string =>
  error instanceof Error && error.message !== '' ? error.message : 'Something went wrong; try again.';

function closeOnCancel(dialog: HTMLDialogElement): void {
  for (const cancel of dialog.querySelectorAll<HTMLButtonElement>('button.cancel')) {
    cancel.addEventListener('click', () => dialog.close());
  }
}

/**
 * What a form dialog does when sent; what it answers, if anything, runs once the dialog has
 * closed (a secret's dialog opens then, so that focus goes to it and not back to the page).
 */
export type DialogAction = () => Promise<void | (() => void)>;

/**
 * A dialog with a form: sending it runs the current action; the dialog closes once the action
 * succeeds, and says why not when it fails (the form keeps what was typed).
 */
export class FormDialog {
  private action: DialogAction | undefined;
  private readonly form: HTMLFormElement;
  private readonly problem: HTMLElement;

  constructor(readonly dialog: HTMLDialogElement) {
    const form = dialog.querySelector('form');
    const problem = dialog.querySelector<HTMLElement>('.problem');
    if (form === null || problem === null) throw new Error(`dialog #${dialog.id} needs a form and a .problem`);
    this.form = form;
    this.problem = problem;
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      void this.submit();
    });
    closeOnCancel(dialog);
  }

  open(action: DialogAction): void {
    this.action = action;
    this.problem.textContent = '';
    this.dialog.showModal();
  }

  private async submit(): Promise<void> {
    const buttons = [...this.form.querySelectorAll('button')];
    for (const button of buttons) button.disabled = true;
    try {
      const then = await this.action?.();
      this.dialog.close();
      if (then) then();
    } catch (error) {
      this.problem.textContent = messageOf(error);
    } finally {
      for (const button of buttons) button.disabled = false;
    }
  }
}

/** Shows a signing secret, this once: POST /webhooks and POST …/secret are the only answers that carry it. */
export class SecretDialog {
  private readonly dialog = byId('secret-dialog', HTMLDialogElement);
  private readonly field = byId('secret', HTMLInputElement);
  private readonly overlap = byId('secret-overlap', HTMLParagraphElement);
  private readonly copyState = byId('copy-state', HTMLParagraphElement);

  constructor() {
    closeOnCancel(this.dialog);
    byId('copy-secret', HTMLButtonElement).addEventListener('click', () => void this.copy());
    // The secret leaves the page once the dialog closes: it is in no variable, field or storage.
    this.dialog.addEventListener('close', () => {
      this.field.value = '';
      this.copyState.textContent = '';
    });
  }

  show(secret: string, overlap: string): void {
    this.field.value = secret;
    this.overlap.textContent = overlap;
    this.overlap.hidden = overlap === '';
    this.copyState.textContent = '';
    this.dialog.showModal();
    this.field.select();
  }

  private async copy(): Promise<void> {
    try {
      await navigator.clipboard.writeText(this.field.value);
      this.copyState.textContent = 'Copied to the clipboard.';
    } catch {
      // The clipboard needs a secure context (https, or this machine) and the browser's leave.
      this.field.focus();
      this.field.select();
      this.copyState.textContent = 'The browser refused to copy: the secret is selected, copy it with Ctrl+C (⌘C).';
    }
  }
}
