/**
 * The target of the `rel="next"` link in a `Link` header (RFC 8288 §3): links are separated by
 * commas, each `<target>` followed by `; name=value` parameters whose values may be quoted, and
 * `rel` holds space-separated, case-insensitive relation types.
 */
export function nextLinkTarget(header: string | null): string | undefined {
  if (header === null) return undefined;
  const link = /<([^>]*)>((?:\s*;\s*[^;,=\s]+\s*(?:=\s*(?:"(?:[^"\\]|\\.)*"|[^;,\s]*))?)*)/g;
  const param = /;\s*([^;,=\s]+)\s*(?:=\s*(?:"((?:[^"\\]|\\.)*)"|([^;,\s]*)))?/g;
  for (const [, target, params] of header.matchAll(link)) {
    for (const [, name, quoted, token] of params!.matchAll(param)) {
      if (name!.toLowerCase() !== 'rel') continue;
      const rels = (quoted ?? token ?? '').replace(/\\(.)/g, '$1').toLowerCase().split(/\s+/);
      if (rels.includes('next')) return target;
      break; // only the first rel parameter counts (RFC 8288 §3.3)
    }
  }
  return undefined;
}
