// Command faults is holdfast's fault-injection harness (make test-faults): two holdfast
// replicas (the built binary) behind a balancer that drops unready endpoints as a Service
// does, called by a real kube-apiserver (envtest, failurePolicy Fail) under a steady load
// of Deployment updates, while replicas restart or die, the leader fails over, the serving
// certificate and its CA rotate, holdfast loses the API server, and the webhooks go down;
// then a drain storm on a kwok cluster (failurePolicy Ignore), where the controller-manager,
// the scheduler and kwok replace the evicted pods.
// It prints one RELIABILITY line per fault and exits non-zero when a promise is broken.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/holdfast-dev/holdfast/test/harness"
)

const holdfastNamespace = "holdfast-system"

type options struct {
	binary       string
	rate         int
	rotation     time.Duration
	lease        time.Duration
	outage       time.Duration
	only         string
	settle       time.Duration
	restartEvery time.Duration
	storm        time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.binary, "holdfast", "bin/holdfast", "the holdfast binary")
	flag.IntVar(&o.rate, "rate", 200, "admission requests per second through the API server")
	flag.DurationVar(&o.rotation, "rotation", 60*time.Second, "how often the serving certificate rotates")
	flag.DurationVar(&o.lease, "lease", 4*time.Second, "the replicas' leader-election lease duration")
	flag.DurationVar(&o.outage, "outage", 10*time.Second, "how long holdfast loses the API server")
	flag.DurationVar(&o.settle, "settle", 3*time.Second, "load before and after each fault")
	flag.DurationVar(&o.storm, "storm", 75*time.Second, "how long the drain storm's evicters drain nodes")
	flag.StringVar(&o.only, "only", "restart,kill,failover,rotation,apiserver,down,drain-storm",
		"faults to inject, in order: those on the envtest API server first, then those on a kwok cluster of their own")
	flag.Parse()
	ctrl.SetLogger(zapr.NewLogger(zap.NewNop()))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	broken, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	if broken > 0 {
		fmt.Fprintf(os.Stderr, "faults: %d promises broken\n", broken)
		os.Exit(1)
	}
}

// rig is the API server, the replicas, the balancer and the load.
type rig struct {
	o       options
	c       client.Client
	env     *envtest.Environment
	dir     string
	certDir string
	ca      *harness.CA
	procs   []harness.Process
	cmds    []*exec.Cmd
	lb      *harness.Balancer
	link    *link
	load    *load
	broken  int
	// timeline notes when replicas were signalled, started and found ready, for the
	// report of a broken promise.
	mu       sync.Mutex
	timeline []event
}

type event struct {
	at   time.Time
	what string
}

func (h *rig) note(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.timeline = append(h.timeline, event{time.Now(), fmt.Sprintf(format, args...)})
}

func run(ctx context.Context, o options) (int, error) {
	var onRig, onKwok []string
	for _, f := range strings.Split(o.only, ",") {
		switch {
		case faults[f] != nil:
			onRig = append(onRig, f)
		case kwokFaults[f] != nil:
			onKwok = append(onKwok, f)
		default:
			return 0, fmt.Errorf("unknown fault %q", f)
		}
	}
	broken := 0
	if len(onRig) > 0 {
		n, err := runRig(ctx, o, onRig)
		broken += n
		if err != nil {
			return broken, err
		}
	}
	for _, f := range onKwok {
		n, err := kwokFaults[f](ctx, o)
		broken += n
		if err != nil {
			return broken, fmt.Errorf("%s: %w", f, err)
		}
	}
	return broken, nil
}

// runRig starts the envtest API server, the replicas, the balancer and the load, and
// injects the faults in turn.
func runRig(ctx context.Context, o options, only []string) (int, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return 0, fmt.Errorf("KUBEBUILDER_ASSETS must point at kube-apiserver and etcd: run `make test-faults`")
	}
	h := &rig{o: o}
	h.env = &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := h.env.Start()
	if err != nil {
		return 0, fmt.Errorf("starting the API server: %w", err)
	}
	defer func() { _ = h.env.Stop() }()
	cfg.QPS, cfg.Burst = 1000, 2000
	if err := h.start(ctx, cfg); err != nil {
		return 0, err
	}
	defer h.stopAll()

	for _, f := range only {
		if err := faults[f](h, ctx); err != nil {
			return h.broken, fmt.Errorf("%s: %w", f, err)
		}
	}
	return h.broken, nil
}

// faults run on the envtest rig, under its load.
var faults = map[string]func(*rig, context.Context) error{
	"restart":   (*rig).rollingRestart,
	"kill":      (*rig).kill,
	"failover":  (*rig).failover,
	"rotation":  (*rig).rotation,
	"apiserver": (*rig).apiserverOutage,
	"down":      (*rig).webhooksDown,
}

// kwokFaults need a controller-manager, a scheduler and nodes: each starts a kwok cluster
// of its own, after the envtest rig has stopped. They return how many promises broke.
var kwokFaults = map[string]func(context.Context, options) (int, error){
	"drain-storm": drainStorm,
}

