package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	kcm "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	kcmoptions "k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
)

// The kube-controller-manager controllers run in this process. Only those a cluster without
// workloads controllers still needs:
var controllers = []string{
	"namespace-controller", // a deleted Namespace really goes away, with its content
	// The garbage collector (ownerReferences cascade, foreground and background) runs too, but
	// outside the controller manager: see gc.go.
	"serviceaccount-controller",                // the "default" ServiceAccount in each namespace (Pods need it)
	"root-ca-certificate-publisher-controller", // kube-root-ca.crt in each namespace, as in any cluster
	"clusterrole-aggregation-controller",       // admin/edit/view ClusterRoles get their aggregated rules
}

func newControllerManagerOptions(kubeconfig, caFile string) (*kcmoptions.KubeControllerManagerOptions, error) {
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
		"--use-service-account-credentials=false",
		"--concurrent-gc-syncs=5",
		"--concurrent-namespace-syncs=5",
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
