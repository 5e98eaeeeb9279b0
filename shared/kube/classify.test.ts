import { describe, expect, it } from "vitest";
import statusFixtures from "../../test/fixtures/kube-status.json" with { type: "json" };
import { classifyError, type ErrorClass, isClassifiedError, ReconcileError } from "./classify.ts";
import { ClientThrottledError, errorFromResponse, NetworkError, TimeoutError } from "./errors.ts";

const bodies = Object.fromEntries(
  Object.entries(statusFixtures).map(([name, status]) => [name, JSON.stringify(status)]),
) as Record<keyof typeof statusFixtures, string>;

function fromResponse(status: number, body: string, headers: Record<string, string> = {}) {
  return errorFromResponse({ status, body, headers: new Headers(headers) });
}

describe("classifyError", () => {
  it.each<{ name: string; err: unknown; expected: ErrorClass }>([
    {
      name: "404",
      err: fromResponse(404, bodies.notFound),
      expected: { class: "permanent", reason: "NotFound" },
    },
    {
      name: "409 Conflict",
      err: fromResponse(409, bodies.conflict),
      expected: { class: "conflict", reason: "Conflict" },
    },
    {
      name: "409 AlreadyExists",
      err: fromResponse(409, bodies.alreadyExists),
      expected: { class: "conflict", reason: "AlreadyExists" },
    },
    {
      name: "422 Invalid",
      err: fromResponse(422, bodies.invalid),
      expected: { class: "permanent", reason: "Invalid" },
    },
    {
      name: "403 quota",
      err: fromResponse(403, bodies.quota),
      expected: { class: "quota", reason: "QuotaExceeded" },
    },
    {
      name: "403 RBAC",
      err: fromResponse(403, bodies.forbidden),
      expected: { class: "permanent", reason: "Forbidden" },
    },
    {
      name: "401",
      err: fromResponse(401, bodies.unauthorized),
      expected: { class: "permanent", reason: "Unauthorized" },
    },
    {
      name: "400 no body",
      err: fromResponse(400, ""),
      expected: { class: "permanent", reason: "BadRequest" },
    },
    {
      name: "410 Expired",
      err: fromResponse(410, bodies.gone),
      expected: { class: "permanent", reason: "Expired" },
    },
    {
      name: "429 with Retry-After",
      err: fromResponse(429, bodies.tooMany, { "retry-after": "5" }),
      expected: { class: "transient", reason: "TooManyRequests", retryAfterSeconds: 5 },
    },
    {
      name: "429 with details only",
      err: fromResponse(429, bodies.tooMany),
      expected: { class: "transient", reason: "TooManyRequests", retryAfterSeconds: 1 },
    },
    {
      name: "500",
      err: fromResponse(500, bodies.internal),
      expected: { class: "transient", reason: "InternalError" },
    },
    {
      name: "504",
      err: fromResponse(504, bodies.timeout),
      expected: { class: "transient", reason: "Timeout" },
    },
    {
      name: "ServerTimeout",
      err: fromResponse(500, bodies.serverTimeout),
      expected: { class: "transient", reason: "ServerTimeout", retryAfterSeconds: 2 },
    },
    {
      name: "503",
      err: fromResponse(503, ""),
      expected: { class: "transient", reason: "ServiceUnavailable" },
    },
    {
      name: "503 with Retry-After (regression: it was ignored)",
      err: fromResponse(503, "", { "retry-after": "8" }),
      expected: { class: "transient", reason: "ServiceUnavailable", retryAfterSeconds: 8 },
    },
    {
      name: "500 with Retry-After",
      err: fromResponse(500, bodies.internal, { "retry-after": "3" }),
      expected: { class: "transient", reason: "InternalError", retryAfterSeconds: 3 },
    },
    {
      name: "circuit open (kubefn held the request back)",
      err: new ClientThrottledError("open", { status: 0, reason: "CircuitOpen", retryAfterSeconds: 4 }),
      expected: { class: "transient", reason: "CircuitOpen", retryAfterSeconds: 4 },
    },
    {
      name: "request budget spent",
      err: new ClientThrottledError("spent", { status: 0, reason: "RequestBudgetExhausted" }),
      expected: { class: "transient", reason: "RequestBudgetExhausted" },
    },
    {
      name: "network",
      err: new NetworkError("refused", { status: 0, reason: "NetworkError" }),
      expected: { class: "transient", reason: "NetworkError" },
    },
    {
      name: "client timeout",
      err: new TimeoutError("slow", { status: 0, reason: "ClientTimeout" }),
      expected: { class: "transient", reason: "ClientTimeout" },
    },
    {
      name: "ReconcileError quota",
      err: ReconcileError.quota("InstanceQuotaExceeded", "20/20"),
      expected: { class: "quota", reason: "InstanceQuotaExceeded" },
    },
    {
      name: "ReconcileError transient with retry-after",
      err: ReconcileError.transient("ProviderThrottled", "slow down", { retryAfterSeconds: 9 }),
      expected: { class: "transient", reason: "ProviderThrottled", retryAfterSeconds: 9 },
    },
    {
      name: "ReconcileError permanent wrapping a 5xx (its own class wins)",
      err: ReconcileError.permanent("BadImage", "no such image", {
        cause: fromResponse(500, bodies.internal),
      }),
      expected: { class: "permanent", reason: "BadImage" },
    },
    {
      name: "a foreign ClassifiedError (duck-typed)",
      err: Object.assign(new Error("x"), { errorClass: "permanent", reason: "InvalidSpec" }),
      expected: { class: "permanent", reason: "InvalidSpec" },
    },
    {
      name: "plain Error wrapping a Conflict",
      err: new Error("writing status", { cause: fromResponse(409, bodies.conflict) }),
      expected: { class: "conflict", reason: "Conflict" },
    },
    { name: "plain Error", err: new Error("boom"), expected: { class: "transient", reason: "Unknown" } },
    { name: "a string", err: "boom", expected: { class: "transient", reason: "Unknown" } },
    { name: "undefined", err: undefined, expected: { class: "transient", reason: "Unknown" } },
    {
      name: "bogus errorClass is ignored",
      err: Object.assign(new Error("x"), { errorClass: "fatal", reason: "X" }),
      expected: { class: "transient", reason: "Unknown" },
    },
  ])("$name → $expected.class/$expected.reason", ({ err, expected }) => {
    expect(classifyError(err)).toEqual(expected);
  });

  it("stops on a cause cycle", () => {
    const a = new Error("a");
    const b = new Error("b", { cause: a });
    (a as { cause?: unknown }).cause = b;
    expect(classifyError(a)).toEqual({ class: "transient", reason: "Unknown" });
  });

  it("recognises ReconcileError as a ClassifiedError", () => {
    expect(isClassifiedError(new ReconcileError("conflict", "Race", "lost"))).toBe(true);
    expect(isClassifiedError(new Error("x"))).toBe(false);
  });
});
