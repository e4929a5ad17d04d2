package harness

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/kubectl/pkg/drain"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/workload"
)

// GroupResult is what a GroupWatch saw of a group of pods.
type GroupResult struct {
	// MaxUnavailable is the most of the expected pods seen not Ready (or terminating) at once.
	MaxUnavailable int
	// MinReady is the fewest Ready pods seen at once.
	MinReady int
	// Evictions counts pods seen terminating; MinGapSeconds is the least time between two
	// of them, from the deletion timestamps the API server set (-1 with fewer than two).
	Evictions     int
	MinGapSeconds int
	// EvictedAt is when each eviction happened, in seconds from the watch's start.
	EvictedAt []float64
}

// GroupWatch samples a group of pods every 200 ms until stopped.
type GroupWatch struct {
	cancel context.CancelFunc
	done   chan GroupResult
}

// WatchGroup starts sampling the pods labelled app=name in ns, of which expected should be Ready.
func WatchGroup(ctx context.Context, c client.Client, ns, name string, expected int) *GroupWatch {
	ctx, cancel := context.WithCancel(ctx)
	w := &GroupWatch{cancel: cancel, done: make(chan GroupResult, 1)}
	started := time.Now()
	go func() {
		res := GroupResult{MinReady: expected, MinGapSeconds: -1}
		deleted := map[string]time.Time{}
		for ctx.Err() == nil {
			var pods corev1.PodList
			if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err == nil {
				ready := 0
				for i := range pods.Items {
					p := &pods.Items[i]
					if workload.PodServing(p) {
						ready++
					}
					// The first deletion timestamp is the eviction's (plus the grace period);
					// kwok shortens it later when it finishes the pod off.
					if _, seen := deleted[p.Name]; p.DeletionTimestamp != nil && !seen {
						deleted[p.Name] = p.DeletionTimestamp.Time
					}
				}
				res.MaxUnavailable = max(res.MaxUnavailable, expected-ready)
				res.MinReady = min(res.MinReady, ready)
			}
			time.Sleep(200 * time.Millisecond)
		}
		var times []time.Time
		for _, t := range deleted {
			times = append(times, t)
		}
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		res.Evictions = len(times)
		for _, t := range times {
			res.EvictedAt = append(res.EvictedAt, float64(t.Sub(started).Milliseconds())/1000)
		}
		for i := 1; i < len(times); i++ {
			gap := int(times[i].Sub(times[i-1]).Seconds())
			if res.MinGapSeconds < 0 || gap < res.MinGapSeconds {
				res.MinGapSeconds = gap
			}
		}
		w.done <- res
	}()
	return w
}

// Stop takes a last second of samples and returns what the watch saw.
func (w *GroupWatch) Stop() GroupResult {
	time.Sleep(time.Second)
	w.cancel()
	return <-w.done
}

func drainer(ctx context.Context, cs kubernetes.Interface) *drain.Helper {
	return &drain.Helper{Ctx: ctx, Client: cs, Force: true, GracePeriodSeconds: -1, IgnoreAllDaemonSets: true,
		DeleteEmptyDirData: true, Timeout: 5 * time.Minute, EvictErrorRetryDelay: 2 * time.Second,
		Out: io.Discard, ErrOut: io.Discard}
}

// DrainAll cordons and drains the nodes at once, as kubectl drain does, and returns how
// many drains completed and the errors of the others.
func DrainAll(ctx context.Context, cs kubernetes.Interface, nodes []string) (int, []error) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	drained, errs := 0, []error(nil)
	for _, node := range nodes {
		wg.Go(func() {
			err := DrainNode(ctx, cs, node)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("draining %s: %w", node, err))
				return
			}
			drained++
		})
	}
	wg.Wait()
	return drained, errs
}

// DrainNode cordons the node and evicts its pods as kubectl drain does: each pod in its
// own goroutine, a 429 retried after a short wait, any other refusal ending the drain;
// it returns once the pods are gone, or when ctx ends.
func DrainNode(ctx context.Context, cs kubernetes.Interface, node string) error {
	h := drainer(ctx, cs)
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err == nil {
		err = drain.RunCordonOrUncordon(h, n, true)
	}
	if err == nil {
		err = drain.RunNodeDrain(h, node)
	}
	return err
}

// Cordon marks the nodes unschedulable (desired true) or schedulable again.
func Cordon(ctx context.Context, cs kubernetes.Interface, nodes []string, desired bool) error {
	h := drainer(ctx, cs)
	for _, node := range nodes {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err == nil {
			err = drain.RunCordonOrUncordon(h, n, desired)
		}
		if err != nil {
			return fmt.Errorf("cordoning %s: %w", node, err)
		}
	}
	return nil
}

// ReadyPods waits up to three minutes until n pods labelled app=name in ns are Ready and
// none terminates, and returns the Ready ones.
func ReadyPods(ctx context.Context, c client.Client, ns, name string, n int) ([]corev1.Pod, error) {
	var ready []corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
			return false, err
		}
		ready = ready[:0]
		for _, p := range pods.Items {
			if p.DeletionTimestamp != nil {
				return false, nil
			}
			if workload.PodServing(&p) {
				ready = append(ready, p)
			}
		}
		return len(ready) == n, nil
	})
	if err != nil {
		return ready, fmt.Errorf("want %d Ready %s pods, have %d: %w", n, name, len(ready), err)
	}
	return ready, nil
}

// EvictNodePods cordons the node and evicts the pods of namespace ns on it, DaemonSet pods
// included, as cluster-autoscaler does on a node it removes (kubectl drain skips them):
// kubectl's eviction loop, each pod in its own goroutine, a 429 retried, any other
// refusal ending the drain. It returns once the evicted pods are gone (a pod gone by other
// hands counts, as for kubectl; a DaemonSet's replacement on the cordoned node is a new
// pod), or when ctx ends.
func EvictNodePods(ctx context.Context, cs kubernetes.Interface, node, ns string) error {
	h := drainer(ctx, cs)
	n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := drain.RunCordonOrUncordon(h, n, true); err != nil {
		return err
	}
	list, err := cs.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp == nil && !workload.PodEnded(&p) {
			pods = append(pods, p)
		}
	}
	return h.DeleteOrEvictPods(pods)
}

// CountStatus returns a copy of cfg whose clients count the responses with the status
// code, as received: client-go retries a 429 that carries Retry-After itself, so the
// caller (the drain library) never sees most of them.
func CountStatus(cfg *rest.Config, code int) (*rest.Config, *atomic.Int64) {
	n := &atomic.Int64{}
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && resp.StatusCode == code {
				n.Add(1)
			}
			return resp, err
		})
	})
	return out, n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
