package eviction

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/controller"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8sevents "k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/policy"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// The eviction guard's model (docs/invariants.md, "How they are proven"): a small
// simulation of a cluster's groups of pods on nodes, their controllers replacing evicted
// pods, pods going NotReady, two holdfast replicas whose caches lag and whose clocks
// differ by up to budget.MaxClockSkew, a shared ledger store that fails the way a busy
// API server does, and drainers; holdfast's real Handler decides every eviction. After
// every step the invariants E1–E4 are checked against the simulated cluster, never
// against holdfast's answers; at the end a kubectl-style drain of a node must finish in
// bounded time (E5).

var (
	modelSequences = flag.Int("model.sequences", 2000, "sequences the eviction model explores (make fuzz runs more)")
	modelTrace     = flag.Bool("model.trace", false, "print every eviction the model sends and the pods after it (for replaying one sequence)")
)

const (
	modelNamespace = "agents"
	grace          = 2 * time.Second // how long an evicted pod terminates
	maxReadyDelay  = 6 * time.Second // how long a replacement takes to become Ready
	maxCacheLag    = 3 * time.Second // how stale a replica's cache may be
	drainRetry     = 5 * time.Second // kubectl drain retries a 429 every 5 s
)

// modelOp is one generated operation; a failing sequence prints as a list of them.
type modelOp struct {
	Kind    string
	Pod     int // index into the live pods, modulo their number
	Pod2    int
	Replica int
	Drainer string
	DryRun  bool
	Millis  int
	Variant int
}

func (o modelOp) String() string {
	return fmt.Sprintf("{Kind: %q, Pod: %d, Pod2: %d, Replica: %d, Drainer: %q, DryRun: %t, Millis: %d, Variant: %d},",
		o.Kind, o.Pod, o.Pod2, o.Replica, o.Drainer, o.DryRun, o.Millis, o.Variant)
}

var opKinds = []string{"evict", "evict", "evict", "race", "tick", "tick", "notReady", "recover", "sync", "apiError", "policy", "pause", "sweep"}

type modelConfig struct {
	Seed      uint64
	Kind      v1alpha1.WorkloadKind // the guarded Deployment or StatefulSet
	Replicas  int32
	Nodes     int
	Budget    intstr.IntOrString
	Cooldown  time.Duration
	MinReady  int32
	Unhealthy policyv1.UnhealthyPodEvictionPolicyType
	Offsets   [2]time.Duration
	Lags      [2]time.Duration
}

func configFor(seed uint64) modelConfig {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	budgets := []intstr.IntOrString{intstr.FromInt32(1), intstr.FromInt32(1), intstr.FromInt32(2), intstr.FromString("34%")}
	c := modelConfig{Seed: seed, Kind: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet}[r.IntN(2)],
		Replicas: 3 + r.Int32N(3), Nodes: 3 + r.IntN(2), Budget: budgets[r.IntN(len(budgets))],
		Cooldown: []time.Duration{0, 10 * time.Second, 20 * time.Second}[r.IntN(3)], MinReady: []int32{0, 5}[r.IntN(2)],
		Unhealthy: []policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}[r.IntN(2)]}
	for i := range 2 {
		// Offsets within ±budget.MaxClockSkew/2: the replicas' clocks differ by at most budget.MaxClockSkew.
		c.Offsets[i] = time.Duration(r.Int64N(int64(budget.MaxClockSkew))) - budget.MaxClockSkew/2
		c.Lags[i] = time.Duration(r.Int64N(int64(maxCacheLag)))
	}
	return c
}

type mgroup struct {
	kind     v1alpha1.WorkloadKind
	name     string
	uid      types.UID
	replicas int32 // the DaemonSet's is its node count
	guarded  bool
	// lastHealthy is when holdfast last admitted the eviction of a Ready pod (E2).
	lastHealthy time.Time
}

type mpod struct {
	name, uid   string
	g           *mgroup
	node        int
	created     time.Time
	readyAt     time.Time // when it became Ready; zero until it is scheduled and started
	notReady    bool      // NotReady by a health event
	notReadyAt  time.Time
	terminating bool
	goneAt      time.Time
	// slot: holdfast admitted an eviction of an available pod, which this pod (or its
	// replacement) pays back once available again (E1).
	slot bool
}

type policyVersion struct {
	from time.Time
	spec v1alpha1.DisruptionPolicySpec
}

