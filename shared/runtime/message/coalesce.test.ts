import { describe, expect, it } from "vitest";
import type { JobMessage, Message, PassMessage } from "../core/index.ts";
import { coalesce } from "./coalesce.ts";

const msg = (name: string, attempt = 0): PassMessage => ({
  request: { controller: "c", namespace: "ns", name },
  attempt,
});
const job = (due: number): JobMessage => ({
  kind: "job",
  job: { controller: "c", task: "probe", slot: "30-0", objects: [], due },
});

describe("coalesce (two messages for one key)", () => {
  const snapshot = { apiVersion: "v1", kind: "X", metadata: { name: "a", uid: "old" } };
  it.each<[string, Message, Message, Message]>([
    [
      "same UID: the later wins",
      { ...msg("a"), uid: "u1" },
      { ...msg("a", 2), uid: "u1" },
      { ...msg("a", 2), uid: "u1" },
    ],
    [
      "an event after a follow-up: no UID (the event may be for a recreated object)",
      { ...msg("a", 1), uid: "old" },
      msg("a"),
      msg("a"),
    ],
    [
      "a stale follow-up after an event: it does not swallow the event",
      msg("a"),
      { ...msg("a", 1), uid: "old", listed: [snapshot], listedAt: 1 },
      msg("a", 1),
    ],
    ["different UIDs: neither", { ...msg("a"), uid: "new" }, { ...msg("a", 1), uid: "old" }, msg("a", 1)],
    [
      "regression (issue 33): a creation after a waiting look of an earlier object of the name: a whole pass, no UID (a creation asks for no narrower pass)",
      { ...msg("a"), uid: "old", trigger: { kind: "follow-up", reason: "waiting" } },
      { ...msg("a"), uid: "new", trigger: { kind: "audit", reason: "created" } },
      { ...msg("a"), trigger: { kind: "audit", reason: "created" } },
    ],
    [
      "a reasoned follow-up after an event: the pass does what the event asked, not the narrower look",
      { ...msg("a"), trigger: { kind: "audit" } },
      { ...msg("a"), uid: "u1", trigger: { kind: "follow-up", reason: "waiting" } },
      { ...msg("a"), trigger: { kind: "audit" } },
    ],
    [
      "a reasoned follow-up after a message of an older sender (no trigger): no reason either",
      msg("a"),
      { ...msg("a"), uid: "u1", trigger: { kind: "follow-up", reason: "waiting" } },
      msg("a"),
    ],
    [
      "an event after a reasoned follow-up: the event's trigger",
      { ...msg("a"), uid: "u1", trigger: { kind: "follow-up", reason: "waiting" } },
      { ...msg("a"), trigger: { kind: "relay" } },
      { ...msg("a"), trigger: { kind: "relay" } },
    ],
    [
      "two follow-ups with the same reason: the later",
      { ...msg("a"), uid: "u1", trigger: { kind: "follow-up", reason: "waiting" } },
      { ...msg("a", 1), uid: "u1", trigger: { kind: "follow-up", reason: "waiting" } },
      { ...msg("a", 1), uid: "u1", trigger: { kind: "follow-up", reason: "waiting" } },
    ],
    ["the same slot's job of the next sweep: the later job", job(1), job(2), job(2)],
  ])("%s", (_, earlier, later, expected) => {
    expect(coalesce(earlier, later)).toEqual(expected);
  });
});
