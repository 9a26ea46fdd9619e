import { type ClaimedDelivery, type Newcomers, originOf } from '../store/webhook-store.js';
import { attemptResultKind } from './attempt-result.js';
import type { WebhookAttempt } from './sender.js';

/** The part of the process's deliveries in flight that the struggling webhooks hold together, at most. */
const STRUGGLING_SHARE = 1 / 4;
/**
 * The part that the newcomers hold together, at most: the webhooks whose receiver this process has
 * not yet heard answer, one delivery each (a slow start). With the struggling's quarter, half of the
 * process is always left to the receivers known to answer.
 */
const NEWCOMER_SHARE = 1 / 4;

/** What a claim is given: the counts it takes as each webhook's in flight, and the newcomers' rule. */
export interface ClaimRooms {
  readonly busy: ReadonlyMap<string, number>;
  readonly newcomers: Newcomers;
}

/**
 * What one dispatcher knows of the receivers it sends to, and so how many deliveries of each
 * webhook a claim may lease (docs/architecture.md, "How a delivery claim chooses"). Nothing of it is
 * stored: a process starts knowing nothing, and learns from its own attempts.
 *
 * - **Struggling**: a webhook whose last attempt in the process did not succeed (no answer within
 *   the timeout, an error, a refusal), until one does; the struggling together hold at most a
 *   quarter of the process, one delivery each, the longest without a slot first. The per-subject
 *   share bounds one subject; this bounds many subjects failing at once, whose shares add up to
 *   more than the process (a quarter of 1,000 webhooks hanging would otherwise take every slot).
 * - **Newcomers** (a slow start): a webhook this process has no result for, whose origin has not
 *   answered here either, gets one delivery in flight until its receiver is heard; the newcomers
 *   together hold at most another quarter. A receiver that hangs from the start so costs one slot
 *   for one timeout before it is known, not its webhook's or its subject's share (otherwise hanging
 *   webhooks are found only a few dozen per 10 s timeout, and healthy deliveries wait minutes).
 * - **Answering origins**: an origin (scheme, host, port: originOf) whose last attempt got a whole
 *   answer, of any status; a webhook never seen here at such an origin takes its whole room at once.
 * - Everything else (a webhook whose last attempt succeeded) takes its whole room.
 */
export class ReceiverKnowledge {
  /** Struggling webhooks, the longest without a slot first (a Set keeps insertion order). */
  private readonly struggling = new Set<string>();
  /** Answering origins, each with the room a never-seen webhook of it takes (maxInFlightPerWebhook). */
  private readonly answering = new Map<string, number>();
  /** Webhooks whose last attempt succeeded, with their origin. */
  private readonly answered = new Map<string, string>();
  /** Newcomers in flight (one delivery each), with the origin they were claimed at. */
  private readonly trying = new Map<string, string>();

  constructor(private readonly perWebhook: number) {}

  /**
   * The claim's rooms, for a process of `capacity` with `inFlight` out by webhook: the real counts,
   * but a newcomer in flight counts as full until its receiver is heard, a webhook that succeeded
   * last counts (so it is no newcomer) even where its origin's last attempt got no answer, and a
   * struggling webhook counts as full unless it is among the first of them for which room is left
   * in their quarter, and then it may take one.
   */
  forClaim(capacity: number, inFlight: ReadonlyMap<string, number>): ClaimRooms {
    const full = this.perWebhook;
    const busy = new Map(inFlight);
    for (const [id, origin] of this.answered) {
      if (!this.answering.has(origin) && !busy.has(id)) busy.set(id, 0);
    }
    for (const [id, origin] of this.trying) if (!this.answering.has(origin)) busy.set(id, full);
    let held = 0;
    for (const id of this.struggling) held += inFlight.get(id) ?? 0;
    let probes = share(capacity, STRUGGLING_SHARE) - held;
    for (const id of this.struggling) {
      const own = inFlight.get(id) ?? 0;
      if (own === 0 && probes > 0) {
        busy.set(id, full - 1);
        probes -= 1;
      } else busy.set(id, full);
    }
    const most = Math.max(0, share(capacity, NEWCOMER_SHARE) - this.trying.size);
    return { busy, newcomers: { byOrigin: this.answering, room: 1, most } };
  }

  /** After a claim given `rooms`: a struggling webhook that got its probe goes to the back of the line; newcomers are trying. */
  claimed(claimed: readonly ClaimedDelivery[], rooms: ClaimRooms): void {
    for (const { webhook } of claimed) {
      if (this.struggling.delete(webhook.id)) this.struggling.add(webhook.id);
      else if (!rooms.busy.has(webhook.id)) {
        const origin = originOf(webhook.url);
        if (!this.answering.has(origin)) this.trying.set(webhook.id, origin);
      }
    }
  }

  /** What an attempt's end says of its webhook and of its receiver's origin. */
  learn(webhook: ClaimedDelivery['webhook'], result: WebhookAttempt): void {
    const { id } = webhook;
    const origin = originOf(webhook.url);
    this.trying.delete(id);
    if ((result.status !== undefined || result.accepted === true) && result.error === undefined) {
      this.answering.set(origin, this.perWebhook);
    } else this.answering.delete(origin);
    if (attemptResultKind(result) === 'delivered') {
      this.struggling.delete(id);
      this.answered.set(id, origin);
    } else {
      this.struggling.add(id);
      this.answered.delete(id);
    }
  }
}

/** A share of the process's capacity, in deliveries: at least one. */
const share = (capacity: number, part: number): number => Math.max(1, Math.floor(capacity * part));
