package eviction

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// countingReader counts the Lists of pods it serves.
type countingReader struct {
	client.Reader
	podLists int
}

func (r *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*corev1.PodList); ok {
		r.podLists++
	}
	return r.Reader.List(ctx, list, opts...)
}

// TestAdmittedEvictionCountsThePodsAsTheAPIServerHasThem: this replica's cache still shows
// an agent Ready that went down a moment ago (its replacement is not Ready yet); the
// eviction of the other agent, judged on the cache, would take the group over its budget
// of one. An eviction the cache's pods would admit is judged again on the group's pods
// read from the API server, and deferred; one the cache already defers costs no read.
// The fleet explorer found the admitted one (seed 37127: two of a StatefulSet's two pods
// down under a budget of one).
func TestAdmittedEvictionCountsThePodsAsTheAPIServerHasThem(t *testing.T) {
	objs, pod := agentGroup(nil) // agent-0 not Ready, agent-1 Ready
	stale := make([]client.Object, len(objs))
	for i, o := range objs {
		stale[i] = o
		if p, ok := o.(*corev1.Pod); ok && p.Name == "agent-0" {
			ready := p.DeepCopy()
			ready.Status.Conditions[0].Status = corev1.ConditionTrue
			stale[i] = ready
		}
	}
	p := dp(nil)
	handler := func(cached []client.Object, live *countingReader) *Handler {
		return &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(cached, &p)...),
			APIReader: live, Clock: clocktesting.NewFakeClock(time.Now()), Holds: &Holds{},
			Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}}
	}
	live := &countingReader{Reader: utiltesting.NewMemReader(nil, objs...)}
	resp := handler(stale, live).Handle(context.Background(), podEviction(pod, "alice"))
	if resp.Allowed || resp.Result.Code != 429 {
		t.Errorf("the second agent evicted while the first is down, which the cache does not show yet: %+v, want 429", resp.Result)
	}
	if live.podLists == 0 {
		t.Errorf("the group's pods were not read from the API server")
	}
	fresh := &countingReader{Reader: utiltesting.NewMemReader(nil, objs...)}
	if resp := handler(objs, fresh).Handle(context.Background(), podEviction(pod, "alice")); resp.Allowed {
		t.Errorf("control, the cache up to date: %+v, want 429", resp.Result)
	}
	if fresh.podLists != 0 {
		t.Errorf("an eviction the cache's pods defer read the pods live %d times", fresh.podLists)
	}
	// Both up: admitted, on one read.
	up := &countingReader{Reader: utiltesting.NewMemReader(nil, stale...)}
	if resp := handler(stale, up).Handle(context.Background(), podEviction(pod, "alice")); !resp.Allowed {
		t.Errorf("both agents up: %+v, want admitted", resp.Result)
	}
	if up.podLists != 1 {
		t.Errorf("an admitted eviction read the pods live %d times, want 1", up.podLists)
	}
}

// zkScene is a StatefulSet zk of four pods, zk-0 and zk-1 on zone a's nodes, zk-2 and
// zk-3 on zone b's, Ready an hour, under a policy of three pods at a time and one zone.
func zkScene() (objs []client.Object, pods []*corev1.Pod, policy v1alpha1.DisruptionPolicy) {
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "cp", Name: "zk", UID: "sts"},
		Spec:   appsv1.StatefulSetSpec{Replicas: ptr.To[int32](4), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}},
		Status: appsv1.StatefulSetStatus{Replicas: 4}}
	objs = []client.Object{sts, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cp", Labels: map[string]string{corev1.LabelMetadataName: "cp"}}}}
	for _, n := range []string{"node-a-0", "node-a-1", "node-b-0", "node-b-1", "node-b-2"} {
		objs = append(objs, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, Labels: map[string]string{zoneKey: n[5:6]}}})
	}
	for i, n := range []string{"node-a-0", "node-a-1", "node-b-0", "node-b-1"} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "cp", Name: fmt.Sprintf("zk-%d", i), UID: types.UID(fmt.Sprintf("zk-%d", i)),
			Labels: map[string]string{"app": "agent"}, CreationTimestamp: metav1.NewTime(time.Now().Add(-2 * time.Hour)),
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
			Spec: corev1.PodSpec{NodeName: n},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}}}
		objs, pods = append(objs, p), append(pods, p)
	}
	return objs, pods, zoned(nil)
}

