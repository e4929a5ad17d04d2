package main

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// The drain storm's shape: groups Deployments of replicas pods each on stormNodes fake
// nodes, one DisruptionPolicy over them, evicters draining nodes at once.
const (
	stormNamespace = "storm"
	stormGroups    = 20
	stormReplicas  = 10
	stormNodes     = 20
	stormEvicters  = 10
	stormBudget    = 1
	// The webhooks' timeout: an answer later than this fails open under Ignore.
	stormWebhookTimeout = 3
)

// drainStorm runs a drain storm on a kwok cluster, where the controller-manager, the
// scheduler and kwok make the replacement pods: stormEvicters kubectl-drain-style
// evicters drain nodes (cordon, evict every pod, retry 429s, uncordon, next node) for
// o.storm, through two holdfast replicas behind the balancer with failurePolicy Ignore.
// It measures the eviction calls' latency as the evicters saw them, the API server's own
// count of webhook calls that failed open, and, from a watch of the pods, whether any
// group went over its budget through an eviction.
func drainStorm(ctx context.Context, o options) (int, error) {
	bin, config := os.Getenv("TESTBED_BIN"), os.Getenv("KWOKCTL_CONFIG")
	if bin == "" || config == "" {
		return 0, fmt.Errorf("TESTBED_BIN and KWOKCTL_CONFIG must be set: run `make test-faults`")
	}
	dir, err := os.MkdirTemp("", "holdfast-drain-storm-")
	if err != nil {
		return 0, err
	}
	kwokLog, err := os.Create(filepath.Join(dir, "kwokctl.log"))
	if err != nil {
		return 0, err
	}
	defer kwokLog.Close()
	started := time.Now()
	k, err := harness.StartKwok(ctx, bin, config, fmt.Sprintf("holdfast-storm-%d", os.Getpid()), stormNodes, dir, kwokLog)
	if err != nil {
		return 0, fmt.Errorf("%w (log: %s)", err, kwokLog.Name())
	}
	defer func() { _ = k.Delete() }()
	cfg := rest.CopyConfig(k.Config)
	cfg.QPS, cfg.Burst = 500, 1000
	c, err := client.New(cfg, client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		return 0, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}

	stop, err := startGuard(ctx, o, cfg, c, k.Kubeconfig, dir)
	if err != nil {
		return 0, fmt.Errorf("%w (logs in %s)", err, dir)
	}
	defer stop()
	if err := createGroups(ctx, c); err != nil {
		return 0, err
	}
	fmt.Fprintf(os.Stderr, "faults: drain storm: %d pods Ready in %d groups on %d nodes after %.0fs; logs in %s\n",
		stormGroups*stormReplicas, stormGroups, stormNodes, time.Since(started).Seconds(), dir)

	w, err := harness.WatchBudget(ctx, cs, stormNamespace, "app", stormReplicas, stormBudget)
	if err != nil {
		return 0, err
	}
	calls := &evictionCalls{codes: map[int]int{}}
	drains, drainErrs, lastErr, err := evict(ctx, cs, cfg, calls, o.storm)
	if err != nil {
		_ = w.Stop()
		return 0, err
	}
	// The last admitted evictions reach the watch a moment later.
	time.Sleep(2 * time.Second)
	seen := w.Stop()
	if seen.Err != nil {
		return 0, seen.Err
	}
	// Counted since the cluster started: any webhook call that failed open is one too many.
	failedOpen, err := failOpenCount(ctx, cs)
	if err != nil {
		return 0, err
	}

	p99, maxMs := calls.latency()
	fmt.Printf("RELIABILITY drain-storm evictions=%d p99Ms=%d maxMs=%d failedOpen=%d overBudget=%d\n",
		calls.admitted(), p99, maxMs, failedOpen, seen.OverBudget)
	fmt.Fprintf(os.Stderr, "faults: drain storm: %s, %d pods seen evicted, most unavailable in a group %d, %d drains completed, %d failed (%s), %d watch events; %.0fs in all\n",
		calls.answers(), seen.Evictions, seen.MaxUnavailable, drains, drainErrs, lastErr, seen.Events, time.Since(started).Seconds())
	broken := 0
	promise := func(ok bool, what string) {
		if !ok {
			broken++
			fmt.Fprintln(os.Stderr, "faults: BROKEN:", what)
		}
	}
	promise(failedOpen == 0, fmt.Sprintf("drain storm: the API server let %d calls to holdfast's webhooks fail open", failedOpen))
	promise(seen.OverBudget == 0, fmt.Sprintf("drain storm: %d evictions took a group over its budget of %d (most unavailable: %d)", seen.OverBudget, stormBudget, seen.MaxUnavailable))
	promise(calls.admitted() > 0, "drain storm: no eviction was admitted")
	return broken, nil
}

