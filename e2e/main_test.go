//go:build e2e

// Package e2e runs holdfast against a kwok cluster built from source: a real
// kube-apiserver, etcd, kube-controller-manager and kube-scheduler, fake nodes, and pods
// with realistic timing. holdfast runs as a local process; the API server reaches its
// webhooks by URL.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support/kwok"

	"github.com/holdfast-dev/holdfast/test/harness"
)

const (
	holdfastNamespace = "holdfast-system"
	nodeCount         = 8
)

// replicas is how many holdfast processes run, behind a balancer standing in for a Service.
const replicas = 2

var (
	testenv     env.Environment
	clusterName = envconf.RandomName("holdfast-e2e", 20)
	holdfast    []*exec.Cmd
	holdfastLog string
	lb          *harness.Balancer
	// webhooks installed holdfast's webhook configuration and wrote its serving certificate.
	webhooks *envtest.WebhookInstallOptions
)

func TestMain(m *testing.M) {
	bin, config := os.Getenv("TESTBED_BIN"), os.Getenv("KWOKCTL_CONFIG")
	if bin == "" || config == "" {
		fmt.Fprintln(os.Stderr, "TESTBED_BIN and KWOKCTL_CONFIG must be set: run `make test-e2e`")
		os.Exit(1)
	}
	// envtest's installers log through controller-runtime, which prints a stack trace
	// instead when no logger is set.
	ctrl.SetLogger(zapr.NewLogger(zap.NewNop()))
	// kwokctl runs kubectl from PATH; use the one built with the test bed.
	os.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))

	testenv = env.New()
	testenv.Setup(
		envfuncs.CreateClusterWithConfig(kwok.NewProvider(), clusterName, config,
			kwok.WithPath(filepath.Join(bin, "kwokctl")), kwok.WithWaitDuration(2*time.Minute)),
		addNodes(filepath.Join(bin, "kwokctl"), nodeCount),
		startHoldfast,
	)
	testenv.Finish(
		stopHoldfast,
		envfuncs.DestroyCluster(clusterName),
	)
	os.Exit(testenv.Run(m))
}

// addNodes adds fake nodes through kwokctl, with kwok's usual node template.
func addNodes(kwokctl string, n int) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		out, err := exec.CommandContext(ctx, kwokctl, "scale", "node", "--name", clusterName,
			"--replicas", fmt.Sprint(n)).CombinedOutput()
		if err != nil {
			return ctx, fmt.Errorf("kwokctl scale node: %v: %s", err, out)
		}
		return ctx, nil
	}
}

// startHoldfast builds holdfast, installs its CRDs and webhooks (failurePolicy Fail,
// so a webhook that does not answer fails the tests) and runs it as a local process.
func startHoldfast(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	dir, err := os.MkdirTemp("", "holdfast-e2e-")
	if err != nil {
		return ctx, err
	}
	binary := filepath.Join(dir, "holdfast")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", binary, "../cmd/holdfast").CombinedOutput(); err != nil {
		return ctx, fmt.Errorf("building holdfast: %v: %s", err, out)
	}
	restConfig := cfg.Client().RESTConfig()
	if _, err := envtest.InstallCRDs(restConfig, envtest.CRDInstallOptions{
		Paths: []string{"../config/crd/bases"}, ErrorIfPathMissing: true}); err != nil {
		return ctx, err
	}
	c, err := client.New(restConfig, client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		return ctx, err
	}
	if err := harness.EnsureNamespace(ctx, c, holdfastNamespace); err != nil {
		return ctx, err
	}
	// Three ports per replica, and the balancer's, which the webhooks call.
	ports, err := harness.FreePorts(3*replicas + 1)
	if err != nil {
		return ctx, err
	}
	if webhooks, err = harness.Webhooks(harness.WebhookOptions{
		Manifest:      "../config/webhook/manifests.yaml",
		Port:          ports[3*replicas],
		Namespace:     holdfastNamespace,
		FailurePolicy: admissionregistrationv1.Fail,
	}); err != nil {
		return ctx, err
	}
	certDir := webhooks.LocalServingCertDir
	holdfastLog = filepath.Join(dir, "holdfast-*.log")
	var procs []harness.Process
	for i := range replicas {
		p := harness.Process{
			Binary: binary, Kubeconfig: cfg.KubeconfigFile(), CertDir: certDir, Namespace: holdfastNamespace,
			WebhookPort: ports[3*i], MetricsPort: ports[3*i+1], ProbePort: ports[3*i+2],
			FailurePolicy: admissionregistrationv1.Fail,
			// The balancer here never needs to see a replica go unready before it stops.
			ExtraArgs: []string{"--log-format=console", "--shutdown-delay=0s"},
		}
		logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("holdfast-%d.log", i)))
		if err != nil {
			return ctx, err
		}
		p.Stdout, p.Stderr = logFile, logFile
		cmd := p.Command(context.Background())
		if err := cmd.Start(); err != nil {
			return ctx, fmt.Errorf("starting holdfast: %w", err)
		}
		holdfast = append(holdfast, cmd)
		if err := p.WaitReady(ctx, time.Minute); err != nil {
			return ctx, fmt.Errorf("%w (log: %s)", err, holdfastLog)
		}
		procs = append(procs, p)
	}
	if lb, err = harness.StartBalancer(webhooks.LocalServingPort, certDir, webhooks.LocalServingCAData, procs); err != nil {
		return ctx, err
	}
	return ctx, webhooks.Install(restConfig)
}

func stopHoldfast(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	defer func() { holdfast, lb, webhooks = nil, nil, nil }()
	for _, cmd := range holdfast {
		if cmd.Process != nil {
			_ = cmd.Process.Signal(os.Interrupt)
			_ = cmd.Wait()
		}
	}
	if lb != nil {
		_ = lb.Close()
	}
	if webhooks != nil {
		_ = webhooks.Cleanup()
	}
	return ctx, nil
}

// newClient is a controller-runtime client of the kwok cluster with holdfast's kinds.
func newClient(t *testing.T, cfg *envconf.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg.Client().RESTConfig(), client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
