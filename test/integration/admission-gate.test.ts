/**
 * The trust boundary: kubefn reconciles only inside its containment. With the binding of
 * kubefn-writes-only-its-own deleted (a stolen admin moment, a half-done install), the Node host
 * (as kubefn-system/kubefn, sweeping every second — the deterministic trigger) runs no pass: a
 * Managed Proxy gets no Pod, and the log (one warning per check, naming the binding) and
 * `kubefn_admission_policies_ready 0` say why. Restoring the binding resumes reconciliation
 * within the re-check period (ADMISSION_RECHECK_SECONDS=2 here): the Pod appears. The host's API
 * requests go through a recording pass-through: the check costs two lists per re-check period,
 * whatever the passes.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { installCrdsAndRbac, optInNamespace } from "../../functions/node/install.ts";
import { ValidatingAdmissionPolicyBindings } from "../../shared/app/admission/index.ts";
import { proxyResource } from "../../shared/controllers/proxy/api.ts";
import { createKube, type Kube, type KubeObject, Resources } from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { functionsKubeconfig, type HostProcess, startHost } from "../e2e/host.ts";
import { clusterInfo, eventually, kubeConfig } from "../setup/cluster.ts";
import { startRecordingApiProxy, type WireCall } from "../support/api-recorder.ts";
import { removeNamespaces } from "../support/namespaces.ts";

const ns = `gate-${randomBytes(3).toString("hex")}`;
const binding = "kubefn-writes-only-its-own";
let admin: Kube;
let host: HostProcess | undefined;
let recorder: Awaited<ReturnType<typeof startRecordingApiProxy>> | undefined;

const metric = async (name: string) => {
  const text = await (await fetch(`${host?.url}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line === undefined ? undefined : Number(line.split(" ").at(-1));
};
const pods = async () =>
  (await admin.list(Resources.Pod, { namespace: ns })).items.filter((p) =>
    (p.metadata.name ?? "").startsWith("px-"),
  );
const admissionLists = (calls: WireCall[]) =>
  calls.filter((c) => c.method === "GET" && c.path.includes("/validatingadmissionpolic"));

beforeAll(async () => {
  admin = createKube(createNodeTransport(kubeConfig()));
  await installCrdsAndRbac(admin);
  await admin.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  // The Managed Proxy's Pod: kubefn may create it only where the namespace opted in.
  await optInNamespace(admin, ns);
  recorder = await startRecordingApiProxy(clusterInfo().httpProxy);
}, 120_000);

afterAll(async () => {
  await installCrdsAndRbac(admin);
  // No event source runs here, so the host would see the Proxy's deletion only at its next drift
  // list (a minute or more): the namespace goes with the Proxy's finalizer taken off instead.
  expect(await host?.stop()).toBe(0);
  await removeNamespaces(admin, [ns], { dropFinalizers: true });
  await new Promise<void>((r) => (recorder ? recorder.server.close(() => r()) : r()));
});

describe("kubefn without its admission policies", () => {
  it("runs no pass while a binding is missing, says why, and resumes once it is back", async () => {
    // The kubeconfig first: making it installs infra/rbac (the binding too).
    const kubeconfig = await functionsKubeconfig(clusterInfo().kubeconfig, recorder?.url);
    await admin.delete(ValidatingAdmissionPolicyBindings, { name: binding });
    host = await startHost({
      KUBECONFIG: kubeconfig,
      KUBEFN_SWEEP_SECONDS: "1",
      ADMISSION_RECHECK_SECONDS: "2",
      PROXY_ALLOWED_IMAGES: "registry.example/forward-proxy:test",
    });
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { namespace: ns, name: "held" },
      spec: {
        mode: "Managed",
        provider: "kubernetes",
        instance: { image: "registry.example/forward-proxy:test" },
        cloudInit: { inline: "#cloud-config\n" },
      },
    } as KubeObject);
    const created = Date.now();

    // Two checks after the Proxy was created, each a held-back sweep: it had its chances.
    const warnings = () =>
      (host?.lines ?? []).filter((l) => l.level === "warn" && l.msg.startsWith("not reconciling:"));
    const before = warnings().length;
    await eventually(async () => (warnings().length >= before + 2 ? true : undefined), {
      timeoutMs: 60_000,
      what: "two checks after the Proxy's creation",
    });
    expect(Date.parse(warnings().at(-1)?.time ?? "")).toBeGreaterThan(created);
    expect(warnings().at(-1)).toMatchObject({
      missing: `ValidatingAdmissionPolicyBinding ${binding} is not installed`,
      recheckSeconds: 2,
    });
    expect(await metric("kubefn_admission_policies_ready")).toBe(0);
    expect(await metric("kubefn_sweep_held_back_total")).toBeGreaterThan(0);
    expect(await pods()).toEqual([]);
    const held = await admin.get(proxyResource, { namespace: ns, name: "held" });
    expect(held.metadata.finalizers ?? []).toEqual([]);
    expect((host?.lines ?? []).filter((l) => l.msg === "pass")).toEqual([]);
    // One warning per check, not per object or per sweep: at most one per re-check period.
    const spanSeconds =
      (Date.parse(warnings().at(-1)?.time ?? "") - Date.parse(warnings()[0]?.time ?? "")) / 1000;
    expect(warnings().length).toBeLessThanOrEqual(Math.floor(spanSeconds / 2) + 1);

    // Restored: the next check (within 2 s) opens the gate and the next sweep reconciles.
    await installCrdsAndRbac(admin);
    const pod = await eventually(async () => (await pods())[0], {
      timeoutMs: 60_000,
      what: "the Proxy's Pod",
    });
    expect(pod.metadata.name).toMatch(/^px-[0-9a-f]{20}$/);
    expect(await metric("kubefn_admission_policies_ready")).toBe(1);
    expect(
      (host?.lines ?? []).some((l) => l.msg === "admission policies installed and bound: reconciling again"),
    ).toBe(true);

    // Steady state: over the next sweeps (one a second), two lists per re-check period per
    // instance, however many sweeps and passes ran; the API server's requests as recorded.
    const calls = recorder?.calls ?? [];
    const from = calls.length;
    const sweeps = () => (host?.lines ?? []).filter((l) => l.msg === "sweep").length;
    const sweepsBefore = sweeps();
    await eventually(async () => (sweeps() >= sweepsBefore + 6 ? true : undefined), {
      timeoutMs: 60_000,
      what: "six more sweeps",
    });
    const window = calls.slice(from);
    const windowSeconds = ((window.at(-1)?.at ?? 0) - (window[0]?.at ?? 0)) / 1000;
    const lists = admissionLists(window);
    console.log(
      `admission gate at steady state: ${lists.length} admission lists of ${window.length} API requests over ${windowSeconds.toFixed(1)} s and ${sweeps() - sweepsBefore} sweeps (ADMISSION_RECHECK_SECONDS=2)`,
    );
    expect(lists.length).toBeLessThanOrEqual(2 * (Math.floor(windowSeconds / 2) + 1));
  }, 240_000);
});
