/**
 * The cluster side that names kubefn's kinds (RBAC, audit policy, relay grants, admission
 * policies' lists, Argo CD health checks) is what `npm run gen:cluster` writes from the one list
 * of operators: a changed operator without a regenerated manifest fails here.
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { clusterFiles } from "../../scripts/gen-cluster.ts";
import { operators } from "../../shared/controllers/index.ts";

const root = fileURLToPath(new URL("../../", import.meta.url));
const expected = await clusterFiles(operators);

describe("npm run gen:cluster", () => {
  it.each([...expected.keys()])("%s is up to date", (path) => {
    // On failure: run `npm run gen:cluster` and commit the files it writes.
    expect(readFileSync(`${root}${path}`, "utf8")).toBe(expected.get(path));
  });

  it("writes every file that names the kinds: RBAC, audit, relay (manifest and chart), admission, Argo CD", () => {
    expect([...expected.keys()].sort()).toEqual(
      expect.arrayContaining([
        "charts/kubefn/templates/relay.yaml",
        "infra/argocd/argocd-cm.yaml",
        "infra/audit/policy.yaml",
        "infra/rbac/admission-policy-shapes.yaml",
        "infra/rbac/admission-policy.yaml",
        "infra/rbac/kubefn.yaml",
        "infra/relay/manifests.yaml",
      ]),
    );
  });
});
