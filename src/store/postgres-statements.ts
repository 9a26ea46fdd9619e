// The SQL of the PostgreSQL adapter: every statement is named and prepared once per connection.

// pg reads BIGINT as text, never as a JS number. (A cast here, `id::text`, would make ORDER BY id
// sort the text: output column names win in ORDER BY.)
const SELECT_PLANT = 'SELECT id, owner, name, tag FROM plants';

/** Plants in id order from $n+1, at most $n+2 of them, filtered by equality on `columns` ($1…$n). */
function list(columns: string[]): string {
  const where = columns.map((column, i) => `${column} = $${i + 1} AND `).join('');
  return `${SELECT_PLANT} WHERE ${where}id >= $${columns.length + 1} ORDER BY id LIMIT $${columns.length + 2}`;
}

export const STATEMENTS = {
  listAll: list([]),
  listTag: list(['tag']),
  listOwner: list(['owner']),
  listOwnerTag: list(['owner', 'tag']),
  delete: 'DELETE FROM plants WHERE id = $1',
  deleteOwn: 'DELETE FROM plants WHERE id = $1 AND owner = $2',
  // One statement for a batch (of creates, or of an import): atomic, and rows with ids already held
  // are skipped, not overwritten.
  insertBatch: `INSERT INTO plants (id, owner, name, tag)
    SELECT * FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[])
    ON CONFLICT (id) DO NOTHING RETURNING id`,
  byIds: `${SELECT_PLANT} WHERE id = ANY($1::bigint[])`,
  tokenInsert:
    'INSERT INTO api_tokens (id, secret_hash, subject, scopes, created_at, expires_at, revoked_at) VALUES ($1, $2, $3, $4, $5, $6, $7)',
  tokenById: 'SELECT * FROM api_tokens WHERE id = $1',
  tokenAll: 'SELECT * FROM api_tokens ORDER BY created_at, id',
  tokenRevoke: 'UPDATE api_tokens SET revoked_at = coalesce(revoked_at, $1) WHERE id = $2',
} as const;