type world struct {
	cfg      modelConfig
	rng      *rand.Rand
	now      time.Time
	groups   []*mgroup
	pods     []*mpod
	cordoned map[int]bool
	policies []policyVersion
	nextUID  int
	replicas [2]*mreplica
	ledger   *ledgerStore
	broken   func(Input) Decision

	ops        []modelOp
	violations []string
	stuck      bool
}

type mreplica struct {
	reader  *utiltesting.MemReader
	synced  time.Time
	clock   *clocktesting.FakePassiveClock
	handler *Handler
}

func newWorld(cfg modelConfig, broken func(Input) Decision) *world {
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 0xd1ce)), now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC),
		cordoned: map[int]bool{}, broken: broken}
	w.ledger = &ledgerStore{w: w, leases: map[string]*coordinationv1.Lease{}}
	spec := v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(cfg.Budget), MinReadySeconds: cfg.MinReady,
		UnhealthyPodEvictionPolicy: ptr.To(cfg.Unhealthy),
		Targets:                    v1alpha1.PodTargets{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "guarded", Operator: metav1.LabelSelectorOpExists}}}}}
	if cfg.Cooldown > 0 {
		spec.Cooldown = &metav1.Duration{Duration: cfg.Cooldown}
	}
	w.policies = []policyVersion{{from: w.now.Add(-time.Hour), spec: spec}}
	w.groups = []*mgroup{
		{kind: cfg.Kind, name: "server", uid: "g-server", replicas: cfg.Replicas, guarded: true},
		{kind: v1alpha1.KindDaemonSet, name: "agent", uid: "g-agent", replicas: int32(cfg.Nodes), guarded: true},
		{kind: v1alpha1.KindDeployment, name: "web", uid: "g-web", replicas: 2},
	}
	for _, g := range w.groups {
		for i := range g.replicas {
			p := w.newPod(g, int(i)%cfg.Nodes, int(i))
			p.readyAt = w.now.Add(-time.Hour)
		}
	}
	for i := range w.replicas {
		r := &mreplica{clock: clocktesting.NewFakePassiveClock(w.now.Add(cfg.Offsets[i]))}
		r.handler = &Handler{Reader: utiltesting.ReaderFunc(func() client.Reader { return r.reader }), APIReader: w.ledger,
			Ledgers: &budget.Ledgers{Live: w.ledger, Namespace: "holdfast-system", Identity: fmt.Sprintf("replica-%d", i)}, Clock: r.clock, Matcher: policy.NewMatcher(), decide: broken}
		w.replicas[i] = r
		w.sync(i)
	}
	return w
}

func (w *world) newPod(g *mgroup, node, ordinal int) *mpod {
	w.nextUID++
	name := fmt.Sprintf("%s-%d", g.name, w.nextUID)
	if g.kind == v1alpha1.KindStatefulSet {
		name = fmt.Sprintf("%s-%d", g.name, ordinal)
	}
	p := &mpod{name: name, uid: fmt.Sprintf("uid-%d", w.nextUID), g: g, node: node, created: w.now}
	w.pods = append(w.pods, p)
	return p
}

func (w *world) spec() v1alpha1.DisruptionPolicySpec { return w.policies[len(w.policies)-1].spec }

// inForce are the policy versions a replica may still decide by: those of the last
// maxCacheLag and the one in force before them.
func (w *world) inForce() []v1alpha1.DisruptionPolicySpec {
	var out []v1alpha1.DisruptionPolicySpec
	for i, v := range w.policies {
		if i == len(w.policies)-1 || w.policies[i+1].from.After(w.now.Add(-maxCacheLag-time.Second)) {
			out = append(out, v.spec)
		}
	}
	return out
}

func maxMinReady(specs []v1alpha1.DisruptionPolicySpec) int32 {
	var m int32
	for _, s := range specs {
		m = max(m, s.MinReadySeconds)
	}
	return m
}

func minMinReady(specs []v1alpha1.DisruptionPolicySpec) int32 {
	m := specs[0].MinReadySeconds
	for _, s := range specs {
		m = min(m, s.MinReadySeconds)
	}
	return m
}

func (p *mpod) ready(now time.Time) bool {
	return !p.terminating && !p.notReady && !p.readyAt.IsZero() && !now.Before(p.readyAt)
}

