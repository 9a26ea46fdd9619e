// The page builds its elements here. Every value from the API goes in as a text node or an
// attribute value, never as markup (no innerHTML anywhere in the page), so a
// webhook description of `<img src=x onerror=alert(1)>` shows as those characters.

export type Child = Node | string | number | null | undefined | false;
type Attributes = Readonly<Record<string, string | number | boolean | null | undefined>>;

function fill<E extends Element>(element: E, attributes: Attributes, children: readonly Child[]): E {
  for (const [name, value] of Object.entries(attributes)) {
    // No inline style: the Content-Security-Policy allows none, and classes say it in portal.css.
    if (name === 'style' || name.startsWith('on')) throw new Error(`h(): attribute ${name} is not allowed`);
    if (value === false || value === null || value === undefined) continue;
    element.setAttribute(name, value === true ? '' : String(value));
  }
  element.append(...children.filter((child) => child !== null && child !== undefined && child !== false).map(asNode));
  return element;
}

const asNode = (child: Exclude<Child, null | undefined | false>): Node | string =>
  typeof child === 'number' ? String(child) : child;

/** An HTML element with attributes and children (text stays text). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  return fill(document.createElement(tag), attributes, children);
}

/** An SVG element, for the chart. */
export function svg<K extends keyof SVGElementTagNameMap>(
  tag: K,
  attributes: Attributes = {},
  ...children: Child[]
): SVGElementTagNameMap[K] {
  return fill(document.createElementNS('http://www.w3.org/2000/svg', tag), attributes, children);
}

/** What a cell holds when there is nothing to say (no next attempt, no error). */
export const NONE = '—';

/**
 * A table cell that carries its column's name: hidden on a wide screen, where the table's head
 * names it, and shown before the value on a phone, where the rows become cards and the head is
 * out of sight (portal.css). Hidden from screen readers, which have the head.
 * A cell of NONE alone is left out of a phone's card, which is long enough without it.
 */
export function cell(label: string, ...children: Child[]): HTMLTableCellElement {
  const none = children.length === 1 && children[0] === NONE;
  return h(
    'td',
    { class: none ? 'labelled none' : 'labelled' },
    h('span', { class: 'cell-label', 'aria-hidden': 'true' }, label),
    ...children,
  );
}

/** A button that does `action` when pressed; `key` lets focus come back to it after a redraw. */
export function button(label: string, action: () => void, attributes: Attributes = {}): HTMLButtonElement {
  const element = h('button', { type: 'button', ...attributes }, label);
  element.addEventListener('click', action);
  return element;
}

/** The element with this id, of this kind: the page's fixed parts (index.html). */
export function byId<T extends HTMLElement>(id: string, kind: new () => T): T {
  const element = document.getElementById(id);
  if (!(element instanceof kind)) throw new Error(`index.html has no ${kind.name} #${id}`);
  return element;
}

/**
 * Replaces a part's children after a refresh, keeping keyboard focus: the element that had it
 * (named by its data-key) gets it back in the new content, so a timed refresh never throws a
 * keyboard user back to the top of the page.
 */
export function replaceKeepingFocus(parent: Element, ...children: Child[]): void {
  const focused = document.activeElement;
  const key = focused instanceof HTMLElement && parent.contains(focused) ? focused.dataset.key : undefined;
  parent.replaceChildren(...children.filter((c) => c !== null && c !== undefined && c !== false).map(asNode));
  if (key === undefined) return;
  for (const candidate of parent.querySelectorAll<HTMLElement>('[data-key]')) {
    if (candidate.dataset.key === key) return candidate.focus();
  }
}