// startGuard installs holdfast's CRDs, starts two replicas of the built binary against the
// cluster behind the balancer, and points the webhooks at it with failurePolicy Ignore and
// a timeout of stormWebhookTimeout seconds. stop stops them.
func startGuard(ctx context.Context, o options, cfg *rest.Config, c client.Client, kubeconfig, dir string) (stop func(), err error) {
	if _, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join("config", "crd", "bases")}, ErrorIfPathMissing: true}); err != nil {
		return nil, err
	}
	if err := harness.EnsureNamespace(ctx, c, holdfastNamespace); err != nil {
		return nil, err
	}
	// Three ports per replica, and the balancer's, which the webhooks call.
	ports, err := harness.FreePorts(7)
	if err != nil {
		return nil, err
	}
	webhooks, err := harness.Webhooks(harness.WebhookOptions{Manifest: filepath.Join("config", "webhook", "manifests.yaml"),
		Port: ports[6], Namespace: holdfastNamespace,
		FailurePolicy: admissionregistrationv1.Ignore, TimeoutSeconds: stormWebhookTimeout})
	if err != nil {
		return nil, err
	}
	certDir := webhooks.LocalServingCertDir
	var procs []harness.Process
	var cmds []*exec.Cmd
	var lb *harness.Balancer
	stop = func() {
		for _, cmd := range cmds {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
		if lb != nil {
			_ = lb.Close()
		}
		_ = webhooks.Cleanup()
	}
	for i := range 2 {
		p := harness.Process{Binary: o.binary, Kubeconfig: kubeconfig, CertDir: certDir, Namespace: holdfastNamespace,
			WebhookPort: ports[3*i], MetricsPort: ports[3*i+1], ProbePort: ports[3*i+2],
			FailurePolicy: admissionregistrationv1.Ignore, TimeoutSeconds: stormWebhookTimeout,
			ExtraArgs: []string{"--log-format=console"}}
		logFile, err := os.Create(filepath.Join(dir, fmt.Sprintf("holdfast-%d.log", i)))
		if err != nil {
			stop()
			return nil, err
		}
		p.Stdout, p.Stderr = logFile, logFile
		cmd := p.Command(context.Background())
		if err := cmd.Start(); err != nil {
			stop()
			return nil, err
		}
		cmds = append(cmds, cmd)
		if err := p.WaitReady(ctx, time.Minute); err != nil {
			stop()
			return nil, err
		}
		procs = append(procs, p)
	}
	if lb, err = harness.StartBalancer(webhooks.LocalServingPort, certDir, webhooks.LocalServingCAData, procs); err != nil {
		stop()
		return nil, err
	}
	if err := webhooks.Install(cfg); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// createGroups creates the guarded Deployments under one DisruptionPolicy (no generated
// PDBs, so that holdfast alone holds the budget) and waits until every pod is Ready.
func createGroups(ctx context.Context, c client.Client) error {
	if err := harness.EnsureNamespace(ctx, c, stormNamespace); err != nil {
		return err
	}
	dp := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "drain-storm"}, Spec: v1alpha1.DisruptionPolicySpec{
		Targets: v1alpha1.PodTargets{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: stormNamespace}}},
		MaxUnavailable:  ptr.To(intstr.FromInt32(stormBudget)),
		MinReadySeconds: 1,
		Cooldown:        &metav1.Duration{Duration: time.Second}}}
	if err := c.Create(ctx, dp); err != nil {
		return err
	}
	if err := harness.WaitIntercepted(ctx, c, dp); err != nil {
		return err
	}
	for g := range stormGroups {
		d := utiltesting.MakeDeployment(stormNamespace, fmt.Sprintf("group-%02d", g)).Replicas(stormReplicas).Obj()
		// kwok finishes a terminating pod off at a random moment before its grace period
		// ends: a short one keeps each drain's wait for its pods short.
		d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
		if err := c.Create(ctx, d); err != nil {
			return err
		}
	}
	ready := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(stormNamespace)); err != nil {
			return false, nil
		}
		ready = 0
		for i := range pods.Items {
			if workload.PodServing(&pods.Items[i]) {
				ready++
			}
		}
		return ready == stormGroups*stormReplicas && len(pods.Items) == ready, nil
	})
	if err != nil {
		return fmt.Errorf("%d of %d storm pods Ready: %w", ready, stormGroups*stormReplicas, err)
	}
	return nil
}

