import { readFile, stat } from "node:fs/promises";
import type { TokenSource } from "./token-source.ts";

export interface TokenFileOptions {
  /** How long a token is used before the file is looked at again (one `stat`), default 1 s. */
  recheckMs?: number;
  /** Milliseconds now; tests pass a fake clock. */
  now?: () => number;
}

/**
 * A {@link TokenSource} reading a token file that something else rotates: the kubelet's projected
 * ServiceAccount token (rewritten at 80 % of its lifetime, by swapping the volume's `..data`
 * symlink), a sidecar's, an agent's. The file is looked at (`stat`, through symlinks) at most once
 * per `recheckMs` and read again when its inode, size or modification time changed; after a 401
 * it is read again at once, so a token replaced and revoked in between costs no failed request.
 *
 * client-node's own `tokenFile` provider (what `loadFromCluster` sets up) reads the file once a
 * minute whatever happens: for up to 60 s after the old token is revoked, every request fails.
 *
 * Caveats: surrounding whitespace is dropped. An empty or unreadable file keeps the last token in
 * use (a writer that truncates before writing, a volume being remounted); only a source that
 * never read a token rejects.
 */
export function tokenFileSource(path: string, options: TokenFileOptions = {}): TokenSource {
  const recheckMs = options.recheckMs ?? 1000;
  const now = options.now ?? Date.now;
  let current: { token: string; stamp: string } | undefined;
  let checkedAt = Number.NEGATIVE_INFINITY;
  let reading: Promise<string> | undefined;

  /** Reads the file unless its stamp is `unless`; keeps the last token when it cannot. */
  async function refresh(unless?: string): Promise<string> {
    try {
      // stat before read: a change between the two shows as a new stamp next time, never as a
      // new token behind an old stamp.
      const s = await stat(path);
      const stamp = `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
      checkedAt = now();
      if (current && stamp === unless) return current.token;
      const token = (await readFile(path, "utf8")).trim();
      if (token !== "") current = { token, stamp };
      else if (!current) throw new Error(`token file ${path} is empty`);
      return current.token;
    } catch (err) {
      if (current) return current.token;
      throw new Error(`cannot read the token file ${path}`, { cause: err });
    }
  }

  /** One read at a time: requests arriving together share it. */
  function once(unless?: string): Promise<string> {
    reading ??= refresh(unless).finally(() => {
      reading = undefined;
    });
    return reading;
  }

  return {
    token() {
      if (current && now() - checkedAt < recheckMs) return Promise.resolve(current.token);
      return once(current?.stamp);
    },
    async renew(rejected) {
      const token = await once();
      return token === rejected ? undefined : token;
    },
  };
}
