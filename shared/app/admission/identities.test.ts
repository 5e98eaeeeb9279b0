import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { manifestsIn } from "../../../functions/node/install.ts";
import { helmBinary } from "../../../scripts/release.ts";
import type { KubeObject } from "../../kube/index.ts";
import {
  DEFAULT_IDENTITY,
  identitiesOf,
  identityCondition,
  REQUIRED_ADMISSION_POLICIES,
  STATUS_WRITERS,
  withIdentities,
} from "./index.ts";

const oidc = "kubefn-oidc:kubefn";
const eks = "arn:aws:iam::111122223333:role/kubefn";

const isWriters = (o: KubeObject) =>
  o.kind === "ConfigMap" &&
  o.metadata.name === STATUS_WRITERS.name &&
  o.metadata.namespace === STATUS_WRITERS.namespace;

describe("kubefn's identities", () => {
  it("every policy that picks out kubefn's writes names the ServiceAccount in the files, and nothing else", async () => {
    const rbac = await manifestsIn("rbac");
    const contained = rbac.filter((o) => o.kind === "ValidatingAdmissionPolicy" && identitiesOf(o));
    // All but kubefn-state-is-kubefns (which reads the status writers),
    // kubefn-references-need-access (which judges everyone's references) and kubefn-intake-writes
    // (which holds the intake's own identity, kubefn-intake, not the reconciler's).
    const notTheReconcilers = [
      "kubefn-state-is-kubefns",
      "kubefn-references-need-access",
      "kubefn-intake-writes",
    ];
    expect(contained.map((p) => p.metadata.name).sort()).toEqual(
      REQUIRED_ADMISSION_POLICIES.filter((n) => !notTheReconcilers.includes(n)).sort(),
    );
    for (const p of contained) expect(identitiesOf(p)).toEqual([DEFAULT_IDENTITY]);
    expect(rbac.find(isWriters)?.data).toEqual({ kubefn: DEFAULT_IDENTITY });
  });

  it("one list drives every policy's condition and the status writers", async () => {
    const rbac = withIdentities(await manifestsIn("rbac"), [DEFAULT_IDENTITY, oidc, eks]);
    for (const p of rbac.filter((o) => o.kind === "ValidatingAdmissionPolicy" && identitiesOf(o))) {
      expect(identitiesOf(p)).toEqual([DEFAULT_IDENTITY, oidc, eks]);
    }
    expect(rbac.find(isWriters)?.data).toEqual({
      kubefn: DEFAULT_IDENTITY,
      "kubefn-2": oidc,
      "kubefn-3": eks,
    });
  });

  it.each([[[]], [["it's"]], [["a\\b"]], [[""]]])("refuses %j (no CEL can be built from it)", (ids) => {
    expect(() => identityCondition(ids)).toThrow();
  });

  it("the chart renders the same objects from settings.values.SELF_USERNAMES", async () => {
    const helm = await helmBinary();
    const { stdout } = await promisify(execFile)(
      helm,
      [
        "template",
        "kubefn",
        new URL("../../../charts/kubefn", import.meta.url).pathname,
        "--kube-version",
        "1.30.0",
        "--set",
        `settings.values.SELF_USERNAMES=${DEFAULT_IDENTITY}\\,${oidc}`,
      ],
      { maxBuffer: 1 << 26 },
    );
    const chart = parseAllDocuments(stdout)
      .map((d) => d.toJSON() as KubeObject | null)
      .filter((o): o is KubeObject => Boolean(o?.kind));
    const files = withIdentities(await manifestsIn("rbac"), [DEFAULT_IDENTITY, oidc]);
    const pick = (objs: KubeObject[]) =>
      objs
        .filter((o) => o.kind === "ValidatingAdmissionPolicy" || isWriters(o))
        .map((o) => ({ kind: o.kind, name: o.metadata.name, spec: o.spec, data: o.data }))
        .sort((a, b) => a.name!.localeCompare(b.name!));
    expect(pick(chart)).toEqual(pick(files));
  });
});
