import { describe, expect, it } from "vitest";
import {
  AlreadyExistsError,
  ForbiddenError,
  InvalidError,
  NetworkError,
  NotFoundError,
  ServerError,
  TooManyRequestsError,
} from "../../../kube/errors.ts";
import type { Kube, KubeObject } from "../../../kube/port.ts";
import { releaseVersion } from "../../../release.ts";
import {
  buildPod,
  cloudInitMountPath,
  createKubernetesProvider,
  defaultPodImage,
  instanceFromPod,
  type Pod,
  parsePodProviderId,
  providerErrorFromKube,
  sanitiseLabelKey,
  sanitiseLabelValue,
} from "./kubernetes.ts";
import {
  type CreateRequest,
  nameFromUID,
  ownerTags,
  ProviderError,
  ProviderNotFoundError,
} from "./provider.ts";

const uid = "3f2a9c4e-1b7d-4e8f-9a0b-c1d2e3f4a5b6";
const baseReq: CreateRequest = {
  name: nameFromUID(uid),
  namespace: "crawl",
  instance: {},
  tags: ownerTags(uid),
};

describe("the default image", () => {
  it("is this release's forward proxy by tag, never :latest", () => {
    expect(defaultPodImage).toBe(`ghcr.io/kubefn/forward-proxy:${releaseVersion}`);
    expect(defaultPodImage).not.toMatch(/:latest$/);
  });
});

describe("buildPod", () => {
  it.each<{ name: string; req: CreateRequest; check: (pod: Pod) => void }>([
    {
      name: "defaults",
      req: baseReq,
      check: (pod) => {
        expect(pod.metadata).toEqual({
          name: "px-3f2a9c4e1b7d4e8f9a0b",
          namespace: "crawl",
          labels: { "crawl.kubefn.dev/proxy-uid": uid, "crawl.kubefn.dev/managed-by": "kubefn" },
        });
        expect(pod.spec?.restartPolicy).toBe("Never");
        expect(pod.spec?.automountServiceAccountToken).toBe(false);
        expect(pod.spec?.containers).toEqual([
          {
            name: "proxy",
            image: defaultPodImage,
            ports: [{ name: "proxy", containerPort: 3128, protocol: "TCP" }],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
          },
        ]);
        expect(pod.spec?.securityContext).toMatchObject({
          runAsNonRoot: true,
          seccompProfile: { type: "RuntimeDefault" },
        });
        expect(pod.spec?.volumes).toBeUndefined();
      },
    },
    {
      name: "image and cloud-init",
      req: { ...baseReq, cloudInit: "#cloud-config\n", instance: { image: "squid:6" } },
      check: (pod) => {
        expect(pod.spec?.containers[0]?.image).toBe("squid:6");
        // Cloud-init is a Secret volume: the Pod spec carries no Secret bytes.
        expect(JSON.stringify(pod)).not.toContain("#cloud-config");
        expect(pod.spec?.containers[0]?.env).toBeUndefined();
        expect(pod.spec?.volumes).toEqual([
          {
            name: "cloud-init",
            secret: { secretName: "px-3f2a9c4e1b7d4e8f9a0b-cloud-init", defaultMode: 0o400 },
          },
        ]);
        expect(pod.spec?.containers[0]?.volumeMounts).toEqual([
          { name: "cloud-init", mountPath: cloudInitMountPath, readOnly: true },
        ]);
      },
    },
    {
      name: "shape labels sanitised, owner tags win",
      req: {
        ...baseReq,
        instance: {
          labels: {
            team: "web crawl!",
            "crawl.kubefn.dev/proxy-uid": "forged",
            "Example.COM/x y": "-v-",
            "/": "dropped",
          },
        },
      },
      check: (pod) => {
        expect(pod.metadata.labels).toEqual({
          team: "web-crawl",
          "example.com/x-y": "v",
          "crawl.kubefn.dev/proxy-uid": uid,
          "crawl.kubefn.dev/managed-by": "kubefn",
        });
      },
    },
    {
      // Sanitised after the overlay, the second key would have overwritten the tag.
      name: "a shape label that sanitises to a tag's key does not overwrite it",
      req: {
        ...baseReq,
        instance: {
          labels: {
            "crawl.kubefn.dev/proxy-uid": "x",
            "crawl.kubefn.dev/proxy-uid-": "another-proxys-uid",
            "Crawl.Kubefn.Dev/managed-by": "someone",
          },
        },
      },
      check: (pod) => {
        expect(pod.metadata.labels).toEqual({
          "crawl.kubefn.dev/proxy-uid": uid,
          "crawl.kubefn.dev/managed-by": "kubefn",
        });
      },
    },
    {
      // The API server refuses them on kubefn's Pods (kubefn-pods-are-proxy-instances).
      name: "labels of kubefn's and the Kubernetes domains are dropped, app.kubernetes.io kept",
      req: {
        ...baseReq,
        instance: {
          labels: {
            "crawl.kubefn.dev/role": "x",
            "statefulset.kubernetes.io/pod-name": "db-0",
            "kubernetes.io/hostname": "node-1",
            "k8s.io/x": "y",
            "app.kubernetes.io/name": "proxy",
            "example.com/team": "a",
          },
        },
      },
      check: (pod) => {
        expect(pod.metadata.labels).toEqual({
          "app.kubernetes.io/name": "proxy",
          "example.com/team": "a",
          "crawl.kubefn.dev/proxy-uid": uid,
          "crawl.kubefn.dev/managed-by": "kubefn",
        });
      },
    },
  ])("$name", ({ req, check }) => check(buildPod(req)));

  it("is pure", () => {
    expect(buildPod(baseReq)).toEqual(buildPod(baseReq));
  });
});

