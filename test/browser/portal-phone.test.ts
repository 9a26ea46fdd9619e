import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Locator, Page } from 'playwright-core';
import { Receiver } from '../e2e/webhook-receiver.js';
import { callServer, runCli, startServer } from '../process.js';
import { cleanupsInReverse } from '../support/cleanups.js';
import { eventually } from '../support/eventually.js';
import { BROWSER_TEST_TIMEOUT_MS, CHROMIUM, MISSING, PATIENCE_MS, launchLocalOnly, skip } from './chromium.js';

// /portal on a phone. At 390 px the deliveries table was cut ("1 (HTT"), Next
// attempt, Created, Show attempts and Retry sat off to the right, and the chart's hour labels were
// about 5 px. Here the page is a phone's (390×844, 3 device pixels a CSS pixel, touch) and every
// part of it is measured as shown: signed out, signed in with a failing and a gone webhook, a
// delivery opened to its attempts, each dialog. In each: the page does not scroll sideways, no
// element reaches past the screen's edges, no text is under 12 px, and every button, link and
// checkbox is at least 24×24 px (a checkbox counts with its label, which toggles it) and on top
// where a finger would press it. The live feed, under every delivery, is one tap away from the
// top of the page and from wherever the page is scrolled, and one Enter away from the keyboard.

const SCREENSHOT = fileURLToPath(new URL('../../test-output/portal-phone.png', import.meta.url));
const FEED_SCREENSHOT = fileURLToPath(new URL('../../test-output/portal-phone-feed.png', import.meta.url));
const AXE = fileURLToPath(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url));
const WIDTH = 390;
const SCOPES = 'plants:read,plants:write,webhooks:read,webhooks:write';
/** Long words that do not break by themselves: a URL and a description as people write them. */
const LONG_PATH = `/hooks/greenhouse-inventory-synchronisation-endpoint-${'x'.repeat(40)}`;
const LONG_DESCRIPTION = 'Sends every change to the greenhouse inventory (owner: facilities-team@example.com)';

/**
 * What is wrong with the layout now, in words; [] when nothing. Only what is shown counts; when a
 * modal dialog is open, only what is in it (the rest of the page is inert). A string, evaluated in
 * the page: the test project has no DOM types.
 */
const LAYOUT_PROBLEMS = `(() => {
  const width = window.innerWidth;
  const problems = [];
  const name = (element) => {
    const text = (element.textContent || element.getAttribute('aria-label') || '').trim().replace(/\\s+/g, ' ');
    return element.tagName.toLowerCase() + (element.id ? '#' + element.id : '') + (text ? ' "' + text.slice(0, 40) + '"' : '');
  };
  // Clipped to nothing (the visually-hidden pattern: a table head kept for screen readers) is not shown.
  const clipped = (element) => {
    for (let e = element; e; e = e.parentElement) if (getComputedStyle(e).clip !== 'auto') return true;
    return false;
  };
  const shown = (element) =>
    element.getClientRects().length > 0 && getComputedStyle(element).visibility !== 'hidden' && !clipped(element);
  const scope = document.querySelector('dialog[open]') || document.body;
  if (document.documentElement.scrollWidth > width)
    problems.push('the page scrolls sideways: ' + document.documentElement.scrollWidth + ' px wide');
  for (const element of scope.querySelectorAll('*')) {
    if (!shown(element)) continue;
    const box = element.getBoundingClientRect();
    if (box.width === 0 && box.height === 0) continue;
    if (box.right > width + 0.5 || box.left < -0.5)
      problems.push(name(element) + ' spans ' + Math.round(box.left) + '–' + Math.round(box.right) + ' px');
  }
  const walker = document.createTreeWalker(scope, NodeFilter.SHOW_TEXT);
  const range = document.createRange();
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement;
    if (!parent || node.textContent.trim() === '') continue;
    range.selectNodeContents(node);
    if (range.getClientRects().length === 0 || !shown(parent)) continue;
    // Text overflows its element without widening it (a long URL that does not wrap): it must stay
    // inside the screen and inside its panel or dialog.
    const box = range.getBoundingClientRect();
    const frame = parent.closest('.panel, dialog');
    const right = frame ? Math.min(width, frame.getBoundingClientRect().right) : width;
    if (box.right > right + 0.5 || box.left < -0.5)
      problems.push(name(parent) + "'s text spans " + Math.round(box.left) + '–' + Math.round(box.right) + ' px');
    // Text in an SVG is drawn at its font-size times the drawing's scale.
    const svg = parent.closest('svg');
    const scale = svg && parent.getScreenCTM ? parent.getScreenCTM().a : 1;
    const size = parseFloat(getComputedStyle(parent).fontSize) * scale;
    if (size < 12) problems.push(name(parent) + ' is ' + size.toFixed(1) + ' px');
  }
  for (const control of scope.querySelectorAll('button, a[href], input, select')) {
    if (!shown(control)) continue;
    const size = parseFloat(getComputedStyle(control).fontSize);
    if (size < 12) problems.push(name(control) + ' is ' + size.toFixed(1) + ' px');
  }
  // A checkbox is pressed through its label as well (a tap on either toggles it): the label is
  // its target.
  for (const control of scope.querySelectorAll('button, a[href], input[type="checkbox"]')) {
    if (!shown(control)) continue;
    const target = control.matches('input') ? control.closest('label') || control : control;
    target.scrollIntoView({ block: 'center', inline: 'center' });
    const box = target.getBoundingClientRect();
    if (box.width < 24 || box.height < 24) problems.push(name(target) + ' is ' + Math.round(box.width) + '×' + Math.round(box.height) + ' px, under 24×24');
    const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
    if (!hit || !(hit === target || target.contains(hit)))
      problems.push(name(target) + ' is under ' + (hit ? name(hit) : 'nothing'));
  }
  window.scrollTo(0, 0);
  return problems;
})()`;

