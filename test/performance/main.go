// Command bench is holdfast's load harness. It runs one holdfast replica (the built
// binary) against a real kube-apiserver and etcd (envtest with the test bed's binaries)
// and measures what the Go benchmarks cannot:
//
//   - serve: reviews/s and latency over TLS 1.3 with keep-alive, straight at the replica;
//   - apiserver: Deployment updates through the API server with no admission check, with
//     a ValidatingAdmissionPolicy, and with holdfast, enforcing the same rule, interleaved;
//   - fleet: the fleet ledger under a burst: 500 selected Deployments change their template
//     at once under maxInFlight 10%;
//   - memory: the scale curve: informer sync, peak and settled resident memory, live heap,
//     the collector's CPU share and review p99 at 25,000 pods 0 %, 10 % and 50 % guarded and
//     at 1,000, 10,000 and 50,000 pods 10 % guarded (100,000 pods 5 % guarded with
//     -scale-100k), and the heap each guarded and each unguarded pod costs.
//
// Each figure is printed as one line: BENCH <name> <value> <unit>.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/holdfast-dev/holdfast/test/harness"
)

const holdfastNamespace = "holdfast-system"

func main() {
	var o options
	flag.StringVar(&o.binary, "holdfast", "bin/holdfast", "the holdfast binary to measure")
	flag.StringVar(&o.only, "only", "serve,apiserver,memory,fleet", "which measurements to run, in order, comma-separated (journal, 6 minutes, runs only when named)")
	flag.IntVar(&o.journals, "journals", 5000, "guarded Deployments the journal measurement records, then changes at once")
	flag.IntVar(&o.fleet, "fleet", 500, "selected Deployments changing their template at once in the fleet burst")
	flag.DurationVar(&o.window, "window", 20*time.Second, "how long each serving phase lasts")
	flag.IntVar(&o.workers, "workers", 4, "concurrent connections of the unpaced serving phase")
	flag.IntVar(&o.rate, "rate", 200, "reviews/s of the paced serving phase")
	flag.IntVar(&o.updates, "updates", 2000, "Deployment updates per admission mode")
	flag.IntVar(&o.rounds, "rounds", 5, "rounds the updates are split into: the API server comparison's ratios are the median and range of the rounds'")
	flag.StringVar(&o.points, "points", "", "the scale curve's points (memory) as pods:workloads:guarded%, comma-separated, in place of the default six")
	flag.BoolVar(&o.scale100k, "scale-100k", false, "extend the scale curve (memory) to 100,000 pods over 20,000 workloads, 5% guarded (raise etcd's quota)")
	noop := flag.Bool("noop-server", false, "serve as the serving phase's control instead of measuring (see noopServer)")
	flag.Parse()
	if *noop {
		if err := serveNoop(); err != nil {
			fmt.Fprintln(os.Stderr, "bench: no-op server:", err)
			os.Exit(1)
		}
		return
	}
	ctrl.SetLogger(zapr.NewLogger(zap.NewNop()))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	binary, only           string
	window                 time.Duration
	workers, rate, updates int
	rounds, fleet          int
	journals               int
	points                 string
	scale100k              bool
}

// bench is a running API server with one holdfast replica.
type bench struct {
	c    client.Client
	cfg  *rest.Config
	proc harness.Process
	cmd  *exec.Cmd
	// webhooks holds holdfast's serving certificate and the webhook configuration that
	// calls it.
	webhooks *envtest.WebhookInstallOptions
	webhook  string // https://127.0.0.1:port
	// pprofPort serves the replica's /debug/pprof.
	pprofPort int
	// relabelRetries counts the memory measurement's relabels holdfast answered "retry".
	relabelRetries atomic.Int64
	// installed is whether the webhook configuration is installed (install).
	installed bool
	// memLimit is the GOMEMLIMIT the replica restarts with; empty for none.
	memLimit string
}

// install installs the webhook configuration once, for the measurements through the API
// server.
func (b *bench) install() error {
	if b.installed {
		return nil
	}
	if err := b.webhooks.Install(b.cfg); err != nil {
		return err
	}
	b.installed = true
	return nil
}

