import { type KubeConfig, Watch } from "@kubernetes/client-node";
import type { Resource } from "../../shared/kube/index.ts";
import { resourcePath } from "../../shared/kube/index.ts";

/** One line of a watch stream, as the API server sends it. */
export interface RawWatchEvent {
  type: string;
  object: unknown;
}

/**
 * A watch of one kind from a resourceVersion, with bookmarks. The promise resolves when the server
 * ends the stream (its `timeoutSeconds`, a restart) and rejects when the request fails; an HTTP
 * error carries `statusCode`. ERROR events (e.g. 410 Expired) are handed to `onEvent` like any
 * other; the caller decides.
 */
export interface WatchStream {
  watch(
    resource: Resource,
    resourceVersion: string,
    onEvent: (event: RawWatchEvent) => void,
    signal: AbortSignal,
  ): Promise<void>;
}

export interface ClientNodeWatchOptions {
  /** Server-side lifetime of one watch request, default 300 s (the relay then re-watches). */
  timeoutSeconds?: number;
}

/**
 * {@link WatchStream} over `@kubernetes/client-node`'s `Watch` (kubeconfig auth, cluster CA,
 * exec/OIDC tokens refreshed per request). Asks for `allowWatchBookmarks=true`.
 *
 * Caveats: client-node aborts a stream that is silent for `requestTimeoutMs`; it is set past the
 * server's own timeout, so a quiet kind (bookmarks come about once a minute) is never cut early.
 */
export function clientNodeWatchStream(kc: KubeConfig, options: ClientNodeWatchOptions = {}): WatchStream {
  const timeoutSeconds = options.timeoutSeconds ?? 300;
  return {
    watch(resource, resourceVersion, onEvent, signal) {
      return new Promise<void>((resolve, reject) => {
        const watch = new Watch(kc);
        // Private in the typings, public in practice (and the only way to lengthen it).
        (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = (timeoutSeconds + 60) * 1000;
        let controller: AbortController | undefined;
        const onAbort = () => controller?.abort();
        signal.addEventListener("abort", onAbort, { once: true });
        const done = (err: unknown) => {
          signal.removeEventListener("abort", onAbort);
          if (err) reject(err);
          else resolve();
        };
        watch
          .watch(
            resourcePath(resource),
            { resourceVersion, allowWatchBookmarks: true, timeoutSeconds },
            (type: string, object: unknown) => onEvent({ type, object }),
            done,
          )
          .then((c) => {
            controller = c;
            if (signal.aborted) c.abort();
          })
          .catch(done);
      });
    },
  };
}
