/**
 * Polls `check` until it answers something other than undefined, and answers that; fails once `ms`
 * have passed. A deadline on a condition, never a speed: the tests' one way to wait. `what` names
 * the condition in the failure; as a function it is read at the failure, to say how far it got.
 */
export async function eventually<T>(
  check: () => Promise<T | undefined>,
  what: string | (() => string),
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const found = await check();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${typeof what === 'string' ? what : what()}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
