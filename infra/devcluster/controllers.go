package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
)

// The kube-controller-manager controllers run in this process: those a cluster's objects depend on
// for the operators here to reach Ready (workloads, their endpoints, quota, volumes), from the
// same Kubernetes release as the API server. The scheduler and kubelet are played by the
// simulated node (node.go); volume provisioning by storage.go.
var controllers = []string{
	"namespace-controller", // a deleted Namespace really goes away, with its content
	// The garbage collector (ownerReferences cascade, foreground and background) runs too, but
	// outside the controller manager: see gc.go.
	"serviceaccount-controller",                // the "default" ServiceAccount in each namespace (Pods need it)
	"serviceaccount-token-controller",          // a kubernetes.io/service-account-token Secret gets its token
	"root-ca-certificate-publisher-controller", // kube-root-ca.crt in each namespace, as in any cluster
	"clusterrole-aggregation-controller",       // admin/edit/view ClusterRoles get their aggregated rules
	// Workloads: a Deployment rolls out ReplicaSets, which create Pods; StatefulSets create Pods and
	// their volume claims; DaemonSets a Pod on the node. Status (readyReplicas, ...) as upstream.
	"deployment-controller",
	"replicaset-controller",
	"statefulset-controller",
	"daemonset-controller",
	"disruption-controller",    // PodDisruptionBudget status
	"endpointslice-controller", // Services get EndpointSlices of their ready Pods
	// A namespace with a ResourceQuota admits nothing until the quota's status is computed.
	"resourcequota-controller",
	// Volume claims bind: the upstream binder, with storage.go provisioning the volumes; the
	// protection controllers release the finalizers admission puts on claims and volumes.
	"persistentvolume-binder-controller",
	"persistentvolumeclaim-protection-controller",
	"persistentvolume-protection-controller",
}

func newControllerManagerOptions(kubeconfig, caFile, saKeyFile string) (*kcmoptions.KubeControllerManagerOptions, error) {
	s, err := kcmoptions.NewKubeControllerManagerOptions()
	if err != nil {
		return nil, err
	}
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range s.Flags(kcm.KnownControllers(), kcm.ControllersDisabledByDefault(), kcm.ControllerAliases()).FlagSets {
		fs.AddFlagSet(f)
	}
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--controllers=" + strings.Join(controllers, ","),
		"--leader-elect=false",
		"--secure-port=0", // no serving port: nothing scrapes it
		"--root-ca-file=" + caFile,
		// The token controller signs long-lived ServiceAccount token Secrets with the API server's key.
		"--service-account-private-key-file=" + saKeyFile,
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=5",
		"--concurrent-namespace-syncs=5",
		// Sync periods a test can wait for: the upstream defaults are minutes.
		"--pvclaimbinder-sync-period=5s",
		"--resource-quota-sync-period=30s",
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	return s, nil
}

func runControllerManager(ctx context.Context, s *kcmoptions.KubeControllerManagerOptions) error {
	c, err := s.Config(ctx, kcm.KnownControllers(), kcm.ControllersDisabledByDefault(), kcm.ControllerAliases())
	if err != nil {
		return fmt.Errorf("kube-controller-manager config: %w", err)
	}
	return kcm.Run(ctx, c.Complete())
}