// longNotReady is a pod that has not been Ready for longer than a cache may lag: every
// replica's view agrees it is not Ready.
func (p *mpod) longNotReady(now time.Time) bool {
	if p.ready(now) || p.terminating {
		return false
	}
	since := p.created
	if p.notReady {
		since = p.notReadyAt
	}
	return now.Sub(since) > maxCacheLag
}

func (p *mpod) available(now time.Time, minReady int32) bool {
	return p.ready(now) && !now.Before(p.readyAt.Add(time.Duration(minReady)*time.Second))
}

// advance moves the true clock on, terminating pods, replacing them and paying back slots.
func (w *world) advance(d time.Duration) {
	for d > 0 {
		step := min(d, 500*time.Millisecond)
		w.now = w.now.Add(step)
		d -= step
		for _, p := range slices.Clone(w.pods) {
			if p.terminating && !w.now.Before(p.goneAt) {
				w.pods = slices.DeleteFunc(w.pods, func(q *mpod) bool { return q == p })
				node := p.node
				if p.g.kind != v1alpha1.KindDaemonSet {
					node = w.schedulable()
				}
				ordinal := 0
				fmt.Sscanf(strings.TrimPrefix(p.name, p.g.name+"-"), "%d", &ordinal)
				r := w.newPod(p.g, node, ordinal)
				r.readyAt = w.now.Add(time.Second + time.Duration(w.rng.Int64N(int64(maxReadyDelay-time.Second))))
				r.slot = p.slot
			}
		}
		paid := minMinReady(w.inForce())
		for _, p := range w.pods {
			if p.slot && p.available(w.now, paid) {
				p.slot = false
			}
		}
	}
}

func (w *world) schedulable() int {
	for {
		if n := w.rng.IntN(w.cfg.Nodes); !w.cordoned[n] {
			return n
		}
	}
}

// objects is the simulated cluster as the API server holds it.
func (w *world) objects() []client.Object {
	spec := w.spec()
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: modelNamespace, Labels: map[string]string{corev1.LabelMetadataName: modelNamespace}}},
		&v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: spec},
		// An invalid policy that no pod of the model can be selected by (E4).
		&v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: v1alpha1.DisruptionPolicySpec{
			Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nothing"}}}}},
	}
	owners := map[*mgroup]client.Object{}
	for _, g := range w.groups {
		meta := metav1.ObjectMeta{Namespace: modelNamespace, Name: g.name, UID: g.uid}
		sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": g.name}}
		switch g.kind {
		case v1alpha1.KindDeployment:
			d := &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(g.replicas), Selector: sel}}
			rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: modelNamespace, Name: g.name + "-rs", UID: g.uid + "-rs",
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}}}
			objs = append(objs, d, rs)
			owners[g] = rs
		case v1alpha1.KindStatefulSet:
			s := &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(g.replicas), Selector: sel}}
			objs = append(objs, s)
			owners[g] = s
		case v1alpha1.KindDaemonSet:
			ds := &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel},
				Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: g.replicas}}
			objs = append(objs, ds)
			owners[g] = ds
		}
	}
	for _, p := range w.pods {
		owner := owners[p.g]
		labels := map[string]string{"app": p.g.name}
		if p.g.guarded {
			labels["guarded"] = "true"
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: modelNamespace, Name: p.name, UID: types.UID(p.uid), Labels: labels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind(ownerKind(owner)))}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", p.node)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if p.terminating {
			pod.DeletionTimestamp = ptr.To(metav1.NewTime(p.goneAt.Add(-grace)))
		}
		status, since := corev1.ConditionFalse, p.readyAt
		if p.ready(w.now) {
			status = corev1.ConditionTrue
		}
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)}}
		objs = append(objs, pod)
	}
	return objs
}

func ownerKind(o client.Object) string {
	switch o.(type) {
	case *appsv1.ReplicaSet:
		return "ReplicaSet"
	case *appsv1.StatefulSet:
		return "StatefulSet"
	default:
		return "DaemonSet"
	}
}

func (w *world) truth() *utiltesting.MemReader {
	return utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, w.objects()...)
}

func (w *world) sync(i int) {
	w.replicas[i].reader, w.replicas[i].synced = w.truth(), w.now
}

