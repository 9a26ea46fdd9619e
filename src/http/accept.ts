import type { FastifyReply } from 'fastify';

// Proactive negotiation on Accept (RFC 9110 §12.5.1), for a resource with more than one
// representation (GET /events: a stream, or pages of JSON).

interface Range {
  readonly type: string;
  readonly subtype: string;
  readonly q: number;
}

function ranges(header: string): Range[] {
  const out: Range[] = [];
  for (const part of header.split(',')) {
    const [range = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const slash = range.indexOf('/');
    if (slash <= 0 || slash === range.length - 1) continue; // not a media range: claims nothing
    let q = 1;
    for (const param of params) {
      if (!/^q\s*=/.test(param)) continue;
      const m = /^q\s*=\s*(0(?:\.\d{0,3})?|1(?:\.0{0,3})?)$/.exec(param);
      q = m ? Number(m[1]) : 0; // a q-value out of its grammar claims nothing
    }
    out.push({ type: range.slice(0, slash), subtype: range.slice(slash + 1), q });
  }
  return out;
}

/**
 * How much the client wants `media` ("type/subtype"): the q of the most specific range that
 * matches it (RFC 9110 §12.5.1: `text/event-stream` over `text/*` over `*\/*`), and how specific
 * that range was (3 exact, 2 `type/*`, 1 `*\/*`, 0 none: then q is 0).
 */
function weigh(all: readonly Range[], media: string): { q: number; specificity: number } {
  const [type, subtype] = media.split('/') as [string, string];
  let best = { q: 0, specificity: 0 };
  for (const r of all) {
    const specificity =
      r.type === type && r.subtype === subtype
        ? 3
        : r.type === type && r.subtype === '*'
          ? 2
          : r.type === '*' && r.subtype === '*'
            ? 1
            : 0;
    if (specificity > best.specificity) best = { q: r.q, specificity };
  }
  return best;
}

/**
 * Which of `offered` (media types, the default first) to send for an Accept value: the highest q;
 * on a tie, the one the client named itself over one it reached only through a wildcard
 * (`application/json, *\/*` asks for JSON); on a tie again, the earlier one. Without Accept, or
 * when the client accepts none of them, the default: the resource answered it before it had
 * others, so a client that never asked keeps what it got (no 406).
 */
export function negotiateMediaType<T extends string>(header: string | undefined, offered: readonly [T, ...T[]]): T {
  const fallback = offered[0];
  if (header === undefined || header.trim() === '') return fallback;
  const all = ranges(header);
  let chosen = fallback;
  let best = { q: 0, specificity: 0 };
  for (const media of offered) {
    const w = weigh(all, media);
    if (w.q > best.q || (w.q === best.q && w.q > 0 && w.specificity > best.specificity)) {
      chosen = media;
      best = w;
    }
  }
  return best.q === 0 ? fallback : chosen;
}

/** Adds `accept` to Vary, keeping what is there (CORS's `Origin`): the answer depends on it. */
export function varyOnAccept(reply: FastifyReply): void {
  const vary = reply.getHeader('vary');
  if (vary === undefined) void reply.header('vary', 'accept');
  else if (!/(^|,)\s*accept\s*(,|$)/i.test(String(vary))) void reply.header('vary', `${String(vary)}, accept`);
}
