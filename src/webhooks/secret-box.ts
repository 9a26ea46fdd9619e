import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

// Webhook secrets are needed to sign, so they are stored; with SECRETS_KEY they are stored
// encrypted (AES-256-GCM), bound to their webhook's id so that a sealed secret copied onto another
// row does not open. Without the key they are stored as they are (SECURITY.md says what holds then).

const SEALED = 'aes-256-gcm:';
const PLAIN = 'plain:';
const IV_BYTES = 12; // NIST SP 800-38D's recommended nonce size for GCM
const TAG_BYTES = 16;

export class SecretKeyError extends Error {
  override name = 'SecretKeyError';
}

export class SecretBox {
  /** `key`: the 32 bytes of SECRETS_KEY, or null to store secrets unencrypted. */
  constructor(private readonly key: Buffer | null) {
    if (key !== null && key.length !== 32) throw new SecretKeyError('SECRETS_KEY must be 32 bytes');
  }

  get encrypts(): boolean {
    return this.key !== null;
  }

  /** Whether a stored secret is encrypted (else stored as it is, from a time without SECRETS_KEY). */
  isSealed(stored: string): boolean {
    return stored.startsWith(SEALED);
  }

  seal(secret: string, webhookId: string): string {
    if (this.key === null) return `${PLAIN}${secret}`;
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key, iv, { authTagLength: TAG_BYTES });
    cipher.setAAD(Buffer.from(webhookId));
    const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
    return `${SEALED}${Buffer.concat([iv, cipher.getAuthTag(), sealed]).toString('base64')}`;
  }

  open(stored: string, webhookId: string): string {
    if (stored.startsWith(PLAIN)) return stored.slice(PLAIN.length);
    if (!stored.startsWith(SEALED)) throw new SecretKeyError(`webhook ${webhookId}: its stored secret is not readable`);
    if (this.key === null) {
      throw new SecretKeyError(`webhook ${webhookId}: its secret is encrypted, and SECRETS_KEY is not set`);
    }
    const raw = Buffer.from(stored.slice(SEALED.length), 'base64');
    const decipher = createDecipheriv('aes-256-gcm', this.key, raw.subarray(0, IV_BYTES), {
      authTagLength: TAG_BYTES,
    });
    decipher.setAAD(Buffer.from(webhookId));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw new SecretKeyError(`webhook ${webhookId}: its secret does not open with this SECRETS_KEY`);
    }
  }
}