// ledgerStore is the API server as the ledger sees it: Leases with resource versions and
// optimistic concurrency, pods read live, and the failures a busy API server answers.
type ledgerStore struct {
	client.Client // only the methods below are called
	w             *world
	leases        map[string]*coordinationv1.Lease
	version       int
	fail          error  // the next lease call fails with it
	onRead        func() // runs once, after a lease read, before the reader goes on
}

// failing is the armed failure, if this call can fail so: a Conflict answers writes only.
func (s *ledgerStore) failing(write bool) error {
	err := s.fail
	if err == nil || (apierrors.IsConflict(err) && !write) {
		return nil
	}
	s.fail = nil
	return err
}

func (s *ledgerStore) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return s.w.truth().Get(ctx, key, obj)
	}
	if err := s.failing(false); err != nil {
		return err
	}
	stored, found := s.leases[key.Name]
	if !found {
		return apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, key.Name)
	}
	stored.DeepCopyInto(l)
	if f := s.onRead; f != nil {
		s.onRead = nil
		f()
	}
	return nil
}

func (s *ledgerStore) Create(_ context.Context, obj client.Object, _ ...client.CreateOption) error {
	if err := s.failing(true); err != nil {
		return err
	}
	l := obj.(*coordinationv1.Lease)
	if _, found := s.leases[l.Name]; found {
		return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "leases"}, l.Name)
	}
	s.version++
	l.ResourceVersion = fmt.Sprint(s.version)
	l.CreationTimestamp = metav1.NewTime(s.w.now)
	s.leases[l.Name] = l.DeepCopy()
	return nil
}

func (s *ledgerStore) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	if err := s.failing(true); err != nil {
		return err
	}
	l := obj.(*coordinationv1.Lease)
	stored, found := s.leases[l.Name]
	switch {
	case !found:
		return apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, l.Name)
	case stored.ResourceVersion != l.ResourceVersion:
		return apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, l.Name, fmt.Errorf("the object has been modified"))
	}
	s.version++
	l.ResourceVersion = fmt.Sprint(s.version)
	s.leases[l.Name] = l.DeepCopy()
	return nil
}

func (s *ledgerStore) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	ll := list.(*coordinationv1.LeaseList)
	for _, l := range s.leases {
		ll.Items = append(ll.Items, *l.DeepCopy())
	}
	return nil
}

func (s *ledgerStore) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	o := client.DeleteOptions{}
	o.ApplyOptions(opts)
	stored, found := s.leases[obj.GetName()]
	if !found {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "leases"}, obj.GetName())
	}
	if o.Preconditions != nil && o.Preconditions.ResourceVersion != nil && *o.Preconditions.ResourceVersion != stored.ResourceVersion {
		return apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, obj.GetName(), fmt.Errorf("precondition failed"))
	}
	delete(s.leases, obj.GetName())
	return nil
}

func (s *ledgerStore) recorded(uid string) bool {
	for _, l := range s.leases {
		var records []budget.Eviction
		_ = json.Unmarshal([]byte(l.Annotations[budget.EvictionsAnnotation]), &records)
		if slices.ContainsFunc(records, func(r budget.Eviction) bool { return string(r.UID) == uid }) {
			return true
		}
	}
	return false
}

func (w *world) violate(format string, args ...any) {
	w.violations = append(w.violations, fmt.Sprintf("at %s: ", w.now.Format("15:04:05.0"))+fmt.Sprintf(format, args...))
}