/**
 * What the elements `selectors` match is not wholly on the screen, or is under something else
 * there (the sections' bar, say), in words: [] when all is in view. A string, evaluated in the page.
 */
const notInView = (selectors: readonly string[]): string => `(() => {
  const problems = [];
  for (const selector of ${JSON.stringify(selectors)}) {
    const elements = document.querySelectorAll(selector);
    if (elements.length === 0) problems.push(selector + ' matches nothing');
    for (const element of elements) {
      const box = element.getBoundingClientRect();
      if (box.top < -0.5 || box.left < -0.5 || box.bottom > innerHeight + 0.5 || box.right > innerWidth + 0.5)
        problems.push(selector + ' spans ' + [box.left, box.top, box.right, box.bottom].map(Math.round).join(', ') +
          ', the screen 0, 0, ' + innerWidth + ', ' + innerHeight);
      const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
      if (!hit || !(hit === element || element.contains(hit)))
        problems.push(selector + ' is under ' + (hit ? hit.outerHTML.slice(0, 60) : 'nothing'));
    }
  }
  return problems;
})()`;

/** What a person reaching the live feed must see: its heading, Pause and the event types' boxes. */
const FEED_SHOWN = ['#feed-heading', '#feed-pause', '#feed-panel .types legend', '#feed-panel .types label'];

/** The top of the element of id `id`, in CSS px from the top of the screen (negative: above it). */
const topOf = (id: string): string => `document.getElementById(${JSON.stringify(id)}).getBoundingClientRect().top`;

/**
 * Waits until the panel of id `id` starts on the screen: scrolled to (as far as the page goes: the
 * last panel may start lower than the others, the page's end being in view).
 */
const scrolledTo = (page: Page, id: string): Promise<true> =>
  eventually(
    async () => {
      const top = await page.evaluate<number>(topOf(id));
      return top >= 0 && top < (page.viewportSize()?.height ?? 0) ? true : undefined;
    },
    `#${id} scrolled onto the screen`,
    PATIENCE_MS,
  );

async function mint(env: NodeJS.ProcessEnv): Promise<string> {
  const minted = await runCli(['token', 'create', '--subject', 'alice', '--scopes', SCOPES, '--json'], env);
  assert.equal(minted.code, 0, minted.stderr);
  return (JSON.parse(minted.stdout) as { token: string }).token;
}

