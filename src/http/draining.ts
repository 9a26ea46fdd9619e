import type { FastifyInstance } from 'fastify';

/** The apps of this process that have begun to drain (server.ts marks its app on SIGTERM). */
const draining = new WeakSet<FastifyInstance>();

export const markDraining = (app: FastifyInstance): void => void draining.add(app);
export const isDraining = (app: FastifyInstance): boolean => draining.has(app);
