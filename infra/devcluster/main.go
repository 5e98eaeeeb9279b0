// Command devcluster starts a real Kubernetes control plane in one process: embedded etcd,
// kube-apiserver (RBAC, CRDs, CEL, server-side apply, TokenRequest, optional audit webhook), the
// kube-controller-manager controllers the operators' objects depend on (namespace, garbage
// collector, workloads, EndpointSlices, quota, volume binding; see controllers.go), a default
// StorageClass with a minimal provisioner, the Gateway API CRDs with a status-only gateway
// controller, and a simulated node whose Pods run on loopback addresses (Pods of kubefn's proxy
// image with a real forward proxy).
// It also embeds kubectl of the same version: `devcluster kubectl ...`.
//
// When ready it prints one line to stdout:
//
//	devcluster ready {"kubeconfig":"...","server":"https://127.0.0.1:N","httpProxy":"http://127.0.0.1:M","version":"v1.37.2","dataDir":"..."}
//
// and writes the same JSON to <data-dir>/ready.json. SIGINT/SIGTERM stop it (exit 0).
package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/util/compatibility"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/version"
	"k8s.io/klog/v2"
)

type readyInfo struct {
	Kubeconfig string `json:"kubeconfig"`
	Server     string `json:"server"`
	HTTPProxy  string `json:"httpProxy"`
	Version    string `json:"version"`
	DataDir    string `json:"dataDir"`
	Profile    string `json:"profile"`
}

// kubeVersion is the Kubernetes version this binary was built from. The build script stamps it
// into k8s.io/component-base/version with -ldflags; a plain `go build` falls back to the
// k8s.io/kubernetes module version from the build info.
func kubeVersion() string {
	v := version.Get().GitVersion
	if !strings.HasPrefix(v, "v0.0.0") {
		return v
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "k8s.io/kubernetes" {
				return d.Version
			}
		}
	}
	return v
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "kubectl" {
		runKubectl(os.Args[2:])
		return
	}
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "devcluster: %v\n", err)
		os.Exit(1)
	}
}

func defaultAuditPolicy() string {
	candidates := []string{}
	if exe, err := os.Executable(); err == nil {
		if exe, err = filepath.EvalSymlinks(exe); err == nil {
			// infra/devcluster/bin/devcluster -> infra/audit/policy.yaml
			candidates = append(candidates, filepath.Join(filepath.Dir(exe), "..", "..", "audit", "policy.yaml"))
		}
	}
	candidates = append(candidates, "infra/audit/policy.yaml", "../audit/policy.yaml")
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			abs, _ := filepath.Abs(c)
			return abs
		}
	}
	return ""
}

