import { type JWTPayload, createRemoteJWKSet, errors, jwtVerify } from 'jose';
import type { JwtSettings } from '../config.js';
import { HttpError } from '../errors.js';
import type { Principal } from './principal.js';
import { isScope, isSubject } from './token.js';

/** How far a token's exp and nbf may be off from this machine's clock. */
const CLOCK_SKEW_SECONDS = 30;

/**
 * The identity provider's keys could not be fetched, so the token cannot be judged either way:
 * a timeout, a JWKS that is not one, a non-200 answer or unparsable JSON (jose's generic
 * JOSEError), or no answer at all (fetch's TypeError). Every other JOSEError judges the token.
 */
const unreachable = (error: unknown): boolean =>
  error instanceof errors.JWKSTimeout ||
  error instanceof errors.JWKSInvalid ||
  (error instanceof errors.JOSEError && error.constructor === errors.JOSEError) ||
  !(error instanceof errors.JOSEError);

/**
 * OpenID Connect access tokens: a JWT signed by one of the provider's published keys (JWKS,
 * fetched and cached by jose), with an allowed algorithm, the configured issuer and audience, and
 * exp/nbf within 30 s of this clock. `sub` is the subject (the plants' owner, the same namespace
 * as API tokens' subjects); the space-separated `scope` claim gives the scopes.
 */
export class JwtVerifier {
  private readonly keys: ReturnType<typeof createRemoteJWKSet>;

  constructor(private readonly settings: JwtSettings) {
    this.keys = createRemoteJWKSet(new URL(settings.jwksUrl), { timeoutDuration: 3000, cooldownDuration: 30_000 });
  }

  async verify(token: string): Promise<Principal | undefined> {
    let payload;
    try {
      payload = await this.check(token);
    } catch (error) {
      if (unreachable(error)) {
        throw new HttpError(503, 'the identity provider’s signing keys could not be fetched; retry shortly', {
          'retry-after': '5',
        });
      }
      return undefined; // bad signature, unknown key, wrong alg/iss/aud, expired, not yet valid, malformed
    }
    const subject = payload.sub;
    if (typeof subject !== 'string' || !isSubject(subject)) return undefined; // the rule of API tokens' subjects
    const claimed = typeof payload.scope === 'string' ? payload.scope.split(' ') : [];
    return {
      subject,
      scopes: new Set(claimed.filter(isScope)),
      tokenId: `jwt:${subject}`,
      expiresAt: payload.exp! * 1000, // a required claim
    };
  }

  private async check(token: string): Promise<JWTPayload> {
    const options = {
      issuer: this.settings.issuer,
      audience: this.settings.audience,
      algorithms: [...this.settings.algorithms],
      clockTolerance: CLOCK_SKEW_SECONDS,
      requiredClaims: ['exp', 'sub'],
    };
    try {
      return (await jwtVerify(token, this.keys, options)).payload;
    } catch (error) {
      if (!(error instanceof errors.JWKSMultipleMatchingKeys)) throw error;
      // A token without `kid` while the provider publishes several keys (a key rotation): try each.
      for await (const key of error) {
        try {
          return (await jwtVerify(token, key, options)).payload;
        } catch (inner) {
          if (!(inner instanceof errors.JWSSignatureVerificationFailed)) throw inner;
        }
      }
      throw new errors.JWSSignatureVerificationFailed();
    }
  }
}