// evict sends an eviction of p through replica i, as the API server would, and applies
// an admitted one to the cluster; it checks E1–E4 against the cluster. It returns the
// answer's HTTP code (200 for admitted).
func (w *world) evict(i int, p *mpod, dryRun bool) int32 {
	r := w.replicas[i]
	if w.now.Sub(r.synced) > w.cfg.Lags[i] {
		w.sync(i)
	}
	r.clock.SetTime(w.now.Add(w.cfg.Offsets[i]))
	body, _ := json.Marshal(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: modelNamespace, Name: p.name}})
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction",
		Namespace: modelNamespace, Name: p.name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body}, DryRun: ptr.To(dryRun)}}
	specs := w.inForce()
	wasReady, longNotReady := p.ready(w.now), p.longNotReady(w.now)
	// An eviction takes a pod down when every policy in force counts it available.
	wasAvailable := p.available(w.now, maxMinReady(specs))
	resp := r.handler.Handle(context.Background(), req)
	if *modelTrace {
		fmt.Printf("%s r%d evict %s (%s ready=%v avail=%v) -> %v %v\n", w.now.Format("05.0"), i, p.name, p.uid, p.ready(w.now), p.available(w.now, w.cfg.MinReady), resp.Allowed, resp.Result.Message)
		for _, q := range w.pods {
			fmt.Printf("   %s %s node%d ready=%v term=%v slot=%v readyAt=%s\n", q.name, q.uid, q.node, q.ready(w.now), q.terminating, q.slot, q.readyAt.Format("05.0"))
		}
	}
	code := int32(http.StatusOK)
	if !resp.Allowed {
		code = resp.Result.Code
	}
	// What no answer may ever be: holdfast's own fault, a bad request, or a refusal for a
	// budget that is not zero (the model's budgets never resolve to zero).
	if code != http.StatusOK && code != http.StatusTooManyRequests {
		w.violate("eviction of %s answered %d: %s", p.name, code, resp.Result.Message)
	}
	if !p.g.guarded && code != http.StatusOK {
		w.violate("E4: eviction of %s, which no valid policy selects, answered %d: %s", p.name, code, resp.Result.Message)
	}
	alwaysAllow := !slices.ContainsFunc(specs, func(s v1alpha1.DisruptionPolicySpec) bool {
		return *s.UnhealthyPodEvictionPolicy != policyv1.AlwaysAllow
	})
	if p.g.guarded && p.longNotReady(w.now) && alwaysAllow && code != http.StatusOK {
		w.violate("E3: eviction of not-Ready pod %s under AlwaysAllow answered %d: %s", p.name, code, resp.Result.Message)
	}
	if code != http.StatusOK || dryRun || p.terminating || !slices.Contains(w.pods, p) {
		return code
	}
	p.terminating, p.goneAt = true, w.now.Add(grace)
	if !p.g.guarded {
		return code
	}
	if longNotReady && w.ledger.recorded(p.uid) {
		w.violate("E3: the eviction of not-Ready pod %s was recorded", p.name)
	}
	if wasAvailable {
		p.slot = true
		budget := int32(0)
		for _, s := range specs {
			budget = max(budget, policy.Resolve(policy.DisruptionBudget, p.g.kind, s.MaxUnavailable, p.g.replicas))
		}
		slots := int32(0)
		for _, q := range w.pods {
			if q.g == p.g && q.slot {
				slots++
			}
		}
		if slots > budget {
			w.violate("E1: %s/%s has %d pods down through admitted evictions, more than its budget of %d", p.g.kind, p.g.name, slots, budget)
		}
	}
	if wasReady {
		cooldown := time.Duration(1<<63 - 1)
		for _, s := range specs {
			c := time.Duration(0)
			if s.Cooldown != nil {
				c = s.Cooldown.Duration
			}
			cooldown = min(cooldown, c)
		}
		if !p.g.lastHealthy.IsZero() && w.now.Sub(p.g.lastHealthy) < cooldown {
			w.violate("E2: %s/%s had Ready pods evicted %s apart, less than the cooldown of %s", p.g.kind, p.g.name, w.now.Sub(p.g.lastHealthy), cooldown)
		}
		p.g.lastHealthy = w.now
	}
	return code
}

func (w *world) pick(i int) *mpod {
	live := slices.DeleteFunc(slices.Clone(w.pods), func(p *mpod) bool { return p.terminating })
	if len(live) == 0 {
		return nil
	}
	sort.Slice(live, func(a, b int) bool { return live[a].name < live[b].name })
	return live[i%len(live)]
}

var apiFailures = []error{
	apierrors.NewServerTimeout(schema.GroupResource{Resource: "leases"}, "get", 1),
	apierrors.NewTooManyRequests("the API server is overloaded", 1),
	apierrors.NewServiceUnavailable("etcd is unavailable"),
	apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, "ledger", fmt.Errorf("modified")),
}

