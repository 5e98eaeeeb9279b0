/**
 * A fourth operator is one folder (test/fixtures/toy-operator) and one line in the list: with
 * `[...operators, toyOperator]` its kinds are in the registry, the settings schema, the relay's
 * kinds, and in what `npm run gen:cluster` writes — kubefn's RBAC, the audit policy, the relay's
 * grants, the admission policies' lists and the Argo CD health checks. (Reconciled on the
 * devcluster: test/integration/toy-operator.test.ts.)
 */
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { relayKindsOfOperators } from "../../infra/relay/kinds.ts";
import { defaultRelayKinds } from "../../infra/relay/main.ts";
import { clusterFiles } from "../../scripts/gen-cluster.ts";
import { settingsOf, variablesOf } from "../../shared/app/operator-settings.ts";
import { createOperators } from "../../shared/app/operators.ts";
import { controllerKinds, operators } from "../../shared/controllers/index.ts";
import { toyOperator } from "../fixtures/toy-operator/operator.ts";

const withToy = [...operators, toyOperator] as const;
const prober = { probe: async () => ({ ok: false, latencyMs: 0 }) };

type Doc = {
  kind?: string;
  metadata?: { name?: string };
  rules?: { apiGroups?: string[]; resources?: string[]; verbs?: string[]; level?: string }[];
  roleRef?: { name: string };
  spec?: {
    matchConstraints?: { resourceRules?: { apiGroups: string[]; resources: string[] }[] };
  };
  data?: Record<string, string>;
};
const docs = (text: string) =>
  parseAllDocuments(text)
    .map((d) => d.toJSON() as Doc | null)
    .filter((d): d is Doc => d !== null);

describe("a toy fourth operator, one line in the list", () => {
  it("runs: its controller is in the registry beside the three", () => {
    const { registry, refused } = createOperators({ prober, sweepPeriodSeconds: 60 }, withToy);
    expect(registry.controllers.map((c) => c.name)).toEqual(["proxy", "subpool", "site", "toy"]);
    expect(refused).toBeUndefined();
    expect(
      createOperators({ prober, sweepPeriodSeconds: 60 }).registry.controllers.map((c) => c.name),
    ).toEqual(["proxy", "subpool", "site"]);
  });

  it("has its settings in the schema, parsed by its own declaration", () => {
    expect(Object.keys(variablesOf(withToy))).toContain("TOY_GREETING");
    expect(settingsOf(withToy, { TOY_GREETING: "ahoy" }, [])).toMatchObject({
      ok: true,
      settings: { toy: { greeting: "ahoy" } },
    });
  });

  it("is list-watched by the relay (and the production relay watches no toy)", () => {
    const kinds = relayKindsOfOperators(controllerKinds(withToy)).map((k) => k.resource.resource);
    expect(kinds).toContain("toys");
    expect(defaultRelayKinds().map((k) => k.resource.resource)).not.toContain("toys");
  });

  it("is in the generated RBAC, audit policy, relay grants, admission policies and Argo CD health", async () => {
    const files = await clusterFiles(withToy);
    const rbac = docs(files.get("infra/rbac/kubefn.yaml")!);
    const role = rbac.find((d) => d.kind === "ClusterRole" && d.metadata?.name === "kubefn-toy");
    expect(role?.rules).toEqual([
      { apiGroups: ["toys.kubefn.test"], resources: ["toys"], verbs: ["get", "list"] },
      { apiGroups: ["toys.kubefn.test"], resources: ["toys/status"], verbs: ["patch"] },
    ]);
    expect(
      rbac.find((d) => d.kind === "ClusterRoleBinding" && d.roleRef?.name === "kubefn-toy"),
    ).toBeDefined();
    // The rest of the file is as committed: the toy's roles are added, nothing else changes.
    const committed = docs((await clusterFiles(operators)).get("infra/rbac/kubefn.yaml")!);
    expect(rbac.filter((d) => !d.metadata?.name?.includes("toy"))).toEqual(committed);

    const policy = docs(files.get("infra/audit/policy.yaml")!)[0] as unknown as {
      rules: { level: string; resources?: { group: string; resources?: string[] }[] }[];
    };
    const rulesFor = (resource: string) =>
      policy.rules.filter((r) =>
        r.resources?.some((g) => g.group === "toys.kubefn.test" && (g.resources?.includes(resource) ?? true)),
      );
    // The first matching rule decides: its status writes with bodies (the seal check), its own
    // rule for Toys, then its group's Metadata rule.
    expect(rulesFor("toys/status")[0]?.level).toBe("RequestResponse");
    expect(rulesFor("toys")[0]?.level).toBe("RequestResponse");
    expect(
      policy.rules.some((r) => r.resources?.some((g) => g.group === "toys.kubefn.test" && !g.resources)),
    ).toBe(true);

    for (const path of ["infra/relay/manifests.yaml", "charts/kubefn/templates/relay.yaml"]) {
      const text = files.get(path)!;
      expect(text, path).toMatch(
        /- apiGroups: \["toys\.kubefn\.test"\]\n {4}resources: \["toys"\]\n {4}verbs: \["get", "list", "watch"\]/,
      );
    }
    const relay = docs(files.get("infra/relay/manifests.yaml")!).find(
      (d) => d.kind === "ClusterRole" && d.metadata?.name === "kubefn-relay",
    );
    expect(relay?.rules).toContainEqual({
      apiGroups: ["toys.kubefn.test"],
      resources: ["toys"],
      verbs: ["get", "list", "watch"],
    });

    const statusGuard = docs(files.get("infra/rbac/admission-policy.yaml")!).flatMap(
      (d) => d.spec?.matchConstraints?.resourceRules ?? [],
    );
    expect(
      statusGuard.some(
        (r) => r.apiGroups.includes("toys.kubefn.test") && r.resources.includes("toys/status"),
      ),
    ).toBe(true);

    const argocd = docs(files.get("infra/argocd/argocd-cm.yaml")!)[0];
    expect(Object.keys(argocd?.data ?? {})).toContain("resource.customizations.health.toys.kubefn.test_Toy");
    expect(files.has("infra/argocd/health/toys.kubefn.test/Toy/health.lua")).toBe(true);
  });
});
