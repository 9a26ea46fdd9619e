import { Api, ApiError, Cancelled } from './api.js';
import { DeliveriesPanel } from './deliveries.js';
import { SecretDialog, messageOf } from './dialogs.js';
import { byId } from './dom.js';
import { FeedPanel } from './feed.js';
import type { Page } from './page.js';
import { cleanToken, forgetToken, savedToken, saveToken, tokenLabel } from './session.js';
import { WebhooksPanel } from './webhooks.js';

// The subscribers' page (docs/portal.md): sign in with a token, then the webhooks, the
// deliveries of the one chosen, and the live feed. Everything is read again every 10 seconds, and
// sooner when a delivery shown is due to be sent, or after an event.

const SOONEST_MS = 1000;
const LATER_MS = 10_000;

const signInForm = byId('sign-in', HTMLFormElement);
const tokenField = byId('token', HTMLInputElement);
const signInProblem = byId('sign-in-problem', HTMLParagraphElement);
const signedIn = byId('signed-in', HTMLDivElement);
const who = byId('who', HTMLParagraphElement);
const notice = byId('notice', HTMLParagraphElement);
const problem = byId('problem', HTMLParagraphElement);

let api: Api | undefined;
let timer: ReturnType<typeof setTimeout> | undefined;
let reading = false;
let readAgain = false;
/** Changes under way through page.quietly: no read starts until they end. */
let changing = 0;

const page: Page = {
  get api(): Api {
    if (api === undefined) throw new ApiError(401, 'Sign in first.');
    return api;
  },
  notify(message) {
    problem.textContent = '';
    notice.textContent = message;
  },
  fail(error) {
    if (error instanceof Cancelled) return;
    if (error instanceof ApiError && error.status === 401) return signOut(error.message);
    notice.textContent = '';
    problem.textContent = messageOf(error);
  },
  refresh(delayMs = 0) {
    schedule(delayMs);
  },
  async quietly(change) {
    changing++;
    clearTimeout(timer);
    api?.cancelReads();
    try {
      return await change();
    } finally {
      changing--;
      schedule(0);
    }
  },
};

const webhooks = new WebhooksPanel(() => page, new SecretDialog());
const deliveries = new DeliveriesPanel(() => page);
const feed = new FeedPanel(() => page.refresh(300));

function schedule(ms: number): void {
  clearTimeout(timer);
  timer = setTimeout(() => void read(), ms);
}

/** Reads the webhooks, then the chosen one's deliveries; one read at a time. */
async function read(): Promise<void> {
  if (api === undefined || changing > 0) return;
  if (reading) return void (readAgain = true);
  reading = true;
  try {
    await webhooks.refresh();
    deliveries.show(webhooks.selected);
    await deliveries.refresh();
  } catch (error) {
    page.fail(error);
  } finally {
    reading = false;
  }
  if (api === undefined) return;
  // A hidden tab reads rarely; a delivery due to be sent changes then (a moment after its attempt).
  const due = deliveries.nextDue === undefined ? LATER_MS : deliveries.nextDue - Date.now() + 500;
  schedule(readAgain ? 0 : document.hidden ? LATER_MS * 3 : Math.min(LATER_MS, Math.max(SOONEST_MS, due)));
  readAgain = false;
}

async function signIn(token: string): Promise<void> {
  const candidate = new Api(token);
  try {
    await candidate.get('webhooks');
  } catch (error) {
    forgetToken();
    signInProblem.textContent =
      error instanceof ApiError && error.status === 403
        ? `This token lacks the ${error.scope ?? 'webhooks:read'} scope, which this page needs to show your webhooks. ` +
          'Sign in with a token that has it (plant-store token create … --scopes webhooks:read,webhooks:write,plants:read).'
        : messageOf(error);
    return;
  }
  saveToken(token);
  api = candidate;
  tokenField.value = '';
  signInProblem.textContent = '';
  signInForm.hidden = true;
  signedIn.hidden = false;
  who.hidden = false;
  byId('who-token', HTMLSpanElement).textContent = tokenLabel(token);
  feed.start(token);
  await read();
  byId('webhooks-heading', HTMLHeadingElement).focus();
}

function signOut(why = ''): void {
  forgetToken();
  api?.close();
  api = undefined;
  clearTimeout(timer);
  feed.stop();
  webhooks.clear();
  deliveries.clear();
  for (const dialog of document.querySelectorAll('dialog')) dialog.close();
  notice.textContent = '';
  problem.textContent = '';
  signedIn.hidden = true;
  who.hidden = true;
  signInForm.hidden = false;
  signInProblem.textContent = why;
  tokenField.focus();
}

signInForm.addEventListener('submit', (event) => {
  event.preventDefault();
  const token = cleanToken(tokenField.value);
  if (token !== '') void signIn(token);
});
byId('sign-out', HTMLButtonElement).addEventListener('click', () => signOut());
document.addEventListener('visibilitychange', () => {
  if (!document.hidden && api !== undefined) schedule(0);
});

const saved = savedToken();
if (saved === null) {
  signInForm.hidden = false;
} else {
  void signIn(saved).then(() => {
    if (api === undefined) signInForm.hidden = false;
  });
}
