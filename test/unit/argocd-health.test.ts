/**
 * infra/argocd ships what Argo CD needs to judge kubefn's kinds: one health.lua per kind at
 * health/<group>/<Kind>/ (Argo CD's resource_customizations layout) and the argocd-cm snippet
 * that installs them. The snippet must carry each script verbatim, for every kind kubefn serves.
 * (What the scripts answer is tested against real statuses in test/integration/gitops-health.)
 */
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import { operatorCrds } from "../../install/index.ts";

const controllerCrds = await operatorCrds();

const argocd = (path: string) => fileURLToPath(new URL(`../../infra/argocd/${path}`, import.meta.url));
const kinds = controllerCrds.map((crd) => ({ group: crd.group, kind: crd.kind }));
const script = ({ group, kind }: { group: string; kind: string }) =>
  readFileSync(argocd(`health/${group}/${kind}/health.lua`), "utf8");

describe("infra/argocd", () => {
  const configMap = parse(readFileSync(argocd("argocd-cm.yaml"), "utf8")) as {
    metadata: { name: string };
    data: Record<string, string>;
  };

  it("is a patch of argocd-cm with one health check per kind kubefn serves, and nothing else", () => {
    expect(configMap.metadata.name).toBe("argocd-cm");
    expect(Object.keys(configMap.data).sort()).toEqual(
      kinds.map(({ group, kind }) => `resource.customizations.health.${group}_${kind}`).sort(),
    );
  });

  it.each(kinds)("carries health/$group/$kind/health.lua verbatim", (k) => {
    expect(configMap.data[`resource.customizations.health.${k.group}_${k.kind}`]).toBe(script(k));
  });

  it("uses only what Argo CD opens for health scripts (base and table; no string, os or io)", () => {
    for (const k of kinds) expect(script(k)).not.toMatch(/\b(string|os|io|debug)\.\w+/);
  });
});
