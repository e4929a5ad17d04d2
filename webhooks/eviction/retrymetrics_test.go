package eviction

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestRetryLaterCountsUnderThePolicies: while the group's ledger cannot be read in time,
// holdfast defers the eviction itself (retryLater). The drain is held as surely as by a
// rule, so the request counts as deferred under the policy that applies
// (holdfast_eviction_reviews_total), which HoldfastEvictionsDeferredLong reads per policy;
// it counted under none, and a drain stuck on a slow ledger never alerted.
func TestRetryLaterCountsUnderThePolicies(t *testing.T) {
	p := dp(nil)
	objs, pod := agentGroup(nil)
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue
		}
	}
	slow := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewServerTimeout(corev1.Resource("configmaps"), "get", 1)
		},
	})
	reg := prometheus.NewPedanticRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &p)...),
		APIReader: utiltesting.NewMemReader(nil, objs...), Clock: clocktesting.NewFakeClock(time.Now()), Metrics: m,
		Ledgers: &budget.Ledgers{Live: slow, Namespace: "holdfast-system", Identity: "replica-0"}, Holds: &Holds{}}
	resp := h.Handle(context.Background(), podEviction(pod, "alice"))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != 429 {
		t.Fatalf("with the ledger timing out: %+v, want 429", resp.Result)
	}
	if diff := cmp.Diff(map[string]float64{"outcome=deferred,policy=" + p.Name: 1}, utiltesting.Counts(t, reg, "holdfast_eviction_reviews_total")); diff != "" {
		t.Errorf("holdfast_eviction_reviews_total (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]float64{"outcome=deferred": 1}, utiltesting.Counts(t, reg, "holdfast_eviction_requests_total")); diff != "" {
		t.Errorf("holdfast_eviction_requests_total (-want +got):\n%s", diff)
	}
}

// TestHoldfastsOwnRetryIsCountedDeferred: holdfast's own 429 (retryLater: a ledger not
// reachable in time, two PodDisruptionBudgets over the pod) is a deferral of a guarded pod
// in holdfast_eviction_requests_total, not "unguarded".
func TestHoldfastsOwnRetryIsCountedDeferred(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	g := group(v1alpha1.KindDaemonSet, 2)
	d := retryLater("PodDisruptionBudgets a, b both cover pod x")
	if d.Action() != decision.Deny {
		t.Fatal("retryLater does not defer")
	}
	m.observe(d, Input{Group: g, Pod: g.Pods[0]}, time.Millisecond)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var unguarded, deferred float64
	for _, mf := range mfs {
		for _, mm := range mf.GetMetric() {
			var labels []string
			for _, l := range mm.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if mm.GetCounter() != nil && mm.GetCounter().GetValue() > 0 {
				t.Logf("%s%v %v", mf.GetName(), labels, mm.GetCounter().GetValue())
			}
			if mf.GetName() == "holdfast_eviction_requests_total" && len(labels) == 1 && labels[0] == "outcome=unguarded" {
				unguarded = mm.GetCounter().GetValue()
			}
			if mf.GetName() == "holdfast_eviction_requests_total" && len(labels) == 1 && labels[0] == "outcome=deferred" {
				deferred = mm.GetCounter().GetValue()
			}
		}
	}
	if unguarded != 0 || deferred != 1 {
		t.Errorf("a 429 holdfast answered is counted %v unguarded and %v deferred, want 0 and 1", unguarded, deferred)
	}
}

