package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

type apiserverConfig struct {
	dataDir     string
	port        int
	etcdURL     string
	pki         *pki
	tokenFile   string
	auditURL    string
	auditToken  string
	auditPolicy string
	profile     profile
}

// apiserverArgs is the kube-apiserver command line we would give a real kube-apiserver binary.
// Going through the flags (rather than poking option structs) keeps this readable against the
// upstream docs and survives field renames between releases.
func apiserverArgs(c apiserverConfig) ([]string, error) {
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", c.port),
		"--advertise-address=127.0.0.1",
		// No kube-proxy / real Service networking here: don't maintain the kubernetes Endpoints.
		"--endpoint-reconciler-type=none",
		"--tls-cert-file=" + c.pki.CertFile,
		"--tls-private-key-file=" + c.pki.KeyFile,
		"--client-ca-file=" + c.pki.CAFile,
		"--cert-dir=" + filepath.Join(c.dataDir, "pki"),
		"--token-auth-file=" + c.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki.SAPubFile,
		"--service-account-signing-key-file=" + c.pki.SAKeyFile,
		"--service-cluster-ip-range=10.0.0.0/16",
		"--allow-privileged=true",
		"--profiling=false",
		"--enable-priority-and-fairness=false",
	}
	if c.profile == profileProduction {
		// ServiceAccount tokens as a kubeadm or managed cluster issues them: at most an hour, and
		// no silent one-year extension of the tokens a kubelet would project (there is none here,
		// but a TokenRequest that asks for 3607 s must not be handed a year).
		args = append(args,
			"--service-account-max-token-expiration=1h",
			"--service-account-extend-token-expiration=false",
		)
	}
	if c.auditURL != "" {
		webhookURL, err := startAuditRelay(c.auditURL, c.auditToken, c.pki)
		if err != nil {
			return nil, err
		}
		caLine := ""
		if webhookURL != c.auditURL {
			caLine = "\n    certificate-authority: " + c.pki.CAFile
		}
		kc := filepath.Join(c.dataDir, "audit-webhook.kubeconfig")
		if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: audit
  cluster:
    server: %q%s
users:
- name: audit
  user:
    token: %q
contexts:
- name: audit
  context: {cluster: audit, user: audit}
current-context: audit
`, webhookURL, caLine, c.auditToken)), 0o600); err != nil {
			return nil, err
		}
		// Exactly the flags docs/deploying/README.md gives ("The audit webhook").
		args = append(args,
			"--audit-policy-file="+c.auditPolicy,
			"--audit-webhook-config-file="+kc,
			"--audit-webhook-mode=batch",
		)
		if c.profile == profileFast {
			// Deliver quickly: tests wait for their events, so a batch leaves after at most 1s
			// (the API server's default is 30s, and 10s before a failed batch is retried).
			args = append(args,
				"--audit-webhook-batch-max-wait=1s",
				"--audit-webhook-initial-backoff=1s",
			)
		}
	}
	return args, nil
}

// newAPIServerOptions parses args into kube-apiserver's ServerRunOptions. The component globals
// registry (feature gates, emulation version) is shared with the controller manager, so its Set
// is done by the caller once every component's flags are parsed.
func newAPIServerOptions(args []string) (*options.ServerRunOptions, error) {
	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(args); err != nil {
		return nil, fmt.Errorf("kube-apiserver flags: %w", err)
	}
	return s, nil
}

// runAPIServer completes, validates and runs the server; it returns when ctx is done.
func runAPIServer(ctx context.Context, s *options.ServerRunOptions) error {
	// The apiserver's own loopback clients should not log self-issued deprecation warnings.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})
	completed, err := s.Complete(ctx)
	if err != nil {
		return fmt.Errorf("kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	return app.Run(ctx, completed)
}
