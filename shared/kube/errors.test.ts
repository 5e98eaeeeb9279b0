import { describe, expect, it } from "vitest";
import statusFixtures from "../../test/fixtures/kube-status.json" with { type: "json" };
import {
  AlreadyExistsError,
  ConflictError,
  errorFromResponse,
  errorFromTransportFailure,
  ForbiddenError,
  InvalidError,
  isAlreadyExists,
  isConflict,
  isNotFound,
  KubeError,
  NetworkError,
  NotFoundError,
  ServerError,
  TimeoutError,
  TooManyRequestsError,
  UnauthorizedError,
} from "./errors.ts";

/** Status bodies as kube-apiserver sends them, as compact JSON strings. */
const bodies = Object.fromEntries(
  Object.entries(statusFixtures).map(([name, status]) => [name, JSON.stringify(status)]),
) as Record<keyof typeof statusFixtures, string>;

const req = { method: "GET" as const, path: "/api/v1/namespaces/default/configmaps/x" };

function response(status: number, body: string, headers: Record<string, string> = {}) {
  return { status, body, headers: new Headers({ "content-type": "application/json", ...headers }) };
}

describe("errorFromResponse", () => {
  it.each([
    { name: "404", status: 404, body: bodies.notFound, type: NotFoundError, reason: "NotFound" },
    { name: "409 Conflict", status: 409, body: bodies.conflict, type: ConflictError, reason: "Conflict" },
    {
      name: "409 AlreadyExists",
      status: 409,
      body: bodies.alreadyExists,
      type: AlreadyExistsError,
      reason: "AlreadyExists",
    },
    {
      name: "409 apply conflict",
      status: 409,
      body: bodies.applyConflict,
      type: ConflictError,
      reason: "Conflict",
    },
    { name: "422", status: 422, body: bodies.invalid, type: InvalidError, reason: "Invalid" },
    { name: "403 quota", status: 403, body: bodies.quota, type: ForbiddenError, reason: "Forbidden" },
    { name: "403 RBAC", status: 403, body: bodies.forbidden, type: ForbiddenError, reason: "Forbidden" },
    { name: "401", status: 401, body: bodies.unauthorized, type: UnauthorizedError, reason: "Unauthorized" },
    { name: "429", status: 429, body: bodies.tooMany, type: TooManyRequestsError, reason: "TooManyRequests" },
    { name: "500", status: 500, body: bodies.internal, type: ServerError, reason: "InternalError" },
    { name: "504", status: 504, body: bodies.timeout, type: TimeoutError, reason: "Timeout" },
    {
      name: "500 ServerTimeout",
      status: 500,
      body: bodies.serverTimeout,
      type: TimeoutError,
      reason: "ServerTimeout",
    },
    { name: "410 Expired", status: 410, body: bodies.gone, type: KubeError, reason: "Expired" },
    {
      name: "502 HTML from a proxy",
      status: 502,
      body: "<html>Bad Gateway</html>",
      type: ServerError,
      reason: "InternalError",
    },
    { name: "503 empty body", status: 503, body: "", type: ServerError, reason: "ServiceUnavailable" },
    {
      name: "404 plain text",
      status: 404,
      body: "404 page not found\n",
      type: NotFoundError,
      reason: "NotFound",
    },
    { name: "409 no body", status: 409, body: "", type: ConflictError, reason: "Conflict" },
  ])("$name → $type.name ($reason)", ({ status, body, type, reason }) => {
    const err = errorFromResponse(response(status, body), req);
    expect(err).toBeInstanceOf(type);
    expect(err).toBeInstanceOf(KubeError);
    expect(err.status).toBe(status);
    expect(err.reason).toBe(reason);
    expect(err.request).toBe("GET /api/v1/namespaces/default/configmaps/x");
  });

  it("keeps the Status message and details", () => {
    const err = errorFromResponse(response(404, bodies.notFound), req);
    expect(err.message).toContain('configmaps "missing" not found');
    expect(err.details).toEqual({ name: "missing", kind: "configmaps" });
  });

  it("exposes the causes of an Invalid", () => {
    const err = errorFromResponse(response(422, bodies.invalid), req);
    expect(err).toBeInstanceOf(InvalidError);
    expect((err as InvalidError).causes).toEqual([
      expect.objectContaining({ field: "metadata.name", reason: "FieldValueInvalid" }),
    ]);
  });

  it.each<{ name: string; headers: Record<string, string>; expected: unknown }>([
    { name: "Retry-After header wins", headers: { "retry-after": "7" }, expected: 7 },
    { name: "details.retryAfterSeconds without header", headers: {}, expected: 1 },
    {
      name: "HTTP-date header",
      headers: { "retry-after": new Date(Date.now() + 30_000).toUTCString() },
      expected: expect.any(Number),
    },
  ])("429: $name", ({ headers, expected }) => {
    const err = errorFromResponse(response(429, bodies.tooMany, headers), req);
    expect((err as TooManyRequestsError).retryAfterSeconds).toEqual(expected);
  });

  it("predicates", () => {
    expect(isNotFound(errorFromResponse(response(404, bodies.notFound)))).toBe(true);
    expect(isConflict(errorFromResponse(response(409, bodies.conflict)))).toBe(true);
    expect(isConflict(errorFromResponse(response(409, bodies.alreadyExists)))).toBe(false);
    expect(isAlreadyExists(errorFromResponse(response(409, bodies.alreadyExists)))).toBe(true);
    expect(isNotFound(new Error("not found"))).toBe(false);
  });
});

describe("errorFromTransportFailure", () => {
  it("wraps what fetch threw into a NetworkError carrying it as cause", () => {
    const thrown = new TypeError("fetch failed", { cause: new Error("connect ECONNREFUSED 127.0.0.1:6443") });
    const err = errorFromTransportFailure(thrown, req);
    expect(err).toBeInstanceOf(NetworkError);
    expect(err.status).toBe(0);
    expect(err.cause).toBe(thrown);
    expect(err.message).toContain("ECONNREFUSED");
  });

  it("passes KubeErrors through", () => {
    const timeout = new TimeoutError("slow", { status: 0, reason: "ClientTimeout" });
    expect(errorFromTransportFailure(timeout, req)).toBe(timeout);
  });
});