// step applies one operation.
func (w *world) step(op modelOp) {
	w.ops = append(w.ops, op)
	switch op.Kind {
	case "evict":
		if p := w.pick(op.Pod); p != nil {
			w.evict(op.Replica, p, op.DryRun)
		}
	case "race":
		// Two evictions of pods of one group through both replicas: the second runs to its
		// end between the first's ledger read and its write.
		p, q := w.pick(op.Pod), w.pick(op.Pod2)
		if p == nil || q == nil || p == q {
			return
		}
		w.ledger.onRead = func() { w.evict(1-op.Replica, q, false) }
		w.evict(op.Replica, p, false)
		w.ledger.onRead = nil
	case "tick":
		w.advance(time.Duration(op.Millis) * time.Millisecond)
	case "notReady":
		if p := w.pick(op.Pod); p != nil && !p.notReady {
			p.notReady, p.notReadyAt = true, w.now
		}
	case "recover":
		for _, p := range w.pods {
			if p.notReady {
				p.notReady, p.readyAt = false, w.now
				break
			}
		}
	case "sync":
		w.sync(op.Replica)
	case "apiError":
		w.ledger.fail = apiFailures[op.Variant%len(apiFailures)]
	case "policy":
		cur := w.spec()
		s := *cur.DeepCopy()
		switch op.Variant % 4 {
		case 0:
			s.Cooldown = &metav1.Duration{Duration: time.Duration(op.Millis%30) * time.Second}
		case 1:
			s.MaxUnavailable = ptr.To(intstr.FromInt32(1 + int32(op.Millis%2)))
		case 2:
			s.MinReadySeconds = int32(op.Millis % 8)
		case 3:
			s.UnhealthyPodEvictionPolicy = ptr.To([]policyv1.UnhealthyPodEvictionPolicyType{policyv1.AlwaysAllow, policyv1.IfHealthyBudget}[op.Millis%2])
		}
		w.policies = append(w.policies, policyVersion{from: w.now, spec: s})
	case "pause":
		w.advance(61 * time.Minute)
		w.sync(0)
		w.sync(1)
	case "sweep":
		sw := &controller.LedgerSweeper{Ledgers: &budget.Ledgers{Live: w.ledger, Namespace: "holdfast-system"}, Policies: w.replicas[op.Replica].reader,
			Clock: clocktesting.NewFakePassiveClock(w.now.Add(w.cfg.Offsets[op.Replica]))}
		if _, err := sw.Sweep(context.Background()); err != nil {
			w.violate("sweep: %v", err)
		}
	}
}

// drain is E5: with every pod healthy again, a kubectl-style drain of one node evicts its
// guarded Deployment or StatefulSet pods (it skips DaemonSet pods), retrying 429s every
// 5 s through either replica, and must finish in n × (cooldown + replacement time) + slack.
func (w *world) drain() {
	for _, p := range w.pods {
		p.notReady = false
	}
	w.advance(maxReadyDelay + time.Duration(w.spec().MinReadySeconds)*time.Second + 2*grace)
	w.sync(0)
	w.sync(1)
	node := w.rng.IntN(w.cfg.Nodes)
	w.cordoned[node] = true
	onNode := func() []*mpod {
		var out []*mpod
		for _, p := range w.pods {
			if p.node == node && p.g.guarded && p.g.kind != v1alpha1.KindDaemonSet && !p.terminating {
				out = append(out, p)
			}
		}
		return out
	}
	n := len(onNode())
	var cooldown time.Duration
	for _, v := range w.policies {
		if v.spec.Cooldown != nil {
			cooldown = max(cooldown, v.spec.Cooldown.Duration)
		}
	}
	per := cooldown + grace + maxReadyDelay + time.Duration(maxMinReady(w.inForce()))*time.Second + drainRetry + budget.MaxClockSkew
	bound := time.Duration(n)*per + 30*time.Second
	start := w.now
	// In some sequences the policy changes while the drain runs.
	change := w.rng.IntN(4)
	for attempt := 0; len(onNode()) > 0; attempt++ {
		if attempt == change {
			w.step(modelOp{Kind: "policy", Millis: w.rng.IntN(60), Variant: w.rng.IntN(4)})
			bound += time.Duration(n) * 30 * time.Second // a cooldown of up to 29 s from now on
		}
		if w.now.Sub(start) > bound {
			w.stuck = true
			w.violate("E5: the drain of node-%d (%d pods) is not done after %s (bound %s)", node, n, w.now.Sub(start), bound)
			return
		}
		for _, p := range onNode() {
			if code := w.evict(attempt%2, p, false); code != http.StatusOK && code != http.StatusTooManyRequests {
				w.stuck = true
				return // kubectl drain gives up on anything but a 429
			}
		}
		w.advance(drainRetry)
	}
}

