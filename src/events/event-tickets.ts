import { randomBytes } from 'node:crypto';
import type { TicketDoor } from '../auth/authenticate.js';
import type { Principal } from '../auth/principal.js';
import { HttpError } from '../errors.js';
import { wantsPages } from './event-pages.js';
import { hashToken } from '../auth/token.js';
import type { TokenAuthenticator } from '../auth/authenticator.js';
import type { TokenStore } from '../store/store.js';

/** What every ticket starts with: the request log redacts it wherever it appears (http/request-log.ts). */
export const TICKET_PREFIX = 'pse_';
/** How long a ticket may wait to be spent: 60 s (interface 1.3.0; docs/api.md#the-change-feed). */
export const TICKET_LIFETIME_MS = 60_000;
const TICKET = /^pse_[A-Za-z0-9_-]{43}$/;

/** Who a stream opened with a ticket acts for, kept to check its token again (event-streams.ts). */
export interface TicketHolder {
  readonly tokenId: string;
  /** A JWT's end; null for an API token, whose record says. */
  readonly until: number | null;
}

export interface IssuedTicket {
  readonly ticket: string;
  readonly expiresAt: number;
}

/**
 * Tickets of the change feed (interface 1.3.0): a browser's own EventSource cannot send
 * `Authorization`, so a page asks `POST /events/tickets` with its token and opens
 * `GET /events?ticket=…`. A ticket is 32 random bytes, kept only as its SHA-256 in the store (any
 * instance may spend what another issued), spent by the delete that reads it, valid 60 s, and
 * refused once its token is revoked or expired.
 */
export class EventTickets {
  constructor(
    private readonly store: TokenStore,
    private readonly authenticator: TokenAuthenticator,
    private readonly clock: () => number,
  ) {}

  async issue(principal: Principal): Promise<IssuedTicket> {
    const ticket = `${TICKET_PREFIX}${randomBytes(32).toString('base64url')}`;
    const record = {
      hash: hashToken(ticket),
      tokenId: principal.tokenId,
      subject: principal.subject,
      scopes: [...principal.scopes],
      credentialExpiresAt: principal.expiresAt ?? null,
    };
    const expiresAt = await this.store.createTicket(record, this.clock(), TICKET_LIFETIME_MS);
    return { ticket, expiresAt };
  }

  /** The principal the ticket was issued to, the ticket spent; undefined for any ticket that cannot open a stream. */
  async spend(ticket: string): Promise<(Principal & { readonly holder: TicketHolder }) | undefined> {
    if (!TICKET.test(ticket)) return undefined;
    const found = await this.store.spendTicket(hashToken(ticket), this.clock());
    if (found === undefined) return undefined;
    const holder = { tokenId: found.tokenId, until: found.credentialExpiresAt };
    if (!(await this.authenticator.acceptsId(holder.tokenId, holder.until))) return undefined;
    return {
      subject: found.subject,
      scopes: new Set(found.scopes),
      tokenId: found.tokenId,
      ...(found.credentialExpiresAt !== null && { expiresAt: found.credentialExpiresAt }),
      holder,
    };
  }
}

/** Where GET /events takes a ticket instead of a bearer token: a stream's request, `?ticket=`. */
export function ticketDoor(tickets: EventTickets): TicketDoor {
  return {
    ticketOf(request) {
      if (request.method !== 'GET' || request.routeOptions.url !== '/events') return undefined;
      const { ticket } = request.query as { ticket?: unknown };
      if (ticket === undefined) return undefined;
      // Refused before it is spent: the ticket still opens a stream afterwards.
      if (wantsPages(request.headers.accept)) {
        throw new HttpError(
          400,
          'a ticket opens a stream (Accept: text/event-stream); pages of JSON take the bearer token',
        );
      }
      return typeof ticket === 'string' ? ticket : ''; // repeated: no ticket of any stream
    },
    spend: (ticket) => tickets.spend(ticket),
  };
}

/** The ticket's holder when this principal came from one (GET /events?ticket=); undefined for a bearer. */
export const ticketHolderOf = (principal: Principal): TicketHolder | undefined =>
  (principal as { holder?: TicketHolder }).holder;
