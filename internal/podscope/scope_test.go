package podscope

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// fakeAPI answers pod lists whose label selector names tier at once (empty), unless it
// also names stuck, and holds every other list (a large cluster's slow first list);
// watches stay open, silent.
func fakeAPI(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") == "true" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(200)
			if q.Get("sendInitialEvents") == "true" && answered(q.Get("labelSelector")) {
				_, _ = w.Write([]byte(`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"))
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		if answered(q.Get("labelSelector")) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
			return
		}
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func answered(selector string) bool {
	return strings.Contains(selector, "tier") && !strings.Contains(selector, "stuck")
}

func testScope(t *testing.T, ctx context.Context, host string) *Scope {
	scheme := runtime.NewScheme()
	_ = corev1.AddToScheme(scheme)
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(corev1.SchemeGroupVersion.WithKind("Pod"), meta.RESTScopeNamespace)
	s := New(nil)
	s.cfg = &rest.Config{Host: host}
	s.base = crcache.Options{Scheme: scheme, Mapper: mapper}
	s.ctx = ctx // as Planner.Start does
	return s
}

// The first plan's watch is dropped by the second plan before it syncs: the Scope (readyz,
// the PDB controllers' pod source) is ready once every watch of the current plan has
// synced, not waiting for the dropped one.
func TestAWatchDroppedBeforeItSyncsLeavesThePlanReady(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := fakeAPI(t)

	control := testScope(t, ctx, srv.URL)
	control.Apply([]Spec{{Key: "tier", Values: []string{"t"}}}, logr.Discard())

	s := testScope(t, ctx, srv.URL)
	reg, _ := s.AddEventHandler(toolscache.ResourceEventHandlerFuncs{})
	s.Apply([]Spec{{Key: "app", Values: []string{"a"}}}, logr.Discard()) // first plan, slow to sync
	time.Sleep(300 * time.Millisecond)
	s.Apply([]Spec{{Key: "tier", Values: []string{"t"}}}, logr.Discard()) // e.g. tier became the popular key

	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) && !slices.Contains(s.Watching(), "tier in (t)") {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	if control.Ready() != nil {
		t.Fatal("control never synced: harness problem")
	}
	if s.Ready() != nil || !reg.HasSynced() {
		t.Errorf("the current plan has synced, yet the Scope is not ready (%v) or its handler not synced (%v)", s.Ready(), reg.HasSynced())
	}
}

// A watch dropped before it syncs holds up no other watch of its plan: tier's synced
// replacement takes the old one's place (which stops), rather than both running.
func TestAWatchDroppedBeforeItSyncsBlocksNoOther(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := testScope(t, ctx, fakeAPI(t).URL)
	s.Apply([]Spec{{Key: "tier", Values: []string{"t"}}}, logr.Discard())
	for s.Ready() != nil {
		time.Sleep(20 * time.Millisecond)
	}
	s.Apply([]Spec{{Key: "app", Values: []string{"a"}}, {Key: "tier", Values: []string{"t", "u"}}}, logr.Discard())
	time.Sleep(300 * time.Millisecond)
	s.Apply([]Spec{{Key: "tier", Values: []string{"t", "u"}}}, logr.Discard()) // app dropped before it synced
	time.Sleep(2 * time.Second)
	s.Apply([]Spec{{Key: "tier", Values: []string{"t", "u"}}}, logr.Discard())
	time.Sleep(time.Second)
	s.mu.RLock()
	cur := s.watches["label/tier"]
	stuck := cur.next != nil && cur.next.isSynced()
	s.mu.RUnlock()
	if stuck || !cur.spec.Equal(Spec{Key: "tier", Values: []string{"t", "u"}}) {
		t.Errorf("label/tier serves %v (a synced successor waiting: %v), want tier in (t,u) alone", cur.spec, stuck)
	}
}

// A widened plan whose new watch never syncs (its first list is never answered): the
// Scope stays ready, no read is served by that watch (they go to the API server), and
// holdfast_pod_watch_unsynced_seconds says for how long it has been syncing, until the plan
// drops it.
func TestAWatchThatNeverSyncsIsMeasuredAndLeavesTheScopeReady(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m, err := NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := testScope(t, ctx, fakeAPI(t).URL)
	s.metrics = m
	m.scope.Store(s)
	unsynced := func() float64 {
		var out dto.Metric
		if err := m.unsynced.Write(&out); err != nil {
			t.Fatal(err)
		}
		return out.GetGauge().GetValue()
	}
	tier := Spec{Key: "tier", Values: []string{"t"}}
	s.Apply([]Spec{tier}, logr.Discard())
	for deadline := time.Now().Add(5 * time.Second); s.Ready() != nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tier watch never synced: harness problem")
		}
	}
	if got := unsynced(); got != 0 {
		t.Fatalf("every watch has synced, yet the gauge reads %v s", got)
	}

	s.Apply([]Spec{tier, {Key: "app", Values: []string{"a"}}}, logr.Discard())
	time.Sleep(1200 * time.Millisecond)
	if err := s.Ready(); err != nil {
		t.Errorf("a widened watch that has not synced made the Scope un-Ready: %v", err)
	}
	first := unsynced()
	if first < 1 {
		t.Errorf("the app watch has been syncing for over a second, the gauge reads %v s", first)
	}
	if w := s.serving("ns", labels.SelectorFromSet(labels.Set{"app": "a"})); w != nil {
		t.Errorf("the unsynced watch %s serves reads of app=a", w.spec)
	}
	if s.serving("ns", labels.SelectorFromSet(labels.Set{"tier": "t"})) == nil {
		t.Error("the synced tier watch no longer serves its reads")
	}
	time.Sleep(500 * time.Millisecond)
	later := unsynced()
	if later <= first {
		t.Errorf("the gauge did not grow while the watch kept syncing: %v s, then %v s", first, later)
	}

	s.Apply([]Spec{tier}, logr.Discard())
	if got := unsynced(); got != 0 {
		t.Errorf("the plan dropped the unsynced watch, yet the gauge reads %v s", got)
	}

	// A plan that keeps changing a synced watch into one that cannot sync does not start
	// the clock again with each successor.
	s.Apply([]Spec{{Key: "tier", Values: []string{"t", "stuck"}}}, logr.Discard())
	time.Sleep(1200 * time.Millisecond)
	s.Apply([]Spec{{Key: "tier", Values: []string{"t", "stuck", "stuck-too"}}}, logr.Discard())
	if changed := unsynced(); changed < 1 {
		t.Errorf("the successor of a watch syncing for over a second reads %v s", changed)
	}
	if s.serving("ns", labels.SelectorFromSet(labels.Set{"tier": "t"})) == nil {
		t.Error("the synced tier watch stopped serving while its successors sync")
	}
}

// TestALiveReadEndsByTheRequestsDeadline: a read no synced watch answers goes to the API
// server, and ends by the deadline the request carries (informer.WithLiveDeadline, a
// request's one deadline) when the API server does not answer: an answer to retry, in
// time for the webhook's timeout, rather than the API server giving up on holdfast.
func TestALiveReadEndsByTheRequestsDeadline(t *testing.T) {
	srv := fakeAPI(t) // holds lists whose selector does not name tier
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s := testScope(t, ctx, srv.URL)
	live, err := client.New(s.cfg, client.Options{Scheme: s.base.Scheme, Mapper: s.base.Mapper})
	if err != nil {
		t.Fatal(err)
	}
	s.live = live
	at := time.Now().Add(100 * time.Millisecond)
	began := time.Now()
	_, err = s.liveList(informer.WithLiveDeadline(ctx, &at), kindPod, "tenant-a", labels.SelectorFromSet(labels.Set{"app": "etcd"}), ReasonOutside)
	if took := time.Since(began); err == nil || took > 2*time.Second {
		t.Errorf("a live list the API server does not answer: err %v after %s, want an error by the 100ms deadline", err, took)
	}
}

// A plan that changes a watch again while its successor is still syncing (a fleet
// relabelled into a selection one workload after another) lets the successor finish,
// rather than restarting a list of every pod it covers each time; Again then signals, and
// the held-back plan starts. A successor syncing for longer than the scope's patience (one
// that cannot sync) is replaced by the latest plan, and Again signals when the patience
// runs out even with no change to the plan.
func TestAChangeWaitsForTheSuccessorSyncing(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	release := make(chan struct{})
	var mu sync.Mutex
	lists := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		sel := q.Get("labelSelector")
		slow, stuck := strings.Contains(sel, "slow"), strings.Contains(sel, "stuck")
		if q.Get("watch") != "true" || q.Get("sendInitialEvents") == "true" { // a list, or a watch-list
			mu.Lock()
			lists[sel]++
			mu.Unlock()
		}
		if stuck {
			<-r.Context().Done()
			return
		}
		if slow {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		if q.Get("watch") == "true" {
			w.WriteHeader(200)
			if q.Get("sendInitialEvents") == "true" {
				_, _ = w.Write([]byte(`{"type":"BOOKMARK","object":{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"1","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n"))
			}
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		_, _ = w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`))
	}))
	t.Cleanup(srv.Close)
	listed := func(sel string) int {
		mu.Lock()
		defer mu.Unlock()
		return lists[sel]
	}
	s := testScope(t, ctx, srv.URL)
	successor := func() *watch {
		s.mu.RLock()
		defer s.mu.RUnlock()
		return s.watches["label/tier"].next
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("never: %s (lists: %v)", what, lists)
			}
		}
	}
	signalled := func(within time.Duration) bool {
		select {
		case <-s.Again():
			return true
		case <-time.After(within):
			return false
		}
	}

	s.Apply([]Spec{{Key: "tier", Values: []string{"t"}}}, logr.Discard())
	waitFor("the first watch synced", func() bool { return s.Ready() == nil })
	s.Apply([]Spec{{Key: "tier", Values: []string{"slow", "t"}}}, logr.Discard())
	waitFor("the successor listed", func() bool { return listed("tier in (slow,t)") > 0 })
	first := successor()
	for _, v := range []string{"u", "v", "w"} {
		s.Apply([]Spec{{Key: "tier", Values: []string{"slow", "t", v}}}, logr.Discard())
		if got := successor(); got != first {
			t.Fatalf("a change while the successor syncs replaced it with %v", got.spec)
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := listed("tier in (slow,t,w)"); n != 0 {
		t.Errorf("the held-back plan was listed %d times while the successor synced", n)
	}
	if signalled(0) {
		t.Error("Again signalled before the successor synced")
	}
	close(release)
	if !signalled(5 * time.Second) {
		t.Fatal("the successor synced, and Again never signalled")
	}
	waitFor("the successor promoted", func() bool { return slices.Contains(s.Watching(), "tier in (slow,t)") })
	s.Apply([]Spec{{Key: "tier", Values: []string{"slow", "t", "w"}}}, logr.Discard())
	waitFor("the held-back plan synced", func() bool { return slices.Equal(s.Watching(), []string{"tier in (slow,t,w)"}) })

	// A successor that cannot sync is waited for no longer than the patience.
	s.patience = 300 * time.Millisecond
	s.Apply([]Spec{{Key: "tier", Values: []string{"slow", "stuck", "t", "w"}}}, logr.Discard())
	stuck := successor()
	s.Apply([]Spec{{Key: "tier", Values: []string{"slow", "stuck", "t", "w", "x"}}}, logr.Discard())
	if successor() != stuck {
		t.Fatal("a change within the patience replaced the syncing successor")
	}
	if !signalled(2 * time.Second) {
		t.Fatal("the patience ran out, and Again never signalled")
	}
	s.Apply([]Spec{{Key: "tier", Values: []string{"slow", "stuck", "t", "w", "x"}}}, logr.Discard())
	if got := successor(); got == stuck || got == nil || !got.spec.Equal(Spec{Key: "tier", Values: []string{"slow", "stuck", "t", "w", "x"}}) {
		t.Errorf("past the patience the latest plan did not replace the stuck successor: %v", got)
	}
	if stuck.ctx.Err() == nil {
		t.Error("the stuck successor was not stopped")
	}
}