func generate(r *rand.Rand) modelOp {
	op := modelOp{Kind: opKinds[r.IntN(len(opKinds))], Pod: r.IntN(64), Pod2: r.IntN(64), Replica: r.IntN(2),
		Drainer: []string{"kubectl", "autoscaler", "direct"}[r.IntN(3)], DryRun: r.IntN(10) == 0,
		Millis: 200 + r.IntN(8000), Variant: r.IntN(8)}
	return op
}

type modelResult struct {
	sequences, steps, violations, stuck int
	counts                              map[string]int
	first                               *world
}

// explore runs n seeded sequences of 4–12 generated steps, then the drain.
func explore(n int, broken func(Input) Decision) modelResult {
	logf.SetLogger(logr.Discard()) // the handler logs every deferral
	res := modelResult{counts: map[string]int{}}
	for seed := range uint64(n) {
		w := newWorld(configFor(seed), broken)
		steps := 4 + w.rng.IntN(9)
		for range steps {
			op := generate(w.rng)
			res.counts[op.Kind]++
			w.step(op)
		}
		w.drain()
		res.sequences++
		res.steps += steps
		if len(w.violations) > 0 {
			res.violations += len(w.violations)
			if res.first == nil {
				res.first = w
			}
		}
		if w.stuck {
			res.stuck++
		}
	}
	return res
}

// replayCase prints a failing sequence as a table case for TestEvictionModelReplays.
func replayCase(w *world) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{seed: %d, ops: []modelOp{\n", w.cfg.Seed)
	for _, op := range w.ops {
		b.WriteString("\t" + op.String() + "\n")
	}
	b.WriteString("}},\n")
	return b.String()
}

func TestEvictionModel(t *testing.T) {
	res := explore(*modelSequences, nil)
	fmt.Printf("RELIABILITY eviction-model sequences=%d steps=%d invariantViolations=%d stuckDrains=%d\n",
		res.sequences, res.steps, res.violations, res.stuck)
	var kinds []string
	for k := range res.counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var shares []string
	for _, k := range kinds {
		shares = append(shares, fmt.Sprintf("%s=%d", k, res.counts[k]))
		if float64(res.counts[k]) < 0.01*float64(res.steps) {
			t.Errorf("operation %s is %d of %d steps, under 1%%", k, res.counts[k], res.steps)
		}
	}
	fmt.Printf("RELIABILITY eviction-model-operations %s\n", strings.Join(shares, " "))
	if len(res.counts) != len(slices.Compact(slices.Sorted(slices.Values(opKinds)))) {
		t.Errorf("generated %d kinds of operation, want every one of %v", len(res.counts), opKinds)
	}
	if res.first != nil {
		t.Errorf("%d invariant violations, %d stuck drains; the first sequence's:\n%s\nreplay it:\n%s",
			res.violations, res.stuck, strings.Join(res.first.violations, "\n"), replayCase(res.first))
	}
}

// TestEvictionModelCatchesBrokenDecisions is the explorer's own test: handed a decision
// that drops one rule, it must find the invariant that rule keeps.
func TestEvictionModelCatchesBrokenDecisions(t *testing.T) {
	for rule, invariant := range map[string]string{RuleCooldown: "E2:", RuleMaxUnavailable: "E1:"} {
		t.Run("without "+rule, func(t *testing.T) {
			broken := func(in Input) Decision {
				d := Decide(in)
				d.Violations = slices.DeleteFunc(d.Violations, func(v decision.Violation) bool { return v.Rule == rule })
				return d
			}
			res := explore(300, broken)
			if res.first == nil || !slices.ContainsFunc(res.first.violations, func(v string) bool { return strings.Contains(v, invariant) }) {
				t.Fatalf("the explorer did not catch a decision without %s (%d violations, want %s)", rule, res.violations, invariant)
			}
		})
	}
}

// TestEvictionModelReplays replays sequences the explorer printed, as regression cases.
func TestEvictionModelReplays(t *testing.T) {
	cases := []struct {
		seed uint64
		ops  []modelOp
	}{
		// Two replicas race for the last unit of budget, then a drain.
		{seed: 7, ops: []modelOp{
			{Kind: "race", Pod: 0, Pod2: 1, Replica: 0},
			{Kind: "tick", Millis: 3000},
			{Kind: "evict", Pod: 2, Replica: 1},
		}},
		// A not-Ready pod goes at once and does not hold the cooldown.
		{seed: 11, ops: []modelOp{
			{Kind: "notReady", Pod: 1},
			{Kind: "evict", Pod: 1, Replica: 0},
			{Kind: "evict", Pod: 3, Replica: 1},
		}},
	}
	for _, tc := range cases {
		w := newWorld(configFor(tc.seed), nil)
		for _, op := range tc.ops {
			w.step(op)
		}
		w.drain()
		if len(w.violations) > 0 || w.stuck {
			t.Errorf("seed %d: %s", tc.seed, strings.Join(w.violations, "\n"))
		}
	}
}

// TestAuditAndWarnFindingsRecordEvents: an eviction a policy in Audit mode would have
// deferred is admitted with a Normal Event saying so; in Warn mode, with a Warning Event.
func TestAuditAndWarnFindingsRecordEvents(t *testing.T) {
	for mode, want := range map[v1alpha1.Mode]string{v1alpha1.ModeAudit: "Normal EvictionAudit", v1alpha1.ModeWarn: "Warning EvictionWarning"} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := configFor(1)
			cfg.Budget, cfg.Cooldown = intstr.FromInt32(1), time.Hour
			w := newWorld(cfg, nil)
			spec := w.spec()
			spec.Mode = mode
			w.policies = append(w.policies, policyVersion{from: w.now, spec: spec})
			w.sync(0)
			rec := k8sevents.NewFakeRecorder(10)
			w.replicas[0].handler.Events = &events.Limiter{Recorder: rec}
			guarded := slices.DeleteFunc(slices.Clone(w.pods), func(p *mpod) bool { return !p.g.guarded || p.g.kind == v1alpha1.KindDaemonSet })
			for _, p := range guarded[:2] {
				if code := w.evict(0, p, false); code != http.StatusOK {
					t.Fatalf("eviction of %s in %s mode answered %d", p.name, mode, code)
				}
			}
			if len(rec.Events) != 1 {
				t.Fatalf("recorded %d events, want one for the second eviction's findings", len(rec.Events))
			}
			if e := <-rec.Events; !strings.Contains(e, want) || !strings.Contains(e, "/cooldown]") {
				t.Errorf("event %q, want %q naming the cooldown", e, want)
			}
		})
	}
}