// evict runs stormEvicters evicters for d: each takes the next node no other evicter
// holds, drains it as kubectl drain does, uncordons it (the node came back upgraded) and
// moves on. Each evicter has a client of its own, as each kubectl has, whose eviction
// calls times. It returns how many drains completed and how many failed, with the last
// failure.
func evict(ctx context.Context, cs kubernetes.Interface, cfg *rest.Config, calls *evictionCalls, d time.Duration) (int, int, string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, 0, "", err
	}
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	var mu sync.Mutex
	held, next := map[string]bool{}, 0
	take := func() string {
		mu.Lock()
		defer mu.Unlock()
		for range names {
			n := names[next%len(names)]
			next++
			if !held[n] {
				held[n] = true
				return n
			}
		}
		return ""
	}
	drained, failed, lastErr := 0, 0, "none"
	stormCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for range stormEvicters {
		ecfg := rest.CopyConfig(cfg)
		ecfg.QPS, ecfg.Burst = 50, 100
		ecfg.WrapTransport = calls.wrap
		ecs, err := kubernetes.NewForConfig(ecfg)
		if err != nil {
			return 0, 0, "", err
		}
		wg.Go(func() {
			for stormCtx.Err() == nil {
				node := take()
				if node == "" {
					time.Sleep(time.Second)
					continue
				}
				err := harness.DrainNode(stormCtx, ecs, node)
				// Uncordoned with the outer context: the storm's may have ended.
				_ = harness.Cordon(ctx, cs, []string{node}, false)
				mu.Lock()
				held[node] = false
				switch {
				case stormCtx.Err() != nil:
				case err != nil:
					failed++
					lastErr = err.Error()
				default:
					drained++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return drained, failed, lastErr, nil
}

// evictionCalls times the eviction calls an evicter's client sends, each HTTP round trip
// on its own: client-go silently retries a 429 that carries Retry-After, and each of those
// is an answer the evicter waited for.
type evictionCalls struct {
	mu        sync.Mutex
	durations []time.Duration
	codes     map[int]int
}

func (e *evictionCalls) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/eviction") {
			return rt.RoundTrip(r)
		}
		start := time.Now()
		resp, err := rt.RoundTrip(r)
		if err != nil {
			return resp, err // cut short when the storm ends: not an answer
		}
		e.mu.Lock()
		e.durations = append(e.durations, time.Since(start))
		e.codes[resp.StatusCode]++
		e.mu.Unlock()
		return resp, err
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// admitted counts the evictions the API server admitted (201 Created).
func (e *evictionCalls) admitted() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.codes[http.StatusCreated] + e.codes[http.StatusOK]
}

// latency returns the 99th percentile and the maximum of the calls' durations, in ms.
func (e *evictionCalls) latency() (p99, maxMs int64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.durations) == 0 {
		return 0, 0
	}
	d := slices.Clone(e.durations)
	slices.Sort(d)
	i := int(math.Ceil(0.99*float64(len(d)))) - 1
	return d[i].Milliseconds(), d[len(d)-1].Milliseconds()
}

// answers counts the calls by status code.
func (e *evictionCalls) answers() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, code := range slices.Sorted(maps.Keys(e.codes)) {
		out = append(out, fmt.Sprintf("%d: %d", code, e.codes[code]))
	}
	return fmt.Sprintf("%d eviction calls (%s)", len(e.durations), strings.Join(out, ", "))
}

// failOpenCount sums the API server's apiserver_admission_webhook_fail_open_count over
// holdfast's webhooks: the calls it let through because a webhook did not answer in time
// or could not be reached.
func failOpenCount(ctx context.Context, cs kubernetes.Interface) (int, error) {
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	const metric = "apiserver_admission_webhook_fail_open_count{"
	total := 0.0
	for _, line := range strings.Split(string(raw), "\n") {
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, metric), "} ")
		if !ok || !strings.HasPrefix(line, metric) || !strings.Contains(labels, `.holdfast.dev"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("the API server's %s} %q: %w", metric, value, err)
		}
		total += v
	}
	return int(total), nil
}
