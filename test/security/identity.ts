/**
 * Helpers for the security suite (test/integration/security-*.test.ts): act as an identity, and
 * read an identity's effective permissions the way an administrator would.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import { asServiceAccount } from "../../functions/node/install.ts";
import { kubectl } from "../setup/cluster.ts";

/** The admin kubeconfig's cluster with `token` as the user. */
export function asIdentity(admin: KubeConfig, token: string): KubeConfig {
  return asServiceAccount(admin, token);
}

/** One row of `kubectl auth can-i --list`. `resource` is `plural[.group][/subresource]`. */
export interface Grant {
  resource: string;
  nonResourceURLs: string[];
  resourceNames: string[];
  verbs: string[];
}

function bracketed(text: string): string[] {
  const inner = text.replace(/^\[|\]$/g, "").trim();
  return inner === "" ? [] : inner.split(/\s+/);
}

/**
 * `kubectl auth can-i --list --as=<user>` (in `namespace`, else the default namespace, which shows
 * cluster-wide grants), printed table and parsed rows.
 */
export async function canIList(
  user: string,
  namespace?: string,
): Promise<{ table: string; grants: Grant[] }> {
  const args = ["auth", "can-i", "--list", `--as=${user}`, ...(namespace ? ["-n", namespace] : [])];
  const r = await kubectl(args);
  if (r.code !== 0) throw new Error(`kubectl ${args.join(" ")}: ${r.stderr}`);
  const grants: Grant[] = [];
  for (const line of r.stdout.split("\n").slice(1)) {
    // Columns: Resources, Non-Resource URLs, Resource Names, Verbs; the last three are [lists].
    const m = /^(\S*)\s+(\[[^\]]*\])\s+(\[[^\]]*\])\s+(\[[^\]]*\])\s*$/.exec(line);
    if (!m) continue;
    grants.push({
      resource: m[1] ?? "",
      nonResourceURLs: bracketed(m[2] ?? ""),
      resourceNames: bracketed(m[3] ?? ""),
      verbs: bracketed(m[4] ?? ""),
    });
  }
  return { table: r.stdout, grants };
}