// TestAdmittedEvictionReadsTheDomainOfThePodAsTheAPIServerHasIt: zone a is down one pod
// (zk-0, evicted a moment ago, its replacement not Ready). zk-1 was deleted and re-created
// on a node of zone b; this replica's cache still shows the old zk-1 on node-a-1. Judged
// on the cache's pod, the eviction is in the disrupted zone and admitted; kube evicts the
// new zk-1, in zone b: a second zone down under a topology budget of one. The domain is
// read again for the pod the API server has: 429.
func TestAdmittedEvictionReadsTheDomainOfThePodAsTheAPIServerHasIt(t *testing.T) {
	ctx := context.Background()
	objs, pods, p := zkScene()
	clk := clocktesting.NewFakeClock(time.Now())
	ledgers := &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}
	reg := prometheus.NewRegistry()
	metrics, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(cached, live []client.Object) *Handler {
		return &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(cached, &p)...),
			APIReader: utiltesting.NewMemReader(nil, live...), Clock: clk, Holds: &Holds{}, Ledgers: ledgers, Metrics: metrics}
	}
	// zk-0's eviction, admitted on fresh caches and recorded (zone a, two serving there).
	if resp := handler(objs, objs).Handle(ctx, podEviction(pods[0], "alice")); !resp.Allowed {
		t.Fatalf("zk-0's eviction: %+v, want admitted", resp.Result)
	}
	clk.Step(10 * time.Second)
	zk0 := recreated(pods[0], clk.Now(), false)                    // its replacement, not Ready yet, on its node
	zk1 := recreated(pods[1], clk.Now().Add(-5*time.Second), true) // deleted, re-created in zone b and Ready
	zk1.Spec.NodeName = "node-b-2"
	zk1.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now().Add(-time.Second))
	cached, live := swapIn(objs, zk0), swapIn(objs, zk0, zk1)
	stale := handler(cached, live)
	rec := &uidLog{}
	stale.Events = &events.Limiter{Recorder: rec}
	resp := stale.Handle(ctx, podEviction(pods[1], "alice"))
	if resp.Allowed || resp.Result.Code != 429 || !contains(resp.Result.Message, RuleTopologyBudget) {
		t.Errorf("the new zk-1, in zone b, evicted while zone a is down: %+v, want 429 by %s", resp.Result, RuleTopologyBudget)
	}
	// Its Warning is about the pod deferred, the new zk-1, not the one the cache still holds.
	if want := []string{"EvictionDeferred zk-1-new"}; !slices.Equal(rec.events, want) {
		t.Errorf("Events %v, want %v", rec.events, want)
	}
	// Control: the cache up to date defers it too, without a live read.
	if resp := handler(live, live).Handle(ctx, podEviction(pods[1], "alice")); resp.Allowed {
		t.Errorf("control, the cache up to date: %+v, want 429", resp.Result)
	}
	if got := utiltesting.Counts(t, reg, "holdfast_eviction_group_live_reads_total"); got["result=admitted"] != 1 || got["result=deferred"] != 1 || len(got) != 2 {
		t.Errorf("live reads counted %v, want zk-0's admitted and the new zk-1's deferred", got)
	}
}

// swapIn is objs with the pods of with's names replaced by with.
func swapIn(objs []client.Object, with ...client.Object) []client.Object {
	out := slices.Clone(objs)
	for i, o := range out {
		for _, w := range with {
			if o.GetName() == w.GetName() && o.GetNamespace() == w.GetNamespace() {
				out[i] = w
			}
		}
	}
	return out
}

// recreated is p deleted and created again under its name at at (a StatefulSet's pod): a
// new UID, Ready or not yet.
func recreated(p *corev1.Pod, at time.Time, ready bool) *corev1.Pod {
	q := p.DeepCopy()
	q.UID, q.CreationTimestamp = p.UID+"-new", metav1.NewTime(at)
	if !ready {
		q.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	return q
}

// tierPolicy is the policy, named tier, that selects the pods labelled tier: tier (at most
// one unavailable).
func tierPolicy(tier string) v1alpha1.DisruptionPolicy {
	p := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		s.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": tier}}
	})
	p.Name = tier
	return p
}

// zkHandler is a replica of identity id deciding on cached, reading live from the API
// server, its ledgers in store.
func zkHandler(id string, p v1alpha1.DisruptionPolicy, clk *clocktesting.FakeClock, store client.Client, cached []client.Object, live client.Reader) *Handler {
	return &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(cached, &p)...),
		APIReader: live, Clock: clk, Holds: &Holds{}, Ledgers: &budget.Ledgers{Live: store, Namespace: "holdfast-system", Identity: id}}
}

