/**
 * The event recorder against the real API server: events.k8s.io/v1 validation, series
 * aggregation without client-side state, Events of cluster-scoped objects in `default`, and what
 * `kubectl describe` shows.
 */
import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createEventRecorder,
  createKube,
  type Kube,
  type KubeObject,
  Resources,
} from "../../shared/kube/index.ts";
import { createNodeTransport } from "../../shared/kube/node.ts";
import { kubeConfig, kubectl } from "../setup/cluster.ts";

const ns = `ev-${randomBytes(3).toString("hex")}`;
let kube: Kube;
let cm: KubeObject;

interface EventObject extends KubeObject {
  type: string;
  reason: string;
  note: string;
  reportingController: string;
  regarding: { kind: string; name: string; uid: string };
  series?: { count: number; lastObservedTime: string };
}

const eventsAbout = async (namespace: string, name: string) =>
  (await kube.list<EventObject>(Resources.Event, { namespace })).items.filter(
    (e) => e.regarding.name === name,
  );

beforeAll(async () => {
  kube = createKube(createNodeTransport(kubeConfig()));
  await kube.create(Resources.Namespace, { apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });
  cm = await kube.create(Resources.ConfigMap, {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { namespace: ns, name: "subject" },
  });
});

afterAll(async () => {
  await kube.delete(Resources.Namespace, { name: ns }).catch(() => undefined);
});

describe("createEventRecorder on the devcluster", () => {
  it("creates one Event, then counts repeats into its series", async () => {
    const errors: unknown[] = [];
    let now = new Date("2026-11-30T10:00:00.000Z");
    const events = createEventRecorder(kube, {
      controller: "kubefn.dev/test",
      now: () => now,
      onError: (err) => errors.push(err),
    });
    const ev = {
      type: "Warning" as const,
      reason: "ProbeFailed",
      action: "Reconcile",
      note: "Healthy=False: timeout",
    };
    await events.record(cm, ev);
    let [only, ...rest] = await eventsAbout(ns, "subject");
    expect(rest).toEqual([]);
    expect(only).toMatchObject({
      type: "Warning",
      reason: "ProbeFailed",
      note: "Healthy=False: timeout",
      reportingController: "kubefn.dev/test",
      regarding: { kind: "ConfigMap", name: "subject", uid: cm.metadata.uid },
    });
    expect(only!.series).toBeUndefined();

    now = new Date("2026-11-30T10:01:00.000Z");
    await events.record(cm, ev);
    now = new Date("2026-11-30T10:02:00.000Z");
    await events.record(cm, ev);
    [only, ...rest] = await eventsAbout(ns, "subject");
    expect(rest).toEqual([]);
    expect(only!.series?.count).toBe(3);
    expect(only!.series?.lastObservedTime).toBe("2026-11-30T10:02:00.000000Z");

    // Another reason is another Event.
    await events.record(cm, { ...ev, type: "Normal", reason: "ProbeSucceeded", note: "Healthy=True" });
    expect(await eventsAbout(ns, "subject")).toHaveLength(2);
    expect(errors).toEqual([]);
  });

  it("kubectl describe shows them, with the series count", async () => {
    const r = await kubectl(["describe", "configmap", "subject", "-n", ns]);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /Warning\s+ProbeFailed\s+.*\(x3 over .*\)\s+kubefn\.dev\/test\s+Healthy=False: timeout/,
    );
    expect(r.stdout).toMatch(/Normal\s+ProbeSucceeded\s+.*kubefn\.dev\/test\s+Healthy=True/);
  });

  it("puts Events of a cluster-scoped object in namespace default, where kubectl describe finds them", async () => {
    const nodes = { group: "", version: "v1", resource: "nodes", kind: "Node", namespaced: false };
    const node = await kube.get(nodes, { name: "devnode" });
    const note = `cluster-scoped ${ns}`;
    const events = createEventRecorder(kube, { controller: "kubefn.dev/test", now: () => new Date() });
    await events.record(node, { type: "Normal", reason: "Checked", action: "Reconcile", note });
    expect((await eventsAbout("default", "devnode")).filter((e) => e.note === note)).toHaveLength(1);
    const r = await kubectl(["describe", "node", "devnode"]);
    expect(r.stdout).toMatch(new RegExp(`Normal\\s+Checked\\s+.*kubefn\\.dev/test\\s+${note}`));
  });

  it("never throws: a refused write goes to onError", async () => {
    const errors: unknown[] = [];
    const events = createEventRecorder(kube, {
      controller: "not a qualified name!",
      now: () => new Date(),
      onError: (err) => errors.push(err),
    });
    await events.record(cm, { type: "Normal", reason: "X", action: "Y", note: "" });
    expect(errors).toHaveLength(1);
    expect(String(errors[0])).toMatch(/reportingController/);
  });
});
