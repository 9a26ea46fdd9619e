// The token lives in this tab's sessionStorage and nowhere else: not in a URL (history, logs), a
// cookie or localStorage (they outlive the tab). It goes when the tab closes or on Sign out.

const KEY = 'plant-store.token';

export const savedToken = (): string | null => sessionStorage.getItem(KEY);
export const saveToken = (token: string): void => sessionStorage.setItem(KEY, token);
export const forgetToken = (): void => sessionStorage.removeItem(KEY);

/** What the page may show of a token: an API token's public id (as `token list` shows it), never its secret. */
export function tokenLabel(token: string): string {
  const match = /^pst_([A-Za-z0-9]{12})[A-Za-z0-9]{38}$/.exec(token);
  return match ? `token ${match[1]!}` : 'a JWT';
}

/** What was pasted, without the spaces around it or a `Bearer ` copied with it. */
export const cleanToken = (text: string): string => text.trim().replace(/^bearer\s+/i, '');