func run(ctx context.Context, o options) error {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return fmt.Errorf("KUBEBUILDER_ASSETS must point at kube-apiserver and etcd: run `make bench`")
	}
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	if o.scale100k {
		// 100,000 pods as a kubelet leaves them outgrow etcd's default 2 GiB quota.
		env.ControlPlane.Etcd = &envtest.Etcd{}
		env.ControlPlane.Etcd.Configure().Set("quota-backend-bytes", strconv.Itoa(8<<30))
	}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("starting the API server: %w", err)
	}
	defer func() { _ = env.Stop() }()
	cfg.QPS, cfg.Burst = 2000, 4000
	b, err := start(ctx, env, cfg, o.binary)
	if err != nil {
		return err
	}
	defer func() { _ = b.webhooks.Cleanup() }()
	defer b.stop()

	for _, m := range strings.Split(o.only, ",") {
		switch m {
		case "serve":
			err = b.serve(ctx, o)
		case "apiserver":
			err = b.compare(ctx, o)
		case "journal":
			err = b.journals(ctx, o)
		case "memory":
			err = b.memory(ctx, o)
		case "fleet":
			err = b.fleet(ctx, o)
		default:
			err = fmt.Errorf("unknown measurement %q", m)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
	}
	return nil
}

// start runs holdfast with envtest's serving certificate; compare registers its webhooks
// by URL.
func start(ctx context.Context, env *envtest.Environment, cfg *rest.Config, binary string) (*bench, error) {
	c, err := client.New(cfg, client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "holdfast-bench-")
	if err != nil {
		return nil, err
	}
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := harness.WriteAdminKubeconfig(env, cfg, "holdfast-bench", "", kubeconfigPath); err != nil {
		return nil, err
	}
	if err := harness.EnsureNamespace(ctx, c, holdfastNamespace); err != nil {
		return nil, err
	}
	ports, err := harness.FreePorts(4)
	if err != nil {
		return nil, err
	}
	// The serving certificate is written now; the apiserver measurement installs the
	// configuration.
	webhooks, err := harness.Webhooks(harness.WebhookOptions{Manifest: "config/webhook/manifests.yaml",
		Port: ports[0], Namespace: holdfastNamespace, FailurePolicy: admissionregistrationv1.Fail})
	if err != nil {
		return nil, err
	}
	p := harness.Process{Binary: binary, Kubeconfig: kubeconfigPath, CertDir: webhooks.LocalServingCertDir, Namespace: holdfastNamespace,
		WebhookPort: ports[0], MetricsPort: ports[1], ProbePort: ports[2], FailurePolicy: admissionregistrationv1.Fail, ExtraArgs: []string{"--log-format=json", "--leader-elect=false", "--pprof-bind-address=127.0.0.1:" + strconv.Itoa(ports[3])}}
	logFile, err := os.Create(filepath.Join(dir, "holdfast.log"))
	if err != nil {
		return nil, err
	}
	p.Stdout, p.Stderr = logFile, logFile
	cmd := p.Command(context.Background())
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &bench{c: c, cfg: cfg, proc: p, cmd: cmd, webhooks: webhooks, webhook: fmt.Sprintf("https://127.0.0.1:%d", p.WebhookPort), pprofPort: ports[3]}
	if err := p.WaitReady(ctx, time.Minute); err != nil {
		b.stop()
		return nil, fmt.Errorf("%w; log: %s", err, logFile.Name())
	}
	fmt.Fprintf(os.Stderr, "bench: holdfast pid %d ready; log %s\n", cmd.Process.Pid, logFile.Name())
	return b, nil
}

// restart replaces the replica with a fresh one, so that a measurement does not inherit
// what earlier ones left in its heap.
func (b *bench) restart(ctx context.Context) error {
	b.stop()
	cmd := b.proc.Command(context.Background())
	if b.memLimit != "" {
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+b.memLimit)
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	b.cmd = cmd
	return b.proc.WaitReady(ctx, time.Minute)
}

func (b *bench) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	_ = b.cmd.Wait()
}

// report prints one figure.
func report(name string, value float64, unit string) {
	fmt.Printf("BENCH %s %s %s\n", name, strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.3f", value), "0"), "."), unit)
}

// percentile of sorted durations, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(float64(len(sorted))*p))
	return float64(sorted[i].Microseconds()) / 1000
}

func sorted(ds []time.Duration) []time.Duration {
	out := slices.Clone(ds)
	slices.Sort(out)
	return out
}

func namespace(ctx context.Context, c client.Client, name string, labels map[string]string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	return c.Create(ctx, ns)
}
