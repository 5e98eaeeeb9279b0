/**
 * Step 4 of a pass, pure: every object a valid SubPool derives, in the order the pass ensures
 * them, each with the fields the controller owns. Owner references are added by `ensureObject`.
 */
import type { KubeObject, Resource } from "../../kube/index.ts";
import { Resources, v1Resource } from "../../kube/index.ts";
import {
  type ContainerResources,
  ExposureMode,
  type SubPool,
  subPoolManagedLabel,
  subPoolManagedValue,
  subPoolNamespaceName,
  subPoolPoolLabel,
} from "./api.ts";
import type { OperatorConfig } from "./config.ts";
import { combine, covering, exactly, type OwnedFields } from "./owned-fields.ts";
import type { ResolvedRoute, Validation } from "./validate.ts";

/** The kinds a SubPool derives and controls; their events map back through the controller ref. */
export const subPoolOwnedResources: Resource[] = [
  Resources.Namespace,
  Resources.Secret,
  Resources.ConfigMap,
  Resources.ServiceAccount,
  Resources.Service,
  Resources.StatefulSet,
  Resources.ResourceQuota,
  Resources.NetworkPolicy,
  Resources.PodDisruptionBudget,
];

/** gateway.networking.k8s.io/v1 HTTPRoute; not served by every cluster. */
export const httpRouteResource: Resource = v1Resource("gateway.networking.k8s.io", "HTTPRoute", true);

/** gateway.networking.k8s.io/v1 Gateway, read (never written) for its own status. */
export const gatewayResource: Resource = v1Resource("gateway.networking.k8s.io", "Gateway", true);

/** discovery.k8s.io/v1 EndpointSlice, read for the shared proxy gateway. */
export const endpointSliceResource: Resource = v1Resource("discovery.k8s.io", "EndpointSlice", true);

/** The port the cpa container serves and the Service exposes. */
export const cpaPort = 8080;
/** The port of the cpa-manager container. */
export const cpaManagerPort = 9090;

/** Names of the objects inside `subpool-<id>`. */
export function subPoolObjectNames(id: string) {
  return {
    namespace: subPoolNamespaceName(id),
    credentials: `${id}-credentials`,
    config: `${id}-config`,
    serviceAccount: id,
    service: `${id}-cpa`,
    statefulSet: `${id}-cpa-manager`,
    resourceQuota: `${id}-quota`,
    networkPolicy: id,
    podDisruptionBudget: id,
    httpRoute: id,
    /** Written by earlier versions of the operator; removed when found (step 7). */
    legacyLimitRange: `${id}-limits`,
  } as const;
}

/** One owned object and how to sync it. */
export interface ManagedObject {
  resource: Resource;
  object: KubeObject;
  ownedFields?: OwnedFields;
}

export interface DesiredObjects {
  namespace: KubeObject;
  /** The credential Secret without its data: credentials are generated only when it is missing. */
  credentials: KubeObject;
  /** Step 8, in order. */
  managed: ManagedObject[];
  /** Gateway mode and not suspended; otherwise the route must not exist. */
  httpRoute: ManagedObject | undefined;
  status: { namespace: string; cpaService: string; hostname: string | undefined };
}

/** Labels on everything a pool derives. */
export function poolLabels(id: string): Record<string, string> {
  return { [subPoolManagedLabel]: subPoolManagedValue, [subPoolPoolLabel]: id };
}

/** Selects the pool's Pods (StatefulSet, Service, NetworkPolicy, PDB). */
export function podSelectorLabels(id: string): Record<string, string> {
  return { [subPoolPoolLabel]: id, "app.kubernetes.io/name": "cpa" };
}

/**
 * {@link buildDesired} for a pool as validated: one admitted above the envelope (an earlier,
 * higher one) gets a ResourceQuota of what it runs, not of the lower envelope.
 */