// TestEvictionOfAPodTheCacheShowsGoingIsJudgedOnThePodOfTheName: the scene of
// TestAdmittedEvictionReadsTheDomainOfThePodAsTheAPIServerHasIt, with the cache showing the
// old zk-1 terminating and still Ready, as kube leaves a pod in its grace period. The
// eviction of a pod already going is kube's to answer, unguarded; but kube evicts the pod
// of the name, the new zk-1 in zone b, Ready: it is judged (429).
func TestEvictionOfAPodTheCacheShowsGoingIsJudgedOnThePodOfTheName(t *testing.T) {
	ctx := context.Background()
	objs, pods, p := zkScene()
	clk := clocktesting.NewFakeClock(time.Now())
	store := fake.NewClientBuilder().Build()
	if resp := zkHandler("replica-0", p, clk, store, objs, utiltesting.NewMemReader(nil, objs...)).Handle(ctx, podEviction(pods[0], "alice")); !resp.Allowed {
		t.Fatalf("zk-0's eviction: %+v, want admitted", resp.Result)
	}
	clk.Step(10 * time.Second)
	zk0 := recreated(pods[0], clk.Now(), false) // its replacement, not Ready yet
	going := pods[1].DeepCopy()                 // as the cache last saw it: deleted, in its grace period, Ready
	going.DeletionTimestamp, going.Finalizers = &metav1.Time{Time: clk.Now().Add(-8 * time.Second)}, []string{"example.com/drain"}
	zk1 := recreated(pods[1], clk.Now().Add(-5*time.Second), true)
	zk1.Spec.NodeName = "node-b-2"
	zk1.Status.Conditions[0].LastTransitionTime = metav1.NewTime(clk.Now().Add(-time.Second))
	cached, live := swapIn(objs, zk0, going), swapIn(objs, zk0, zk1)
	resp := zkHandler("replica-0", p, clk, store, cached, utiltesting.NewMemReader(nil, live...)).Handle(ctx, podEviction(pods[1], "alice"))
	if resp.Allowed || resp.Result.Code != 429 {
		t.Errorf("the new zk-1 (zone b, Ready) evicted while zone a is down, judged on the cached zk-1 going: %+v, want 429", resp.Result)
	}
	// Control: the pod of the name is the one going: kube's to answer.
	if resp := zkHandler("replica-0", p, clk, store, cached, utiltesting.NewMemReader(nil, cached...)).Handle(ctx, podEviction(pods[1], "alice")); !resp.Allowed {
		t.Errorf("the eviction of a pod already going: %+v, want admitted", resp.Result)
	}
}

// TestExemptEvictionRecordsThePodOfTheName: an exempt requester's eviction of a Ready pod
// is recorded, so that every replica counts it (E1). Judged on a cache that still shows
// the old zk-1 on node-a-1, it recorded that pod and zone a; kube evicted the new zk-1 in
// zone b, and a replica whose cache was up to date matched the record to no pod, counted
// no zone down and let zone a go: two zones down under a topologyBudget of one. The
// record is of the pod of the name as the API server has it; and one the cache showed not
// Ready or going, found Ready on the API server, was admitted unrecorded.
func TestExemptEvictionRecordsThePodOfTheName(t *testing.T) {
	ctx := context.Background()
	objs, pods, p := zkScene()
	p.Spec.Exemptions = v1alpha1.Exemptions{Users: []string{"bob"}}
	clk := clocktesting.NewFakeClock(time.Now())
	zk1 := recreated(pods[1], clk.Now().Add(-time.Hour), true) // deleted and re-created on zone b's node-b-2, Ready
	zk1.Spec.NodeName = "node-b-2"
	live := swapIn(objs, zk1)
	// replica-0's cache: up to date; still showing the old zk-1 on node-a-1; showing it
	// going (terminating) or not Ready, where the pod of the name is read from the API
	// server and found Ready.
	going, notReady := pods[1].DeepCopy(), pods[1].DeepCopy()
	going.DeletionTimestamp, going.Finalizers = &metav1.Time{Time: clk.Now().Add(-time.Second)}, []string{"example.com/drain"}
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	for stale, cached := range map[string][]client.Object{"": live, "old pod Ready": objs,
		"old pod going": swapIn(objs, going), "old pod not Ready": swapIn(objs, notReady)} {
		store := fake.NewClientBuilder().Build()
		if resp := zkHandler("replica-0", p, clk, store, cached, utiltesting.NewMemReader(nil, live...)).Handle(ctx, podEviction(pods[1], "bob")); !resp.Allowed {
			t.Fatalf("bob is exempt: %+v", resp.Result)
		}
		// replica-1's cache is the API server's: kube has not deleted the new zk-1 yet.
		resp := zkHandler("replica-1", p, clk, store, live, utiltesting.NewMemReader(nil, live...)).Handle(ctx, podEviction(pods[0], "alice"))
		if resp.Allowed {
			t.Errorf("cache %q: zk-0 (zone a) admitted on another replica right after the new zk-1 (zone b) was evicted, under a topologyBudget of one", stale)
		}
	}
}

