// Command devcluster runs holdfast against the local kwok test bed: `run` in the
// foreground, `demo` in the background followed by a short tour of what it guards.
// It is what `make run` and `make demo` call. It prints its steps, its report and
// holdfast's own lines; everything else (the test bed scripts and kwokctl, the build, the
// Kubernetes clients' logs) goes to the log file it names.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

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
	side, err := openSideLog(ctx)
	if err == nil {
		defer side.Close()
		logTo(side)
		if os.Args[1] == "run" {
			err = run(ctx, side)
		} else {
			err = demo(ctx, side)
		}
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "devcluster:", err)
		if side != nil {
			fmt.Fprintf(os.Stderr, "devcluster: the test bed's, the build's and the clients' output is in %s\n", side.Name())
		}
		os.Exit(1)
	}
}

// openSideLog creates (afresh) the log file for what is not the report: devcluster.log
// in the test bed's cache.
func openSideLog(ctx context.Context) (*os.File, error) {
	cache, err := testbedEnv(ctx, "HOLDFAST_CACHE")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	return os.Create(filepath.Join(cache, "devcluster.log"))
}

// logTo sends controller-runtime's log and klog (client-go's, where client-side
// throttling is reported) to w. Setting controller-runtime's logger also keeps it from
// printing its "log.SetLogger(...) was never called" stack trace.
func logTo(w io.Writer) {
	l := crzap.New(crzap.WriteTo(w), crzap.UseDevMode(true))
	ctrllog.SetLogger(l)
	klog.SetLogger(l)
}

// testbedEnv reads a variable hack/testbed-env.sh sets.
func testbedEnv(ctx context.Context, name string) (string, error) {
	out, err := exec.CommandContext(ctx, "bash", "-c", "source hack/testbed-env.sh && echo \"$"+name+"\"").Output()
	if err != nil {
		return "", fmt.Errorf("reading %s from hack/testbed-env.sh: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// env is the local cluster with holdfast's CRDs and webhooks installed.
type env struct {
	cache      string
	kubeconfig string
	kubectl    string
	config     *rest.Config
	client     client.Client
	// side receives the output of the commands the demo runs.
	side *os.File
}

// prepare starts the cluster if needed, builds holdfast, writes certificates and installs
// the CRDs and a webhook configuration that calls holdfast on 127.0.0.1.
func prepare(ctx context.Context, side *os.File) (*env, error) {
	step("Starting the local kwok cluster (the first run builds the control plane from source, ~25 min on 2 cores; progress and kwokctl's output in %s)", side.Name())
	// Eight fake nodes: the agent drain moves four agents onto four spare nodes.
	up := exec.CommandContext(ctx, "bash", "hack/testbed-up.sh", "8")
	up.Stderr = side
	out, err := up.Output()
	if err != nil {
		return nil, fmt.Errorf("hack/testbed-up.sh: %w", err)
	}
	e := &env{kubeconfig: strings.TrimSpace(string(out)), side: side}
	e.cache = filepath.Dir(e.kubeconfig)
	binDir, err := testbedEnv(ctx, "TESTBED_BIN")
	if err != nil {
		return nil, err
	}
	e.kubectl = filepath.Join(binDir, "kubectl")

	step("Building holdfast")
	build := exec.CommandContext(ctx, "make", "--no-print-directory", "build")
	build.Stdout, build.Stderr = side, side
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("make build: %w", err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", e.kubeconfig)
	if err != nil {
		return nil, err
	}
	// The scenarios poll pods and drain nodes in parallel: client-go's default of 5
	// requests/s would throttle them.
	cfg.QPS, cfg.Burst = 200, 400
	e.config = cfg
	if e.client, err = client.New(cfg, client.Options{Scheme: harness.NewScheme()}); err != nil {
		return nil, err
	}
	step("Installing the CRDs")
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{"config/crd/bases"}, ErrorIfPathMissing: true}); err != nil {
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
// The certificates are the harness's, in the test bed's cache, not envtest's: the demo's
// holdfast runs on after devcluster exits, so each run would leave envtest's temporary
// directory behind.
func (e *env) installWebhooks() error {
	ca, err := harness.NewCA()
	if err != nil {
		return err
	}
	if err := ca.WriteServing(proc.CertDir); err != nil {
		return err
	}
	step("Installing the webhook configuration (https://127.0.0.1:%d, failurePolicy Ignore)", proc.WebhookPort)
	webhooks, err := harness.Webhooks(harness.WebhookOptions{
		Manifest:      "config/webhook/manifests.yaml",
		Port:          proc.WebhookPort,
		CA:            ca.PEM,
		Namespace:     namespace,
		FailurePolicy: admissionregistrationv1.Ignore,
	})
	if err != nil {
		return err
	}
	return webhooks.Install(e.config)
}

func run(ctx context.Context, side *os.File) error {
	e, err := prepare(ctx, side)
	if err != nil {
		return err
	}
	stopBackground(e.cache)
	if err := e.installWebhooks(); err != nil {
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

// runScript runs a hack/ script with its output (and kwokctl's) in the side log.
func (e *env) runScript(ctx context.Context, script string) error {
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Stdout, cmd.Stderr = e.side, e.side
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", script, err)
	}
	return nil
}
