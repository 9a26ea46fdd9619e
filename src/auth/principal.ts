/**
 * Who a request acts for, whatever proved it: an API token (authenticator.ts) or a JWT (jwt.ts).
 * Its own module, so that the two that make one need not import each other.
 */
export interface Principal {
  readonly subject: string;
  readonly scopes: ReadonlySet<string>;
  readonly tokenId: string;
  /** When the credential ends where no token record says so (a JWT's `exp`, ms); absent otherwise. */
  readonly expiresAt?: number;
}