// getCounter counts the Gets it serves, by key.
type getCounter struct {
	client.Reader
	gets map[string]int
}

func (c *getCounter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.gets[key.String()]++
	return c.Reader.Get(ctx, key, obj, opts...)
}

// TestAdmittedEvictionReadsANewNodeOnce: the evicted pod's node is not in the node cache
// yet (it joined a moment ago): it is read from the API server once, not again when the
// eviction is confirmed on the pods read live and the pod of the name is the same.
func TestAdmittedEvictionReadsANewNodeOnce(t *testing.T) {
	objs, pods, p := zkScene()
	cached := slices.DeleteFunc(slices.Clone(objs), func(o client.Object) bool { return o.GetName() == "node-a-0" })
	live := &getCounter{Reader: utiltesting.NewMemReader(nil, objs...), gets: map[string]int{}}
	h := zkHandler("replica-0", p, clocktesting.NewFakeClock(time.Now()), fake.NewClientBuilder().Build(), cached, live)
	if resp := h.Handle(context.Background(), podEviction(pods[0], "alice")); !resp.Allowed {
		t.Fatalf("zk-0's eviction: %+v, want admitted", resp.Result)
	}
	if n := live.gets["/node-a-0"]; n != 1 {
		t.Errorf("node-a-0 read from the API server %d times, want 1 (gets: %v)", n, live.gets)
	}
}

// uidLog records each Event's reason and the UID of the object it is about.
type uidLog struct{ events []string }

func (l *uidLog) Eventf(regarding, _ runtime.Object, _, reason, _, _ string, _ ...interface{}) {
	m, _ := meta.Accessor(regarding)
	l.events = append(l.events, reason+" "+string(m.GetUID()))
}

// TestEvictionOfARecreatedPodIsJudgedOnItsLabels: zk-0 was evicted a moment ago (its
// replacement not Ready), and zk-1 was re-created, on its node, from a template that adds
// tier: strict, a label the policy "strict" selects (at most one pod unavailable). This
// replica's cache still shows the old zk-1, which only the zoned policy selects: judged on
// its labels, the eviction is admitted (zone a is the zone already down). kube evicts the
// new zk-1, so the policies are matched on the labels the API server has: "strict" holds
// it (429).
func TestEvictionOfARecreatedPodIsJudgedOnItsLabels(t *testing.T) {
	ctx := context.Background()
	objs, pods, p := zkScene()
	strict := tierPolicy("strict")
	clk := clocktesting.NewFakeClock(time.Now())
	store := fake.NewClientBuilder().Build()
	if resp := zkHandler("replica-0", p, clk, store, append(objs, &strict), utiltesting.NewMemReader(nil, objs...)).Handle(ctx, podEviction(pods[0], "alice")); !resp.Allowed {
		t.Fatalf("zk-0's eviction: %+v, want admitted", resp.Result)
	}
	clk.Step(10 * time.Second)
	zk0 := recreated(pods[0], clk.Now(), false) // its replacement, not Ready yet
	zk1 := recreated(pods[1], clk.Now().Add(-5*time.Second), true)
	zk1.Labels = map[string]string{"app": "agent", "tier": "strict"}
	cached, live := swapIn(objs, zk0), swapIn(objs, zk0, zk1)
	resp := zkHandler("replica-0", p, clk, store, append(cached, &strict), utiltesting.NewMemReader(nil, live...)).Handle(ctx, podEviction(pods[1], "alice"))
	if resp.Allowed || resp.Result.Code != 429 || !strings.Contains(resp.Result.Message, "strict") {
		t.Errorf("the new zk-1, which \"strict\" selects, evicted while zk-0 is down, judged on the cached zk-1's labels: %+v, want 429 by strict", resp.Result)
	}
	// Control: the pod of the name is the cached one, which "strict" does not select.
	if resp := zkHandler("replica-0", p, clk, store, append(cached, &strict), utiltesting.NewMemReader(nil, cached...)).Handle(ctx, podEviction(pods[1], "alice")); !resp.Allowed {
		t.Errorf("zk-1 as cached, in the zone already down: %+v, want admitted", resp.Result)
	}
}

