// Command devcluster runs holdfast against the local kwok test bed: `run` in the
// foreground, `demo` in the background followed by a short tour of what it guards.
// It is what `make run` and `make demo` call.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/test/harness"
)

const namespace = "holdfast-system"

// Local ports, away from the usual 8080/9443 that other tools on a laptop take.
var proc = harness.Process{WebhookPort: 19443, MetricsPort: 18080, ProbePort: 18081, Namespace: namespace}

func main() {
	if len(os.Args) != 2 || (os.Args[1] != "run" && os.Args[1] != "demo") {
		fmt.Fprintln(os.Stderr, "usage: devcluster run|demo")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if os.Args[1] == "run" {
		err = run(ctx)
	} else {
		err = demo(ctx)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		os.Exit(1)
	}
}

// env is the local cluster with holdfast's CRDs and webhooks installed.
type env struct {
	cache      string
	kubeconfig string
	kubectl    string
	config     *rest.Config
	client     client.Client
}

// prepare starts the cluster if needed, builds holdfast, writes certificates and installs
// the CRDs and a webhook configuration that calls holdfast on 127.0.0.1.
func prepare(ctx context.Context) (*env, error) {
	step("Starting the local kwok cluster (first run builds the control plane from source: ~25 min on 2 cores)")
	// Eight fake nodes: the agent drain moves four agents onto four spare nodes.
	up := exec.CommandContext(ctx, "bash", "hack/testbed-up.sh", "8")
	up.Stderr = os.Stderr
	out, err := up.Output()
	if err != nil {
		return nil, fmt.Errorf("hack/testbed-up.sh: %w", err)
	}
	e := &env{kubeconfig: strings.TrimSpace(string(out))}
	e.cache = filepath.Dir(e.kubeconfig)
	binDir, err := exec.CommandContext(ctx, "bash", "-c", "source hack/testbed-env.sh && echo $TESTBED_BIN").Output()
	if err != nil {
		return nil, err
	}
	e.kubectl = filepath.Join(strings.TrimSpace(string(binDir)), "kubectl")

	step("Building holdfast")
	build := exec.CommandContext(ctx, "make", "--no-print-directory", "build")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return nil, err
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return nil, err
	}
	e.config = cfg
	if e.client, err = client.New(cfg, client.Options{Scheme: harness.NewScheme()}); err != nil {
		return nil, err
	}
	step("Installing the CRDs")
	if err := harness.InstallCRDs(ctx, e.client, "config/crd/bases"); err != nil {
		return nil, err
	}
	if err := harness.EnsureNamespace(ctx, e.client, namespace); err != nil {
		return nil, err
	}
	proc.Binary, _ = filepath.Abs("bin/holdfast")
	proc.Kubeconfig = e.kubeconfig
	proc.CertDir = filepath.Join(e.cache, "local-certs")
	return e, nil
}

// installWebhooks writes fresh certificates and points the API server at holdfast.
// failurePolicy stays Ignore, as in production: when holdfast is stopped, the cluster works on.
func (e *env) installWebhooks(ctx context.Context) error {
	caPEM, err := harness.WriteCerts(proc.CertDir)
	if err != nil {
		return err
	}
	step("Installing the webhook configuration (https://127.0.0.1:%d, failurePolicy Ignore)", proc.WebhookPort)
	return harness.InstallWebhooks(ctx, e.client, harness.WebhookOptions{
		Manifest:      "config/webhook/manifests.yaml",
		BaseURL:       fmt.Sprintf("https://127.0.0.1:%d", proc.WebhookPort),
		CABundle:      caPEM,
		Namespace:     namespace,
		FailurePolicy: admissionregistrationv1.Ignore,
	})
}

func run(ctx context.Context) error {
	e, err := prepare(ctx)
	if err != nil {
		return err
	}
	stopBackground(e.cache)
	if err := e.installWebhooks(ctx); err != nil {
		return err
	}
	step("Running holdfast in the foreground (Ctrl-C stops it)")
	proc.ExtraArgs = []string{"--log-format=console"}
	proc.Stdout, proc.Stderr = os.Stdout, os.Stderr
	cmd := proc.Command(ctx)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	return cmd.Run()
}

// startBackground starts holdfast detached from this process, logging to a file, so
// that it keeps guarding the cluster after the demo returns.
func (e *env) startBackground(ctx context.Context) (logPath string, err error) {
	stopBackground(e.cache)
	logPath = filepath.Join(e.cache, "holdfast.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return "", err
	}
	defer logFile.Close()
	proc.ExtraArgs = []string{"--log-format=console"}
	proc.Stdout, proc.Stderr = logFile, logFile
	cmd := proc.Command(context.Background())
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	if err := os.WriteFile(pidFile(e.cache), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return "", err
	}
	_ = cmd.Process.Release()
	if err := proc.WaitReady(ctx, time.Minute); err != nil {
		return "", fmt.Errorf("%w; see %s", err, logPath)
	}
	return logPath, nil
}

func pidFile(cache string) string { return filepath.Join(cache, "holdfast.pid") }

// stopBackground stops a holdfast left running by an earlier demo.
func stopBackground(cache string) {
	raw, err := os.ReadFile(pidFile(cache))
	if err != nil {
		return
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(raw))); err == nil {
		if p, err := os.FindProcess(pid); err == nil && p.Signal(syscall.SIGTERM) == nil {
			for i := 0; i < 50 && p.Signal(syscall.Signal(0)) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	_ = os.Remove(pidFile(cache))
}

func step(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "==> "+format+"\n", args...)
}

func runScript(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}
