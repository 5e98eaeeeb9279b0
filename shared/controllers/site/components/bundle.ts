import type { KubeObject } from "../../../kube/port.ts";
import { parseManifests } from "../manifests.ts";

/** Name of net's shared config in the operator namespace; editing it re-runs every Site. */
export const netConfigName = "net-config";
/** Name of machina's config in the operator namespace; editing it re-runs the cluster components. */
export const machinaConfigName = "machina-config";
/** Name of machina's Deployment (and ServiceAccount) in the operator namespace. */
export const machinaName = "machina";

/**
 * The operator's embedded manifests, in the build-time namespace (`kubefn-system`; components
 * retarget it to the operator's). One bundle for every component, as the seed embeds them: each
 * component takes its own objects out of it (RBAC by `isRBACObject`, configs by
 * `Env.defaultConfigMap`), so the component that skips another's RBAC and the one that applies it
 * read the same list. A CRD in it is never applied by a component (see `crdKind`).
 */
export const operatorManifestsYaml = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: machines.unbounded-cloud.io
spec:
  group: unbounded-cloud.io
  names: { kind: Machine, plural: machines }
  scope: Namespaced
  versions:
    - name: v1alpha3
      served: true
      storage: true
      schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: net
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: net
    app.kubernetes.io/managed-by: unbounded-operator
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: metalman
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: metalman
    app.kubernetes.io/managed-by: unbounded-operator
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${netConfigName}
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: net
    app.kubernetes.io/managed-by: unbounded-operator
data:
  cluster-cidr: 10.244.0.0/16
  mtu: "1420"
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: ${machinaName}
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: machina
    app.kubernetes.io/managed-by: unbounded-operator
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: ${machinaConfigName}
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: machina
    app.kubernetes.io/managed-by: unbounded-operator
data:
  reconcile-interval: 30s
  log-level: info
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${machinaName}
  namespace: kubefn-system
  labels:
    app.kubernetes.io/name: machina
    app.kubernetes.io/managed-by: unbounded-operator
spec:
  replicas: 1
  selector:
    matchLabels:
      app.kubernetes.io/name: machina
  template:
    metadata:
      labels:
        app.kubernetes.io/name: machina
    spec:
      serviceAccountName: ${machinaName}
      containers:
        - name: machina
          image: placeholder
          args: ["--config=/etc/machina/config"]
          volumeMounts:
            - name: config
              mountPath: /etc/machina
      volumes:
        - name: config
          configMap:
            name: ${machinaConfigName}
`;

/**
 * Where components take their manifests from: the embedded bundle by default, or (Node host,
 * `SITE_MANIFESTS_DIR`) a directory read once at start. Returns fresh copies each call.
 */
export type ManifestSource = () => KubeObject[];

/** The bundle's objects, parsed afresh (callers may mutate them). */
export function operatorManifests(): KubeObject[] {
  return parseManifests(operatorManifestsYaml);
}
