/**
 * Polls `check` until it answers something other than undefined, and answers that; fails once `ms`
 * have passed. A deadline on a condition, never a speed: the tests' one way to wait.
 */
export async function eventually<T>(check: () => Promise<T | undefined>, what: string, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
