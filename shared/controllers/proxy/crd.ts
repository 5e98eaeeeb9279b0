/**
 * The Proxy CRD as `npm run gen:crds` writes it: the kind of api.ts plus what only the API server
 * and `kubectl` read (descriptions, CEL rules, printer columns). The runtime never imports this
 * module, so none of it is in the Worker bundle; the zod refinements in api.ts are the runtime's
 * side of the CEL rules here.
 */
import { type CrdSpec, conditionsNotes, documented, kubefnCategory, withSummary } from "../../crd/index.ts";
import { maxProbeTimeoutSeconds, ProxyConditionType, proxyKind } from "./api.ts";

export const proxyCrd: CrdSpec = {
  ...proxyKind,
  singular: "proxy",
  shortNames: ["px"],
  categories: [kubefnCategory],
  description:
    "Proxy is a forward proxy: a provider-backed instance (Managed) or an existing endpoint (External).",
  spec: documented(proxyKind.spec, {
    "": {
      description:
        "What the Proxy is: an instance kubefn provisions (Managed) or an endpoint it only probes (External).",
      cel: [
        {
          rule: "self.mode != 'Managed' || has(self.provider)",
          message: "spec.provider is required when mode is Managed",
          fieldPath: ".provider",
          reason: "FieldValueRequired",
        },
        {
          rule: "self.mode != 'External' || has(self.endpoint)",
          message: "spec.endpoint is required when mode is External",
          fieldPath: ".endpoint",
          reason: "FieldValueRequired",
        },
      ],
    },
    mode: "Managed: kubefn provisions an instance through spec.provider and replaces it when the spec or its cloud-init changes. External: kubefn probes spec.endpoint and never calls a provider.",
    provider: 'Provider name, e.g. "kubernetes" or "gce"; required when Managed.',
    instance: "How the provider shapes the instance (Managed mode).",
    "instance.image": "Provider-specific image, e.g. a container image or a GCE image.",
    "instance.machineType": "Provider-specific size, e.g. e2-small.",
    "instance.labels": "Labels put on the provider instance.",
    "instance.zone": "Zone of the instance (gce); one of the operator's GCE_ZONES, the first by default.",
    cloudInit: {
      description:
        "cloud-init user data of the instance (Managed): inline or from a Secret; a change replaces the instance.",
      cel: [
        {
          rule: "has(self.inline) != has(self.secretRef)",
          message: "set exactly one of cloudInit.inline or cloudInit.secretRef",
        },
      ],
    },
    "cloudInit.inline": "cloud-init user data, inline.",
    "cloudInit.secretRef": "cloud-init user data from a Secret; rotating it replaces the instance.",
    "cloudInit.secretRef.name": "Name of a Secret in the Proxy's namespace.",
    "cloudInit.secretRef.key": 'Key in the Secret; defaults to "user-data".',
    endpoint: "Where an External proxy listens.",
    "endpoint.host": {
      description:
        "Hostname or IP address of the proxy, alone (no scheme, port, path or user info); a cloud metadata or link-local address is refused.",
      cel: [
        {
          // What a URL or a host:port pasted into the field carries; the prober checks the host
          // again with every spelling decoded.
          rule: "!self.matches('[/@?#[:space:]]') && !self.matches('^[^:]*:[0-9]*$')",
          message:
            "endpoint.host must be a host name or an IP address alone: no scheme, port, path or user info",
          reason: "FieldValueInvalid",
        },
      ],
    },
    "endpoint.port": "TCP port of the proxy.",
    "endpoint.scheme": "http (a plain forward proxy) or https (TLS to the proxy itself).",
    healthCheck: {
      description: "Periodic probe through the proxy; its verdict is the Healthy condition.",
      cel: [
        {
          rule: "!has(self.timeoutSeconds) || !has(self.intervalSeconds) || self.timeoutSeconds <= self.intervalSeconds",
          message: "healthCheck.timeoutSeconds must not exceed healthCheck.intervalSeconds",
          fieldPath: ".timeoutSeconds",
          reason: "FieldValueInvalid",
        },
      ],
    },
    "healthCheck.timeoutSeconds": {
      description: `Seconds a probe may take, at most ${maxProbeTimeoutSeconds} and at most intervalSeconds (probe slots are shared by every Proxy). A larger value stored under an older CRD is probed with the cap and reported as ProbeTimeoutCapped=True.`,
      maximum: maxProbeTimeoutSeconds,
    },
    "healthCheck.probeURL": "URL fetched through the proxy; https is tunnelled with CONNECT.",
    "healthCheck.expectedStatus": "HTTP status the probe URL must answer with for a probe to pass.",
    "healthCheck.intervalSeconds": "Seconds between two probes of this Proxy.",
    "healthCheck.successThreshold": "Passing probes in a row that turn Healthy True.",
    "healthCheck.failureThreshold": "Failing probes in a row that turn Healthy False.",
  }),
  status: documented(proxyKind.status, {
    "": "What kubefn observed, written by kubefn only (tenants are never granted proxies/status).",
    observedGeneration: "The metadata.generation of the spec this status describes.",
    phase:
      "Pending: no instance yet. Provisioning: the instance is starting or not yet probed healthy. Ready: probes pass. Unhealthy: probes fail. Failed: a PermanentError condition, until the spec changes. Deleting: the instance is being deleted.",
    providerID: "The provider's identifier of the current instance.",
    ip: "The instance address (Managed) or spec.endpoint.host (External).",
    latencyMillis: "Latency of the last status-affecting probe: the median of latencySamples probes.",
    latencySamples:
      "How many probes latencyMillis is the median of: 1 for a verdict (the seed's one probe), 3 for a confirmed latency change (three probes a second apart, all outside the band).",
    lastHealthCheckTime: "Time of the last status-affecting probe (suppressed probes do not write status).",
    ...conditionsNotes("conditions", withSummary(Object.values(ProxyConditionType))),
    health:
      "Probe bookkeeping of the health sweep (JSON). Kept in status, which tenants cannot write, not in an annotation, which they can.",
    seal: "kubefn's HMAC over this status (all but the probe bookkeeping), with a key its Kubernetes identity cannot read: a status whose seal does not verify was not written by kubefn, and a pass rewrites it.",
  }),
  printerColumns: [
    { name: "Mode", type: "string", jsonPath: ".spec.mode" },
    { name: "Phase", type: "string", jsonPath: ".status.phase" },
    { name: "IP", type: "string", jsonPath: ".status.ip" },
    {
      name: "Latency",
      type: "integer",
      jsonPath: ".status.latencyMillis",
      description: "Probe latency in milliseconds",
    },
    { name: "Provider", type: "string", jsonPath: ".spec.provider", priority: 1 },
    {
      name: "Provisioned",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Provisioned")].reason',
      description: "The Provisioned condition's reason",
      priority: 1,
    },
    {
      name: "Healthy",
      type: "string",
      jsonPath: '.status.conditions[?(@.type=="Healthy")].reason',
      description: "The Healthy condition's reason",
      priority: 1,
    },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
};
