import type { ErrorHandler } from "hono";
import { classifyError } from "../../../kube/index.ts";
import type { Log } from "../../../runtime/index.ts";

/**
 * The `onError` of the discovery and lease routes: a failure reaching the API server (transient
 * or conflict, as `classifyError` says) is 503 `{ error: "KubeUnavailable" }` with Retry-After;
 * anything else is 500 `{ error: "Internal" }`. Both are logged at error level with their class.
 */
export function apiErrorHandler(log: Log): ErrorHandler {
  return (err, c) => {
    const cls = classifyError(err);
    log.error("proxy API request failed", {
      method: c.req.method,
      path: c.req.path,
      errorClass: cls.class,
      reason: cls.reason,
      error: String(err),
    });
    if (cls.class === "transient" || cls.class === "conflict") {
      c.header("Retry-After", String(Math.max(1, Math.ceil(cls.retryAfterSeconds ?? 1))));
      return c.json({ error: "KubeUnavailable", reason: cls.reason }, 503);
    }
    return c.json({ error: "Internal" }, 500);
  };
}