// TestLongestHold: holdfast_eviction_longest_hold_seconds is, per policy, the longest hold
// of any pod that policy's deferrals keep going. Another pod's eviction admitted under the
// same policy does not end it (the per-policy deferral counts did: a drain stuck in one
// group went unreported while the policy admitted evictions in another); a pod whose
// retries stopped for HoldBreak is no longer held; holdfast's own deferrals have no series.
func TestLongestHold(t *testing.T) {
	t0 := time.Now()
	h := &Holds{}
	clk := clocktesting.NewFakeClock(t0)
	reg := prometheus.NewPedanticRegistry()
	if err := RegisterHolds(reg, h, clk.Now); err != nil {
		t.Fatal(err)
	}
	gauge := func() map[string]float64 { return utiltesting.Counts(t, reg, "holdfast_eviction_longest_hold_seconds") }
	if got := gauge(); len(got) != 0 {
		t.Fatalf("nothing held: %v", got)
	}
	// stuck is held by agents throughout; moving pods are held by agents for 2m each, then
	// admitted; gone stops being retried at 5m; slow is held by holdfast itself.
	for at := time.Duration(0); at <= 40*time.Minute; at += 20 * time.Second {
		now := t0.Add(at)
		h.Deferred("stuck", []string{"agents"}, now)
		moving := types.UID(fmt.Sprintf("moving-%d", at/(2*time.Minute)))
		if at%(2*time.Minute) == 0 && at > 0 {
			h.Ended(types.UID(fmt.Sprintf("moving-%d", at/(2*time.Minute)-1)), now)
		}
		h.Deferred(moving, []string{"agents", "servers"}, now)
		if at <= 5*time.Minute {
			h.Deferred("gone", []string{"zones"}, now)
		}
		h.Deferred("slow", []string{selfHold}, now)
	}
	clk.SetTime(t0.Add(40*time.Minute + 10*time.Second))
	want := map[string]float64{"policy=agents": (40*time.Minute + 10*time.Second).Seconds(), "policy=servers": 10}
	if diff := cmp.Diff(want, gauge()); diff != "" {
		t.Errorf("holdfast_eviction_longest_hold_seconds (-want +got):\n%s", diff)
	}
	// The stuck pod's eviction is admitted: the policy holds only the moving pod.
	h.Ended("stuck", clk.Now())
	if diff := cmp.Diff(map[string]float64{"policy=agents": 10, "policy=servers": 10}, gauge()); diff != "" {
		t.Errorf("after the stuck pod's eviction (-want +got):\n%s", diff)
	}
	// The drain stops: a minute later no hold goes on.
	clk.Step(HoldBreak)
	if got := gauge(); len(got) != 0 {
		t.Errorf("no retry for %s: %v, want no series", HoldBreak+10*time.Second, got)
	}
}

// TestOrphansWorkloadNotReadInTimeIsNotNow: a pod without a controller (its DaemonSet
// deleted orphaning it) belongs to the workload kube adopts it into, which the API server
// is asked for when the cache shows none. That read timing out is "not now" (429), which
// a drain retries, as a ledger read timing out is; it was answered 500, which makes
// kubectl drain give up on the pod. A fault that is not the API server's load stays 500.
func TestOrphansWorkloadNotReadInTimeIsNotNow(t *testing.T) {
	p := dp(nil)
	objs, pod := agentGroup(nil)
	var cached []client.Object
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue
			q.OwnerReferences = nil
		}
		if o.GetName() != "agent" { // the re-created DaemonSet is not in this replica's cache yet
			cached = append(cached, o)
		}
	}
	for name, tc := range map[string]struct {
		err  error
		code int32
	}{
		"server timeout":    {apierrors.NewServerTimeout(corev1.Resource("daemonsets"), "list", 1), 429},
		"too many requests": {apierrors.NewTooManyRequests("slow down", 1), 429},
		"deadline":          {fmt.Errorf("listing: %w", context.DeadlineExceeded), 429},
		"forbidden":         {apierrors.NewForbidden(corev1.Resource("daemonsets"), "", fmt.Errorf("RBAC")), 500},
	} {
		t.Run(name, func(t *testing.T) {
			live := interceptor.NewClient(fake.NewClientBuilder().WithObjects(objs...).Build(), interceptor.Funcs{
				List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error { return tc.err },
			})
			m, err := NewMetrics(prometheus.NewPedanticRegistry())
			if err != nil {
				t.Fatal(err)
			}
			h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(cached, &p)...),
				APIReader: live, Clock: clocktesting.NewFakeClock(time.Now()), Metrics: m,
				Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}, Holds: &Holds{}}
			resp := h.Handle(context.Background(), podEviction(pod, "alice"))
			if resp.Allowed || resp.Result == nil || resp.Result.Code != tc.code {
				t.Fatalf("with the live List failing (%v): %+v, want %d", tc.err, resp.Result, tc.code)
			}
		})
	}
}