test(
  '/portal at 390×844: no sideways scroll, nothing cut, text of 12 px or more, every button pressable, the feed a tap away',
  {
    timeout: BROWSER_TEST_TIMEOUT_MS,
    skip,
  },
  async (t) => {
    assert.ok(existsSync(CHROMIUM), MISSING);
    const cleanups = cleanupsInReverse(t);
    const dir = await mkdtemp(join(tmpdir(), 'plant-store-portal-phone-'));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    // The fern fails twice and then waits an hour: a pending delivery with attempts and a next one due.
    const receiver = new Receiver((request) => (request.body.includes('Fern') ? 500 : 200));
    await receiver.start();
    cleanups.push(() => receiver.stop());
    // Its webhook is disabled at the first 410; a delivery already under way then fails as well.
    const gone = new Receiver(() => 410);
    await gone.start();
    cleanups.push(() => gone.stop());
    const env = {
      DATABASE_URL: `sqlite:${join(dir, 'plant-store.db')}`,
      WEBHOOK_ALLOW_PRIVATE: '1',
      WEBHOOK_RETRY_SCHEDULE: '0s,200ms,1h',
    };
    const token = await mint(env);
    const server = await startServer(env);
    cleanups.push(() => server.stop());
    const api = async (method: string, path: string, body?: unknown): Promise<string> => {
      const r = await callServer(server, token, method, path, body === undefined ? undefined : JSON.stringify(body));
      assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
      return r.text;
    };
    const hookUrl = `http://127.0.0.1:${receiver.port}${LONG_PATH}`;
    const goneUrl = `http://127.0.0.1:${gone.port}/gone`;
    await api('POST', '/webhooks', { url: hookUrl, description: LONG_DESCRIPTION });
    await api('POST', '/webhooks', { url: goneUrl, events: ['plant.created'] });
    // 21 plants and a ping: more than a page of deliveries, so Older deliveries is shown too.
    for (let id = 100; id < 120; id++) await api('POST', '/plants', { id, name: `Seedling ${id}` });
    await api('POST', '/plants', { id: 2, name: 'Fern', tag: 'a-tag-long-enough-to-wrap-on-a-phone-screen' });
    const [first] = JSON.parse(await api('GET', '/webhooks')) as Array<{ id: string; url: string }>;
    assert.equal(first?.url, hookUrl, 'the first webhook listed, whose deliveries the page shows first');
    await api('POST', `/webhooks/${first.id}/ping`);

    const browser = await launchLocalOnly();
    cleanups.push(() => browser.close());
    const context = await browser.newContext({
      viewport: { width: WIDTH, height: 844 },
      deviceScaleFactor: 3,
      isMobile: true,
      hasTouch: true,
    });
    const page: Page = await context.newPage();
    page.setDefaultTimeout(PATIENCE_MS);
    const pageErrors: string[] = [];
    page.on('pageerror', (error) => void pageErrors.push(error.message));
    /** The layout's problems, and any script error so far: [] when all is well. */
    const layout = async (): Promise<string[]> => [...(await page.evaluate<string[]>(LAYOUT_PROBLEMS)), ...pageErrors];
    const webhookItem = (url: string): Locator => page.getByRole('listitem', { name: url });
    const deliveryRow = (...texts: Array<string | RegExp>): Locator =>
      texts.reduce((rows, text) => rows.filter({ hasText: text }), page.getByRole('row'));

    try {
      await t.test('signed out: the sign-in form fits', async () => {
        await page.goto(`${server.url}/portal`);
        await page.getByLabel('API token').waitFor();
        assert.deepEqual(await layout(), []);
      });

      await t.test('signed in: the webhooks, the chart and the deliveries fit, with every action', async () => {
        await page.getByLabel('API token').fill(token);
        await page.getByRole('button', { name: 'Sign in' }).click();
        await deliveryRow('pending', 'plant.created', '(HTTP 500)').waitFor();
        await deliveryRow('pending', /in \d+ minutes|in 1 hour/)
          .waitFor()
          .catch(async (error: Error) => {
            throw new Error(
              `${error.message}\n${(await page.getByRole('row').allInnerTexts()).join('\n')}\n${pageErrors.join('\n')}`,
            );
          });
        await page.getByRole('img', { name: /^Attempts in the last 24 hours: \d+ delivered, 2 failed$/ }).waitFor();
        await page.getByRole('button', { name: 'Older deliveries' }).waitFor();
        await webhookItem(goneUrl).getByText('disabled: the receiver answered 410 Gone').waitFor();
        await page.getByText('Following: new events appear here as they happen.').waitFor();
        assert.deepEqual(await layout(), []);
      });

      await t.test('the live feed is one tap away: from the top of the page, and from anywhere below', async () => {
        const sections = page.getByRole('navigation', { name: 'Sections' });
        await page.evaluate('window.scrollTo(0, 0)');
        // What the sections' links are for: at the top of the page the feed is screens below.
        const feedTop = await page.evaluate<number>(topOf('feed-panel'));
        assert.ok(feedTop > 2 * 844, `the feed starts ${feedTop} px down, under the webhooks and deliveries`);
        assert.deepEqual(await page.evaluate(notInView(['nav.sections a'])), [], 'the links are on the first screen');

        await sections.getByRole('link', { name: 'Live feed' }).tap();
        await scrolledTo(page, 'feed-panel');
        assert.deepEqual(await page.evaluate(notInView(FEED_SHOWN)), []);
        assert.equal(await page.evaluate<string>('location.hash'), '#feed-panel');
        // Beyond the 24 px every target has (the layout's check): an event type is a finger's 44 px high.
        const heights = await page.evaluate<number[]>(
          "[...document.querySelectorAll('#feed-panel .types label')].map((label) => label.getBoundingClientRect().height)",
        );
        assert.ok(
          heights.length === 2 && heights.every((height) => height >= 44),
          `the labels' heights: ${heights.join(', ')}`,
        );
        await mkdir(dirname(FEED_SCREENSHOT), { recursive: true });
        await page.screenshot({ path: FEED_SCREENSHOT, scale: 'css' });
        t.diagnostic(`screenshot of the screen a tap on Live feed shows: ${FEED_SCREENSHOT}`);

        // From there, the bar is still at the top of the screen: every panel is one tap away.
        assert.deepEqual(await page.evaluate(notInView(['nav.sections a'])), []);
        await sections.getByRole('link', { name: 'Deliveries' }).tap();
        await scrolledTo(page, 'deliveries-panel');
        assert.deepEqual(await page.evaluate(notInView(['#deliveries-heading', '#refresh'])), []);
        await sections.getByRole('link', { name: 'Live feed' }).tap();
        await scrolledTo(page, 'feed-panel');
        assert.deepEqual(await page.evaluate(notInView(FEED_SHOWN)), []);
        await sections.getByRole('link', { name: 'Webhooks' }).tap();
        await scrolledTo(page, 'webhooks-panel');
        assert.deepEqual(await page.evaluate(notInView(['#webhooks-heading', '#add-webhook'])), []);
        assert.deepEqual(await layout(), []);
      });

      await t.test('from the keyboard, Enter on Live feed moves focus to the feed; Tab goes on inside it', async () => {
        await page.evaluate('window.scrollTo(0, 0)');
        await page.getByRole('navigation', { name: 'Sections' }).getByRole('link', { name: 'Live feed' }).focus();
        await page.keyboard.press('Enter');
        await eventually(
          async () => ((await page.evaluate<string>('document.activeElement.id')) === 'feed-panel' ? true : undefined),
          'focus on the feed',
          PATIENCE_MS,
        );
        assert.deepEqual(await page.evaluate(notInView(FEED_SHOWN)), []);
        await page.keyboard.press('Tab');
        assert.equal(await page.evaluate<string>('document.activeElement.id'), 'feed-pause');
        await page.evaluate('document.activeElement.blur()');
      });

      await t.test('an axe-core scan at 390 px finds no serious or critical violation', async () => {
        await page.evaluate(await readFile(AXE, 'utf8'));
        const violations = await page.evaluate<Array<{ id: string; impact: string; nodes: string[] }>>(
          "axe.run(document).then((r) => r.violations.map((v) => ({ id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(' ')) })))",
        );
        const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
        assert.deepEqual(serious, []);
        if (violations.length > 0) t.diagnostic(`minor axe findings: ${JSON.stringify(violations)}`);
      });

      await t.test('Show attempts opens the attempt log, and it fits', async () => {
        await deliveryRow('pending', '(HTTP 500)').getByRole('button', { name: 'Show attempts' }).click();
        const log = page.getByRole('table', { name: /^Attempts of delivery \d+, newest first$/ });
        await log.getByRole('row').filter({ hasText: '500' }).nth(1).waitFor();
        assert.deepEqual(await layout(), []);
        await page.getByRole('button', { name: 'Hide attempts' }).click();
        await log.waitFor({ state: 'detached' });
      });

      await t.test('Retry sends a delivery again', async () => {
        const seedling = receiver.received.find((r) => r.body.includes('Seedling 119'));
        assert.ok(seedling, 'delivered before');
        await deliveryRow('delivered', 'plant.created').first().getByRole('button', { name: 'Retry' }).click();
        await page
          .getByRole('status')
          .getByText(/^Delivery \d+ is sent again\.$/)
          .waitFor();
        await receiver.until((received) => received.filter((r) => r.id === seedling.id).length === 2, PATIENCE_MS);
        assert.deepEqual(await layout(), []);
      });

      await t.test('Older deliveries turns the page, Newer deliveries comes back', async () => {
        await page.getByRole('button', { name: 'Older deliveries' }).click();
        await page.getByRole('button', { name: 'Newer deliveries' }).waitFor();
        assert.deepEqual(await layout(), []);
        await page.getByRole('button', { name: 'Newer deliveries' }).click();
        await page.getByRole('button', { name: 'Newer deliveries' }).waitFor({ state: 'hidden' });
      });

      await t.test("the gone webhook's failed delivery and its attempt fit", async () => {
        await webhookItem(goneUrl).getByRole('button', { name: 'Deliveries' }).click();
        await deliveryRow('failed', '(HTTP 410)').first().getByRole('button', { name: 'Show attempts' }).click();
        await page
          .getByRole('table', { name: /^Attempts of delivery \d+, newest first$/ })
          .getByRole('cell', { name: '410', exact: true })
          .first()
          .waitFor();
        assert.deepEqual(await layout(), []);
      });

      const dialogs: Array<[string, () => Promise<void>, string]> = [
        ['Add webhook', () => page.getByRole('button', { name: 'Add webhook' }).click(), 'Cancel'],
        ['Edit webhook', () => webhookItem(hookUrl).getByRole('button', { name: 'Edit' }).click(), 'Cancel'],
        ['Rotate secret', () => webhookItem(hookUrl).getByRole('button', { name: 'Rotate secret' }).click(), 'Cancel'],
        ['Delete webhook?', () => webhookItem(hookUrl).getByRole('button', { name: 'Delete' }).click(), 'Cancel'],
        ['Enable webhook', () => webhookItem(goneUrl).getByRole('button', { name: 'Enable' }).click(), 'Cancel'],
        [
          'Recover failed deliveries',
          () => page.getByRole('button', { name: 'Recover failed since…' }).click(),
          'Cancel',
        ],
      ];
      for (const [heading, open, close] of dialogs) {
        await t.test(`the ${heading} dialog fits`, async () => {
          await open();
          const dialog = page.getByRole('dialog', { name: heading });
          await dialog.waitFor();
          assert.deepEqual(await layout(), []);
          await dialog.getByRole('button', { name: close }).click();
          await dialog.waitFor({ state: 'hidden' });
        });
      }

      await t.test('the new secret, shown once, fits', async () => {
        await page.getByRole('button', { name: 'Add webhook' }).click();
        const form = page.getByRole('dialog', { name: 'Add webhook' });
        await form.getByLabel('URL').fill(`http://127.0.0.1:${receiver.port}/third`);
        await form.getByRole('button', { name: 'Create webhook' }).click();
        const shown = page.getByRole('dialog', { name: 'Signing secret' });
        await shown.getByText('This secret will not be shown again.').waitFor();
        assert.deepEqual(await layout(), []);
        await shown.getByRole('button', { name: 'Done' }).click();
        await webhookItem(`http://127.0.0.1:${receiver.port}/third`).waitFor();
      });

      await t.test('Pause and Resume on the live feed', async () => {
        await page.getByRole('button', { name: 'Pause' }).click();
        await page.getByRole('button', { name: 'Resume' }).waitFor();
        assert.deepEqual(await layout(), []);
        await page.getByRole('button', { name: 'Resume' }).click();
        await page.getByText('Following: new events appear here as they happen.').waitFor();
        assert.deepEqual(pageErrors, []);
      });
    } finally {
      // The picture in docs/portal.md: the first webhook's deliveries from their panel's top, the
      // failing one opened to its attempts. Taken also when a step failed: then it helps most.
      await webhookItem(hookUrl)
        .getByRole('button', { name: 'Deliveries' })
        .click()
        .then(() => deliveryRow('pending', '(HTTP 500)').getByRole('button', { name: 'Show attempts' }).click())
        .then(() => page.getByRole('table', { name: /^Attempts of delivery \d+, newest first$/ }).waitFor())
        .catch(() => {});
      // The sections' bar where it stands at the top of the page, not over the panel pictured.
      await page.evaluate('document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0)');
      const top = await page.evaluate<number>(
        "document.getElementById('deliveries-panel').getBoundingClientRect().top + scrollY",
      );
      await mkdir(dirname(SCREENSHOT), { recursive: true });
      await page.screenshot({
        path: SCREENSHOT,
        fullPage: true,
        clip: { x: 0, y: Math.max(0, top - 8), width: WIDTH, height: 1250 },
        scale: 'css',
      });
      t.diagnostic(`screenshot of /portal on a phone: ${SCREENSHOT}`);
    }
  },
);