describe("label sanitising", () => {
  it.each([
    ["plain", "plain"],
    ["a b/c", "a-b-c"],
    ["_x_", "x"],
    ["x".repeat(70), "x".repeat(63)],
    ["", ""],
  ])("value %j → %j", (input, want) => expect(sanitiseLabelValue(input)).toBe(want));

  it.each([
    ["crawl.kubefn.dev/proxy-uid", "crawl.kubefn.dev/proxy-uid"],
    ["Team", "Team"],
    ["Ex_ample..com/n", "ex-ample.com/n"],
    ["prefix/", ""],
  ])("key %j → %j", (input, want) => expect(sanitiseLabelKey(input)).toBe(want));
});

describe("instanceFromPod", () => {
  const pod = (status: Pod["status"], deletionTimestamp?: string): Pod => ({
    ...buildPod(baseReq),
    metadata: { ...buildPod(baseReq).metadata, ...(deletionTimestamp ? { deletionTimestamp } : {}) },
    status,
  });
  it.each<{ name: string; pod: Pod; state: string; ip?: string }>([
    { name: "no status", pod: pod(undefined), state: "Provisioning" },
    { name: "Pending", pod: pod({ phase: "Pending" }), state: "Provisioning" },
    {
      name: "Running with IP",
      pod: pod({ phase: "Running", podIP: "10.0.0.7" }),
      state: "Running",
      ip: "10.0.0.7",
    },
    { name: "Running without IP", pod: pod({ phase: "Running" }), state: "Provisioning" },
    { name: "Succeeded", pod: pod({ phase: "Succeeded", podIP: "10.0.0.7" }), state: "Stopped" },
    { name: "Failed", pod: pod({ phase: "Failed" }), state: "Stopped" },
    { name: "Unknown", pod: pod({ phase: "Unknown" }), state: "Provisioning" },
    {
      name: "deleting",
      pod: pod({ phase: "Running", podIP: "10.0.0.7" }, "2026-01-01T00:00:00Z"),
      state: "Terminating",
    },
  ])("$name → $state", ({ pod, state, ip }) => {
    const inst = instanceFromPod(pod);
    expect(inst.state).toBe(state);
    expect(inst.ip).toBe(ip);
    expect(inst.id).toBe("kubernetes://crawl/px-3f2a9c4e1b7d4e8f9a0b");
  });
});

describe("parsePodProviderId", () => {
  it("round-trips", () =>
    expect(parsePodProviderId("kubernetes://ns/n")).toEqual({ namespace: "ns", name: "n" }));
  it.each(["gce://p/z/n", "kubernetes://ns", "kubernetes://a/b/c", ""])("rejects %j", (id) => {
    expect(() => parsePodProviderId(id)).toThrow(ProviderError);
  });
});