export function desiredFor(
  pool: SubPool,
  config: OperatorConfig,
  validation: Extract<Validation, { ok: true }>,
): DesiredObjects {
  const { aboveEnvelope, route } = validation;
  return buildDesired(pool, aboveEnvelope ? { ...config, envelope: aboveEnvelope } : config, route);
}

/**
 * Builds every desired object of a validated pool (pure).
 *
 * Caveats: the StatefulSet's volumeClaimTemplates, selector and serviceName are immutable in
 * Kubernetes; they are set at creation and never synced (storage.size is immutable in the CRD).
 */
export function buildDesired(
  pool: SubPool,
  config: OperatorConfig,
  route: ResolvedRoute | undefined,
): DesiredObjects {
  const id = pool.metadata.name ?? "";
  const names = subPoolObjectNames(id);
  const ns = names.namespace;
  const labels = poolLabels(id);
  const meta = (name: string) => ({ name, namespace: ns, labels: { ...labels } });
  const selector = podSelectorLabels(id);
  const suspended = pool.spec.suspend;
  const gatewayMode = pool.spec.exposure.mode === ExposureMode.Gateway;

  const configData: Record<string, string> = {
    SUBPOOL_ID: id,
    CPA_PORT: String(cpaPort),
    CPA_MANAGER_PORT: String(cpaManagerPort),
    PROXY_GATEWAY: `${config.proxyGateway.service}.${config.proxyGateway.namespace}.svc`,
  };
  if (route) configData.PUBLIC_HOSTNAME = route.hostname;

  const credentialEnv = [
    { name: "CPA_USERNAME", valueFrom: { secretKeyRef: { name: names.credentials, key: "username" } } },
    { name: "CPA_PASSWORD", valueFrom: { secretKeyRef: { name: names.credentials, key: "password" } } },
  ];
  const container = (
    name: string,
    image: string,
    port: number,
    portName: string,
    resources: ContainerResources,
  ) => ({
    name,
    image,
    ports: [{ name: portName, containerPort: port, protocol: "TCP" }],
    envFrom: [{ configMapRef: { name: names.config } }],
    env: credentialEnv,
    resources: containerResources(resources),
    volumeMounts: [{ name: "data", mountPath: "/data" }],
  });

  const ingress: unknown[] = [
    {
      from: [{ podSelector: {} }],
      ports: [
        { protocol: "TCP", port: cpaPort },
        { protocol: "TCP", port: cpaManagerPort },
      ],
    },
  ];
  if (route) {
    ingress.push({
      from: [
        { namespaceSelector: { matchLabels: { "kubernetes.io/metadata.name": route.gateway.namespace } } },
      ],
      ports: [{ protocol: "TCP", port: cpaPort }],
    });
  }

  const managed: ManagedObject[] = [
    {
      resource: Resources.ServiceAccount,
      object: {
        apiVersion: "v1",
        kind: "ServiceAccount",
        metadata: meta(names.serviceAccount),
        automountServiceAccountToken: false,
      },
      ownedFields: exactly("automountServiceAccountToken"),
    },
    {
      resource: Resources.ConfigMap,
      object: { apiVersion: "v1", kind: "ConfigMap", metadata: meta(names.config), data: configData },
      ownedFields: exactly("data"),
    },
    {
      resource: Resources.ResourceQuota,
      object: {
        apiVersion: "v1",
        kind: "ResourceQuota",
        metadata: meta(names.resourceQuota),
        spec: {
          hard: {
            "requests.cpu": config.envelope.cpu,
            "requests.memory": config.envelope.memory,
            "requests.storage": String(pool.spec.storage.size),
            persistentvolumeclaims: "1",
          },
        },
      },
      ownedFields: covering("spec.hard"),
    },
    {
      resource: Resources.NetworkPolicy,
      object: {
        apiVersion: "networking.k8s.io/v1",
        kind: "NetworkPolicy",
        metadata: meta(names.networkPolicy),
        spec: { podSelector: { matchLabels: selector }, policyTypes: ["Ingress"], ingress },
      },
      ownedFields: exactly("spec.podSelector", "spec.policyTypes", "spec.ingress"),
    },
    {
      resource: Resources.Service,
      object: {
        apiVersion: "v1",
        kind: "Service",
        metadata: meta(names.service),
        spec: {
          type: "ClusterIP",
          ports: [{ name: "http", port: cpaPort, targetPort: "http", protocol: "TCP" }],
          selector,
        },
      },
      ownedFields: exactly("spec.type", "spec.ports", "spec.selector"),
    },
    {
      resource: Resources.StatefulSet,
      object: {
        apiVersion: "apps/v1",
        kind: "StatefulSet",
        metadata: meta(names.statefulSet),
        spec: {
          replicas: suspended ? 0 : 1,
          serviceName: names.service,
          selector: { matchLabels: selector },
          template: {
            metadata: { labels: { ...labels, ...selector } },
            spec: {
              serviceAccountName: names.serviceAccount,
              containers: [
                container("cpa", pool.spec.cpa.image, cpaPort, "http", pool.spec.cpa.resources),
                container(
                  "cpa-manager",
                  pool.spec.cpaManager.image,
                  cpaManagerPort,
                  "manager",
                  pool.spec.cpaManager.resources,
                ),
              ],
            },
          },
          volumeClaimTemplates: [
            {
              apiVersion: "v1",
              kind: "PersistentVolumeClaim",
              metadata: { name: "data", labels: { ...labels } },
              spec: {
                accessModes: ["ReadWriteOnce"],
                resources: { requests: { storage: String(pool.spec.storage.size) } },
                ...(pool.spec.storage.storageClassName
                  ? { storageClassName: pool.spec.storage.storageClassName }
                  : {}),
              },
            },
          ],
        },
      },
      ownedFields: combine(exactly("spec.replicas"), covering("spec.template")),
    },
    {
      resource: Resources.PodDisruptionBudget,
      object: {
        apiVersion: "policy/v1",
        kind: "PodDisruptionBudget",
        metadata: meta(names.podDisruptionBudget),
        spec: { minAvailable: 1, selector: { matchLabels: selector } },
      },
      ownedFields: exactly("spec.minAvailable", "spec.selector"),
    },
  ];

  const httpRoute: ManagedObject | undefined =
    route && gatewayMode && !suspended
      ? {
          resource: httpRouteResource,
          object: {
            apiVersion: "gateway.networking.k8s.io/v1",
            kind: "HTTPRoute",
            metadata: meta(names.httpRoute),
            spec: {
              parentRefs: [
                {
                  group: "gateway.networking.k8s.io",
                  kind: "Gateway",
                  name: route.gateway.name,
                  namespace: route.gateway.namespace,
                },
              ],
              hostnames: [route.hostname],
              rules: [
                {
                  backendRefs: [
                    { group: "", kind: "Service", name: names.service, port: cpaPort, weight: 1 },
                  ],
                },
              ],
            },
          },
          ownedFields: covering("spec.parentRefs", "spec.hostnames", "spec.rules"),
        }
      : undefined;

  return {
    namespace: { apiVersion: "v1", kind: "Namespace", metadata: { name: ns, labels: { ...labels } } },
    credentials: { apiVersion: "v1", kind: "Secret", metadata: meta(names.credentials), type: "Opaque" },
    managed,
    httpRoute,
    status: {
      namespace: ns,
      cpaService: `${names.service}.${ns}.svc:${cpaPort}`,
      hostname: route?.hostname,
    },
  };
}

function containerResources(resources: ContainerResources): Record<string, unknown> {
  const out: Record<string, unknown> = {
    requests: { cpu: String(resources.requests.cpu), memory: String(resources.requests.memory) },
  };
  const limits: Record<string, string> = {};
  if (resources.limits?.cpu !== undefined) limits.cpu = String(resources.limits.cpu);
  if (resources.limits?.memory !== undefined) limits.memory = String(resources.limits.memory);
  if (Object.keys(limits).length > 0) out.limits = limits;
  return out;
}
