import type { TestContext } from 'node:test';

/**
 * A test's cleanups, pushed as it starts things and run after it in reverse order (the browser
 * before the server it uses, the server before its database), however the test ended. A cleanup
 * that throws fails the test and leaves the ones after it undone, as one `t.after` each would.
 */
export function cleanupsInReverse(t: TestContext): Array<() => unknown> {
  const cleanups: Array<() => unknown> = [];
  t.after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup();
  });
  return cleanups;
}