// TestEvictionOfAPodRecreatedIntoASelectionIsReadLive: the policy "strict" selects pods
// labelled tier: strict (at most one unavailable), and the StatefulSet zk's template has
// had that label since a moment ago: zk-0 is its new pod, not Ready yet, and zk-1 was
// re-created with it too, but this replica's cache still shows the old zk-1, without it.
// No policy selects the cached zk-1, so its eviction would pass as no policy's; kube
// evicts the new zk-1, which "strict" selects. Since the template's labels are selected,
// the pod is read from the API server: 429. A pod the API server shows without the label
// (not yet replaced) passes, as does one whose read fails (best effort).
func TestEvictionOfAPodRecreatedIntoASelectionIsReadLive(t *testing.T) {
	ctx := context.Background()
	objs, pods, _ := zkScene()
	strict := tierPolicy("strict")
	strictLabels := map[string]string{"app": "agent", "tier": "strict"}
	sts := objs[0].(*appsv1.StatefulSet).DeepCopy()
	sts.Spec.Template.Labels = strictLabels
	clk := clocktesting.NewFakeClock(time.Now())
	zk0 := recreated(pods[0], clk.Now(), false) // its replacement, not Ready yet
	zk1 := recreated(pods[1], clk.Now().Add(-5*time.Second), true)
	zk0.Labels, zk1.Labels = strictLabels, strictLabels
	cached := swapIn(objs, sts, zk0)
	evict := func(live client.Reader) admission.Response {
		return zkHandler("replica-0", strict, clk, fake.NewClientBuilder().Build(), cached, live).Handle(ctx, podEviction(pods[1], "alice"))
	}
	if resp := evict(utiltesting.NewMemReader(nil, swapIn(objs, sts, zk0, zk1)...)); resp.Allowed || resp.Result.Code != 429 {
		t.Errorf("the new zk-1, which \"strict\" selects, evicted while zk-0 is down, passed as the cached zk-1: %+v, want 429", resp.Result)
	}
	if resp := evict(utiltesting.NewMemReader(nil, cached...)); !resp.Allowed {
		t.Errorf("zk-1 not yet replaced, which no policy selects: %+v, want admitted", resp.Result)
	}
	failing := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return context.DeadlineExceeded
	}})
	if resp := evict(failing); !resp.Allowed {
		t.Errorf("the pod's live read failed: %+v, want judged on the cache's labels (admitted)", resp.Result)
	}
}

// TestEvictionOfARecreatedPodOutOfEverySelectionIsRecorded: the policy "old" selects the
// pods labelled tier: old (at most one unavailable in zk's group). zk-1 was re-created
// with tier: new, which no policy selects; replica-0's cache still shows it with tier: old.
// Its eviction is admitted on the pod of the name as read (no policy's), and recorded all
// the same: it takes a Ready pod of the group down, and replica-1, whose cache still shows
// zk-1 Ready, must count it before letting zk-0 go too.
func TestEvictionOfARecreatedPodOutOfEverySelectionIsRecorded(t *testing.T) {
	ctx := context.Background()
	objs, pods, _ := zkScene()
	old := tierPolicy("old")
	for i, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			p = p.DeepCopy()
			p.Labels = map[string]string{"app": "agent", "tier": "old"}
			objs[i] = p
		}
	}
	clk := clocktesting.NewFakeClock(time.Now())
	store := fake.NewClientBuilder().Build()
	zk1 := recreated(objs[slices.IndexFunc(objs, func(o client.Object) bool { return o.GetName() == "zk-1" })].(*corev1.Pod), clk.Now().Add(-time.Minute), true)
	zk1.Labels = map[string]string{"app": "agent", "tier": "new"}
	live := swapIn(objs, zk1)
	if resp := zkHandler("replica-0", old, clk, store, objs, utiltesting.NewMemReader(nil, live...)).Handle(ctx, podEviction(pods[1], "alice")); !resp.Allowed {
		t.Fatalf("the new zk-1, which no policy selects: %+v, want admitted", resp.Result)
	}
	clk.Step(time.Second)
	if resp := zkHandler("replica-1", old, clk, store, live, utiltesting.NewMemReader(nil, live...)).Handle(ctx, podEviction(pods[0], "alice")); resp.Allowed {
		t.Errorf("zk-0's eviction on a replica that has not seen zk-1 go: admitted, want deferred (zk-1's eviction recorded)")
	}
}