func (h *rig) start(ctx context.Context, cfg *rest.Config) error {
	var err error
	if h.c, err = client.New(cfg, client.Options{Scheme: harness.NewScheme()}); err != nil {
		return err
	}
	if h.dir, err = os.MkdirTemp("", "holdfast-faults-"); err != nil {
		return err
	}
	h.certDir = filepath.Join(h.dir, "certs")
	if h.ca, err = harness.NewCA(); err != nil {
		return err
	}
	if err := h.ca.WriteServing(h.certDir); err != nil {
		return err
	}
	// holdfast reaches the API server through a link the apiserver fault cuts.
	if h.link, err = newLink(cfg.Host); err != nil {
		return err
	}
	kubeconfig := filepath.Join(h.dir, "kubeconfig")
	if err := harness.WriteAdminKubeconfig(h.env, cfg, "holdfast", "https://"+h.link.addr, kubeconfig); err != nil {
		return err
	}
	if err := harness.EnsureNamespace(ctx, h.c, holdfastNamespace); err != nil {
		return err
	}
	// Three ports per replica, and the balancer's, which the webhooks call.
	ports, err := harness.FreePorts(7)
	if err != nil {
		return err
	}
	// The rotation fault issues serving certificates from h.ca; envtest keeps its own CA's
	// key to itself, so here it only installs the configuration.
	webhooks, err := harness.Webhooks(harness.WebhookOptions{Manifest: "config/webhook/manifests.yaml",
		Port: ports[6], CA: h.ca.PEM, Namespace: holdfastNamespace, FailurePolicy: admissionregistrationv1.Fail})
	if err != nil {
		return err
	}
	for i := range 2 {
		p := harness.Process{Binary: h.o.binary, Kubeconfig: kubeconfig, CertDir: h.certDir, Namespace: holdfastNamespace,
			WebhookPort: ports[3*i], MetricsPort: ports[3*i+1], ProbePort: ports[3*i+2],
			FailurePolicy: admissionregistrationv1.Fail,
			ExtraArgs: []string{"--log-format=console",
				"--leader-elect-lease-duration=" + h.o.lease.String(),
				"--leader-elect-renew-deadline=" + (h.o.lease * 3 / 4).String(),
				"--leader-elect-retry-period=500ms",
				// Longer than the balancer's readiness period, as a preStop delay is longer
				// than endpoint propagation.
				"--shutdown-delay=1s", "--graceful-shutdown-timeout=10s"}}
		h.procs = append(h.procs, p)
		h.cmds = append(h.cmds, nil)
		if err := h.startReplica(ctx, i); err != nil {
			return err
		}
	}
	if h.lb, err = harness.StartBalancer(webhooks.LocalServingPort, h.certDir, h.ca.PEM, h.procs); err != nil {
		return err
	}
	if err := webhooks.Install(cfg); err != nil {
		return err
	}
	h.load, err = newLoad(ctx, h.c, h.o.rate)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "faults: 2 replicas ready behind %s; logs in %s\n", h.lb.Addr, h.dir)
	return nil
}

func (h *rig) startReplica(ctx context.Context, i int) error {
	p := h.procs[i]
	logFile, err := os.OpenFile(filepath.Join(h.dir, fmt.Sprintf("holdfast-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	p.Stdout, p.Stderr = logFile, logFile
	cmd := p.Command(context.Background())
	h.note("replica %d starting", i)
	if err := cmd.Start(); err != nil {
		return err
	}
	h.cmds[i] = cmd
	if err := p.WaitReady(ctx, time.Minute); err != nil {
		return err
	}
	h.note("replica %d ready on its own probe", i)
	return nil
}

// stopReplica signals replica i and waits for it to exit.
func (h *rig) stopReplica(i int, sig syscall.Signal) {
	if cmd := h.cmds[i]; cmd != nil && cmd.Process != nil {
		h.note("replica %d %s", i, sig)
		_ = cmd.Process.Signal(sig)
		_ = cmd.Wait()
		h.note("replica %d exited", i)
		h.cmds[i] = nil
	}
}

func (h *rig) stopAll() {
	if h.load != nil {
		h.load.stop()
	}
	for i := range h.cmds {
		h.stopReplica(i, syscall.SIGKILL)
	}
	if h.lb != nil {
		_ = h.lb.Close()
	}
	if h.link != nil {
		h.link.close()
	}
}

// promise records whether a promise held.
func (h *rig) promise(ok bool, what string) {
	if !ok {
		h.broken++
		fmt.Fprintln(os.Stderr, "faults: BROKEN:", what)
	}
}

// link forwards TCP connections to the API server; cut drops them and refuses new ones.
type link struct {
	addr     string
	target   string
	l        net.Listener
	mu       sync.Mutex
	conns    map[net.Conn]bool
	cutUntil time.Time
}

func newLink(host string) (*link, error) {
	u, err := neturl.Parse(host)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("API server address %q: %v", host, err)
	}
	target := u.Host
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	k := &link{addr: l.Addr().String(), target: target, l: l, conns: map[net.Conn]bool{}}
	go k.serve()
	return k, nil
}

func (k *link) serve() {
	for {
		in, err := k.l.Accept()
		if err != nil {
			return
		}
		k.mu.Lock()
		cut := time.Now().Before(k.cutUntil)
		if !cut {
			k.conns[in] = true
		}
		k.mu.Unlock()
		if cut {
			_ = in.Close()
			continue
		}
		go func() {
			out, err := net.Dial("tcp", k.target)
			if err != nil {
				_ = in.Close()
				return
			}
			k.mu.Lock()
			k.conns[out] = true
			k.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			_, _ = io.Copy(in, out)
			_ = in.Close()
		}()
	}
}

// cut drops every connection and refuses new ones for d.
func (k *link) cut(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cutUntil = time.Now().Add(d)
	for c := range k.conns {
		_ = c.Close()
		delete(k.conns, c)
	}
}

func (k *link) close() { _ = k.l.Close() }