describe("providerErrorFromKube", () => {
  const init = (status: number, reason: string) => ({ status, reason });
  it.each<{ name: string; err: unknown; errorClass: string; reason: string }>([
    {
      name: "quota",
      err: new ForbiddenError(
        'pods "x" is forbidden: exceeded quota: q, requested: pods=1',
        init(403, "Forbidden"),
      ),
      errorClass: "quota",
      reason: "QuotaExceeded",
    },
    {
      name: "forbidden",
      err: new ForbiddenError("rbac", init(403, "Forbidden")),
      errorClass: "permanent",
      reason: "Forbidden",
    },
    {
      name: "invalid",
      err: new InvalidError("bad", init(422, "Invalid")),
      errorClass: "permanent",
      reason: "Invalid",
    },
    {
      name: "5xx",
      err: new ServerError("boom", init(503, "ServiceUnavailable")),
      errorClass: "transient",
      reason: "ServiceUnavailable",
    },
    {
      name: "429",
      err: new TooManyRequestsError("slow", { ...init(429, "TooManyRequests"), retryAfterSeconds: 3 }),
      errorClass: "transient",
      reason: "TooManyRequests",
    },
    {
      name: "network",
      err: new NetworkError("refused", init(0, "NetworkError")),
      errorClass: "transient",
      reason: "NetworkError",
    },
  ])("$name → $errorClass/$reason", ({ err, errorClass, reason }) => {
    const wrapped = providerErrorFromKube(err, "op");
    expect(wrapped).toBeInstanceOf(ProviderError);
    expect(wrapped.errorClass).toBe(errorClass);
    expect(wrapped.reason).toBe(reason);
    expect(wrapped.cause).toBe(err);
  });

  it("keeps Retry-After", () => {
    const err = new TooManyRequestsError("slow", {
      status: 429,
      reason: "TooManyRequests",
      retryAfterSeconds: 3,
    });
    expect(providerErrorFromKube(err, "op").retryAfterSeconds).toBe(3);
  });
});

/** A Kube that holds Pods in a map; enough to test the provider's create/get/delete decisions. */
function memoryKube(): Kube & { pods: Map<string, KubeObject> } {
  const pods = new Map<string, KubeObject>();
  const keyOf = (ns: string | undefined, name: string) => `${ns}/${name}`;
  const unsupported = () => Promise.reject(new Error("unsupported"));
  return {
    pods,
    async get<T extends KubeObject>(_res: unknown, key: { namespace?: string; name: string }) {
      const pod = pods.get(keyOf(key.namespace, key.name));
      if (!pod) throw new NotFoundError("not found", { status: 404, reason: "NotFound" });
      return structuredClone(pod) as T;
    },
    async create<T extends KubeObject>(_res: unknown, obj: KubeObject) {
      const key = keyOf(obj.metadata.namespace, obj.metadata.name!);
      if (pods.has(key)) throw new AlreadyExistsError("exists", { status: 409, reason: "AlreadyExists" });
      pods.set(key, structuredClone(obj));
      return structuredClone(obj) as T;
    },
    async delete(_res: unknown, key: { namespace?: string; name: string }) {
      if (!pods.delete(keyOf(key.namespace, key.name))) {
        throw new NotFoundError("not found", { status: 404, reason: "NotFound" });
      }
    },
    list: unsupported,
    update: unsupported,
    patch: unsupported,
    updateStatus: unsupported,
    patchStatus: unsupported,
  };
}

describe("createKubernetesProvider", () => {
  it("create is idempotent for the same owner and refuses a foreign pod", async () => {
    const kube = memoryKube();
    const provider = createKubernetesProvider({ kube });
    const first = await provider.create(baseReq);
    expect(first).toMatchObject({ id: "kubernetes://crawl/px-3f2a9c4e1b7d4e8f9a0b", state: "Provisioning" });
    expect(await provider.create(baseReq)).toEqual(first);

    const other = "99999999-1b7d-4e8f-9a0b-c1d2e3f4a5b6";
    const conflicting = { ...baseReq, tags: ownerTags(other) };
    await expect(provider.create(conflicting)).rejects.toMatchObject({
      errorClass: "permanent",
      reason: "NameConflict",
    });
  });

  it("get of a missing pod is ProviderNotFoundError; delete tolerates it", async () => {
    const provider = createKubernetesProvider({ kube: memoryKube() });
    await expect(provider.get("kubernetes://crawl/nope", "u")).rejects.toBeInstanceOf(ProviderNotFoundError);
    await expect(provider.delete("kubernetes://crawl/nope", { owner: "u" })).resolves.toBeUndefined();
  });

  it("refuses a request without the owner tag", async () => {
    const provider = createKubernetesProvider({ kube: memoryKube() });
    await expect(provider.create({ ...baseReq, tags: {} })).rejects.toMatchObject({
      reason: "InvalidRequest",
    });
  });
});
