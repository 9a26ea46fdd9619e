import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';

/**
 * A Redis client for the shared rate limits that never holds a request up: with the offline queue
 * off, commands fail at once while Redis is away, and a stalled Redis times out after 300 ms. The
 * rate limiter then lets requests through (README, "Redis").
 */
export function connectRedis(url: string, late: { app?: FastifyInstance }): Redis {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 2000,
    commandTimeout: 300,
  });
  let reported = false;
  redis.on('error', (error: Error) => {
    // Once per outage, and only once there is a logger: ioredis retries, so the next error comes.
    if (reported || !late.app) return;
    // A plain line with the reason: an outage is expected, not a bug, so no stack (docs/operations.md).
    // A refusal on every address of a name is an AggregateError, with a code and no message.
    late.app.log.warn(
      { reason: error.message || (error as NodeJS.ErrnoException).code || String(error) },
      'Redis is unreachable: rate limits are not enforced until it returns',
    );
    reported = true;
  });
  redis.on('ready', () => {
    if (reported) late.app?.log.info('Redis is reachable again');
    reported = false;
  });
  redis.connect().catch(() => {}); // reported by the error listener
  return redis;
}

/** Closes the client whether or not Redis is reachable (quit needs a live connection). */
export async function closeRedis(redis: Redis | undefined): Promise<void> {
  if (!redis) return;
  await redis.quit().catch(() => redis.disconnect());
}