// TestEvictionHeldTooLongWarns: when a pod's evictions have been deferred without a break
// for longer than maxHold, holdfast warns on the pod and its node, and keeps deferring:
// maxHold is there to make a hold seen before a managed platform forces the eviction, not
// to end it.
func TestEvictionHeldTooLongWarns(t *testing.T) {
	cfg := configFor(1)
	cfg.Budget, cfg.Cooldown, cfg.Offsets = intstr.FromInt32(1), time.Hour, [2]time.Duration{}
	w := newWorld(cfg, nil)
	spec := w.spec()
	spec.MaxHold = &metav1.Duration{Duration: 20 * time.Second}
	w.policies = append(w.policies, policyVersion{from: w.now, spec: spec})
	w.sync(0)
	rec := k8sevents.NewFakeRecorder(20)
	w.replicas[0].handler.Events = &events.Limiter{Recorder: rec}
	w.replicas[0].handler.Holds = &Holds{}
	guarded := slices.DeleteFunc(slices.Clone(w.pods), func(p *mpod) bool { return !p.g.guarded || p.g.kind == v1alpha1.KindDaemonSet })
	if code := w.evict(0, guarded[0], false); code != http.StatusOK {
		t.Fatalf("the first eviction answered %d", code)
	}
	held := guarded[1]
	for range 6 { // a drain retrying every 5 s for 30 s
		if code := w.evict(0, held, false); code != http.StatusTooManyRequests {
			t.Fatalf("the held eviction answered %d, want 429 (maxHold never allows)", code)
		}
		w.now = w.now.Add(5 * time.Second)
	}
	warnings := 0
	for len(rec.Events) > 0 {
		if e := <-rec.Events; strings.Contains(e, "Warning EvictionHeldTooLong") && strings.Contains(e, "maxHold of 20s") {
			warnings++
		}
	}
	// One on the pod and one on its node (each at most once a minute).
	if warnings != 2 {
		t.Errorf("%d EvictionHeldTooLong warnings, want 2: on the pod and on its node", warnings)
	}
}