func run() error {
	fs := pflag.NewFlagSet("devcluster", pflag.ContinueOnError)
	port := fs.Int("port", 0, "API server port on 127.0.0.1 (0 = a free port)")
	proxyPort := fs.Int("http-proxy-port", 0, "plain-HTTP pass-through proxy port on 127.0.0.1 (0 = a free port, -1 = off)")
	dataDirFlag := fs.String("data-dir", "", "data directory (default: a temporary directory removed on exit)")
	kubeconfigOut := fs.String("kubeconfig-out", "", "where to write the admin kubeconfig (default <data-dir>/kubeconfig)")
	auditURL := fs.String("audit-webhook-url", "", "post audit EventList batches to this URL")
	auditToken := fs.String("audit-webhook-token", "", "bearer token for --audit-webhook-url")
	auditPolicy := fs.String("audit-policy", "", "audit policy file (default infra/audit/policy.yaml)")
	exitWithParent := fs.Bool("exit-with-parent", false, "stop (as on SIGTERM) when the parent process dies, e.g. a test runner killed hard")
	proxyImage := fs.String("proxy-image", defaultProxyImage, "Pods running this image repository (any tag) get a real HTTP forward proxy at <podIP>:<port> (\"\" = none)")
	extraArgs := fs.StringArray("apiserver-arg", nil, "one more kube-apiserver flag, as --name=value (repeatable; e.g. --authentication-token-webhook-config-file=..., --authentication-config=...)")
	profileFlag := fs.String("profile", os.Getenv("DEVCLUSTER_PROFILE"), "fast (default) or production: the API server alone over TLS, the documented audit webhook flags, ServiceAccount tokens of at most an hour (default $DEVCLUSTER_PROFILE)")
	verbosity := fs.Int("v", 0, "klog verbosity of the control plane's log (<data-dir>/devcluster.log)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return err
	}
	prof, err := parseProfile(*profileFlag)
	if err != nil {
		return err
	}
	if prof == profileProduction {
		if fs.Changed("http-proxy-port") && *proxyPort >= 0 {
			return fmt.Errorf("--profile production has nothing in front of the API server: --http-proxy-port must be -1")
		}
		*proxyPort = -1
	}
	start := time.Now()
	if *exitWithParent {
		ppid := os.Getppid()
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0); err != nil {
			return fmt.Errorf("--exit-with-parent: %w", err)
		}
		if os.Getppid() != ppid { // the parent died before prctl
			return fmt.Errorf("--exit-with-parent: parent already gone")
		}
	}

	// Data directory.
	dataDir := *dataDirFlag
	removeDataDir := false
	if dataDir == "" {
		d, err := os.MkdirTemp("", "devcluster-")
		if err != nil {
			return err
		}
		dataDir, removeDataDir = d, true
	} else if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	dataDir, _ = filepath.Abs(dataDir)
	cleanup := func() {
		if removeDataDir {
			_ = os.RemoveAll(dataDir)
		}
	}
	defer cleanup()
	if *kubeconfigOut == "" {
		*kubeconfigOut = filepath.Join(dataDir, "kubeconfig")
	}
	*kubeconfigOut, _ = filepath.Abs(*kubeconfigOut)

	// The control plane logs through klog: to a file, so stdout carries only the ready line.
	logFile := filepath.Join(dataDir, "devcluster.log")
	kfs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(kfs)
	_ = kfs.Set("logtostderr", "false")
	_ = kfs.Set("alsologtostderr", "false")
	_ = kfs.Set("log_file", logFile)
	_ = kfs.Set("one_output", "true")
	_ = kfs.Set("stderrthreshold", "FATAL")
	_ = kfs.Set("v", fmt.Sprint(*verbosity))
	defer klog.Flush()
	failf := func(format string, args ...any) error {
		klog.Flush()
		return fmt.Errorf(format+" (log: %s)%s", append(args, logFile, logTail(logFile, 30))...)
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if strings.HasPrefix(version.Get().GitVersion, "v0.0.0") {
		fmt.Fprintln(os.Stderr, "devcluster: warning: built without version stamping (use scripts/build-devcluster.sh); the API server reports "+version.Get().GitVersion)
	}

	// Credentials.
	p, err := generatePKI(filepath.Join(dataDir, "pki"))
	if err != nil {
		return err
	}
	adminToken, kcmToken, nodeToken := randomToken(), randomToken(), randomToken()
	tokenFile := filepath.Join(dataDir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(strings.Join([]string{
		adminToken + ",admin,admin,system:masters",
		kcmToken + ",system:kube-controller-manager,kube-controller-manager,system:masters",
		nodeToken + ",system:node:" + nodeName + ",node-" + nodeName + ",\"system:nodes,system:masters\"",
	}, "\n")+"\n"), 0o600); err != nil {
		return err
	}

	if *port == 0 {
		if *port, err = freePort(); err != nil {
			return err
		}
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", *port)
	if err := writeKubeconfig(*kubeconfigOut, server, p.CAPEM, "admin", adminToken); err != nil {
		return err
	}
	kcmKubeconfig := filepath.Join(dataDir, "controller-manager.kubeconfig")
	if err := writeKubeconfig(kcmKubeconfig, server, p.CAPEM, "system:kube-controller-manager", kcmToken); err != nil {
		return err
	}
	nodeKubeconfig := filepath.Join(dataDir, "devnode.kubeconfig")
	if err := writeKubeconfig(nodeKubeconfig, server, p.CAPEM, "system:node:"+nodeName, nodeToken); err != nil {
		return err
	}

	etcd, etcdURL, err := startEtcd(dataDir)
	if err != nil {
		return failf("%v", err)
	}
	defer etcd.Close()

	if *auditURL != "" && *auditPolicy == "" {
		if *auditPolicy = defaultAuditPolicy(); *auditPolicy == "" {
			return fmt.Errorf("--audit-webhook-url given but no --audit-policy and infra/audit/policy.yaml not found")
		}
	}
	args, err := apiserverArgs(apiserverConfig{dataDir: dataDir, port: *port, etcdURL: etcdURL, pki: p,
		tokenFile: tokenFile, auditURL: *auditURL, auditToken: *auditToken, auditPolicy: *auditPolicy, profile: prof})
	if err != nil {
		return err
	}
	// Later flags win: a test's own authenticators and settings come after the defaults.
	args = append(args, *extraArgs...)
	apiOpts, err := newAPIServerOptions(args)
	if err != nil {
		return err
	}
	kcmOpts, err := newControllerManagerOptions(kcmKubeconfig, p.CAFile, p.SAKeyFile)
	if err != nil {
		return err
	}
	// Both components share the process-wide feature gates / emulation version registry.
	if err := compatibility.DefaultComponentGlobalsRegistry.Set(); err != nil {
		return err
	}

	apiCtx, apiCancel := context.WithCancel(context.Background())
	defer apiCancel()
	apiErr := make(chan error, 1)
	go func() { apiErr <- runAPIServer(apiCtx, apiOpts) }()

	adminCfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfigOut)
	if err != nil {
		return err
	}
	adminCfg.QPS, adminCfg.Burst = 100, 200
	admin, err := kubernetes.NewForConfig(adminCfg)
	if err != nil {
		return err
	}
	if err := waitFor(ctx, apiErr, 90*time.Second, func() bool {
		body, err := admin.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	}); err != nil {
		return failf("kube-apiserver not ready: %v", err)
	}
	klog.InfoS("kube-apiserver ready", "after", time.Since(start))

	ctrlCtx, ctrlCancel := context.WithCancel(context.Background())
	defer ctrlCancel()
	kcmErr := make(chan error, 1)
	go func() { kcmErr <- runControllerManager(ctrlCtx, kcmOpts) }()
	kcmCfg, err := clientcmd.BuildConfigFromFlags("", kcmKubeconfig)
	if err != nil {
		return err
	}
	kcmCfg.QPS, kcmCfg.Burst = 200, 400
	// Storage and the Gateway API, installed while the controller manager starts.
	kcmClient, err := kubernetes.NewForConfig(kcmCfg)
	if err != nil {
		return err
	}
	kcmDynamic, err := dynamic.NewForConfig(kcmCfg)
	if err != nil {
		return err
	}
	installed := make(chan error, 1)
	go func() {
		if err := ensureStorageClass(ctx, kcmClient); err != nil {
			installed <- fmt.Errorf("storage class: %w", err)
			return
		}
		go runProvisioner(ctrlCtx, kcmClient, filepath.Join(dataDir, "volumes"))
		more, err := installGatewayAPI(ctx, kcmCfg, kcmDynamic)
		if err != nil {
			installed <- err
			return
		}
		klog.InfoS("gateway API installed", "after", time.Since(start))
		go runGatewayController(ctrlCtx, kcmClient, kcmDynamic)
		installed <- nil
		if err := installGatewayCRDs(ctrlCtx, kcmCfg, more); err != nil && ctrlCtx.Err() == nil {
			klog.ErrorS(err, "gateway API: the release's other CRDs")
		} else {
			klog.InfoS("gateway API: the release's other CRDs installed", "count", len(more), "after", time.Since(start))
		}
	}()
	go func() {
		if err := runGarbageCollector(ctrlCtx, kcmCfg, 5); err != nil {
			kcmErr <- fmt.Errorf("garbage collector: %w", err)
		}
	}()

	nodeCfg, err := clientcmd.BuildConfigFromFlags("", nodeKubeconfig)
	if err != nil {
		return err
	}
	nodeCfg.QPS, nodeCfg.Burst = 200, 400
	nodeClient, err := kubernetes.NewForConfig(nodeCfg)
	if err != nil {
		return err
	}
	node := newSimNode(nodeClient, newPodProxies(*proxyImage))
	if err := node.register(ctx); err != nil {
		return failf("%v", err)
	}
	node.heartbeat(ctrlCtx)
	go node.run(ctrlCtx)

	proxyURL := ""
	if *proxyPort >= 0 {
		srv, u, err := startHTTPProxy(*proxyPort, server, p.CAPEM)
		if err != nil {
			return err
		}
		defer srv.Close()
		proxyURL = u
	}

	anyErr := make(chan error, 1)
	go func() {
		select {
		case err := <-apiErr:
			anyErr <- fmt.Errorf("kube-apiserver exited: %v", err)
		case err := <-kcmErr:
			anyErr <- fmt.Errorf("kube-controller-manager exited: %v", err)
		case <-ctrlCtx.Done():
		}
	}()
	if err := waitFor(ctx, anyErr, 90*time.Second, func() bool {
		if _, err := admin.CoreV1().Namespaces().Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return false
		}
		if _, err := admin.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{}); err != nil {
			return false
		}
		// The serviceaccount controller has run: the controller manager is up.
		_, err := admin.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}); err != nil {
		return failf("control plane not ready: %v", err)
	}
	klog.InfoS("control plane ready", "after", time.Since(start))
	select {
	case err := <-installed:
		if err != nil {
			return failf("%v", err)
		}
	case err := <-anyErr:
		return failf("%v", err)
	case <-ctx.Done():
		return fmt.Errorf("interrupted")
	}
	sv, err := admin.Discovery().ServerVersion()
	if err != nil {
		return failf("server version: %v", err)
	}

	info := readyInfo{Kubeconfig: *kubeconfigOut, Server: server, HTTPProxy: proxyURL, Version: sv.GitVersion, DataDir: dataDir, Profile: string(prof)}
	line, _ := json.Marshal(info)
	if err := os.WriteFile(filepath.Join(dataDir, "ready.json"), append(line, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Printf("devcluster ready %s\n", line)
	klog.InfoS("devcluster ready", "after", time.Since(start))

	var runErr error
	select {
	case <-ctx.Done():
	case runErr = <-anyErr:
	}
	// Shut down: controllers and node first, then the API server (bounded), then etcd.
	stop()
	ctrlCancel()
	apiCancel()
	select {
	case <-apiErr:
	case <-time.After(20 * time.Second):
		klog.Warning("kube-apiserver did not stop within 20s")
	}
	if runErr != nil {
		return failf("%v", runErr)
	}
	return nil
}

// waitFor polls cond every 100ms until it holds, the deadline passes, ctx ends or errc fires.
func waitFor(ctx context.Context, errc <-chan error, timeout time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return nil
		}
		select {
		case err := <-errc:
			return fmt.Errorf("exited during start-up: %v", err)
		case <-ctx.Done():
			return fmt.Errorf("interrupted")
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
	}
}

func writeKubeconfig(path, server string, caPEM []byte, user, token string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: devcluster
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    token: %s
contexts:
- name: devcluster
  context:
    cluster: devcluster
    user: %s
    namespace: default
current-context: devcluster
`, server, base64.StdEncoding.EncodeToString(caPEM), user, token, user)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(kc), 0o600)
}

func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1024*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return ""
	}
	return "\nlast log lines:\n" + strings.Join(lines, "\n")
}
