package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestCondemnedOrdinalIsNoReplacement: an OnDelete StatefulSet (OrderedReady) with a
// staged template B is scaled from 3 to 2 while db-1 is not Ready: kube's StatefulSet
// controller does not delete the condemned db-2 while a pod below it is unhealthy
// (updateStatefulSet, monotonic scale-down). A drain evicts db-2. kube creates no pod for
// ordinal 2 (it is outside [0, replicas)): the eviction starts nothing, yet it is judged as
// B's start and refused by the Deny window for as long as the window lasts.
func TestCondemnedOrdinalIsNoReplacement(t *testing.T) {
	sc := newDBScene()
	t0, ns, reader, sts := sc.t0, sc.ns, sc.reader, sc.sts
	journals := &journal.Store{}
	reader.Put(sc.revision("a", "v1", 1, t0.Add(-3*time.Hour)))
	pods := map[string]*corev1.Pod{}
	for i := range 3 {
		pod := sc.pod(i)
		pods[pod.Name] = pod
		reader.Put(pod)
	}
	// observe is the leader's journal recorder looking at the StatefulSet the cache holds.
	observe := func(at time.Time) {
		j := observeNamed(reader, v1alpha1.KindStatefulSet, "tenant-a", "db", journals.Get(v1alpha1.KindStatefulSet, "tenant-a", "db"), nil, at)
		cm, err := journal.Encode(j, "holdfast-system")
		if err != nil {
			t.Fatal(err)
		}
		journals.Add(cm)
	}
	reader.Put(sts)
	observe(t0.Add(-3 * time.Hour))
	observe(t0.Add(-2 * time.Hour))
	// B staged (before the window), db-1 goes unready, then the scale to 2 (a scale passes the window).
	sts.Generation, sts.Spec.Template = 2, sc.tmpl("v2")
	reader.Put(sc.revision("b", "v2", 2, t0.Add(-2*time.Hour)))
	pods["db-1"].Status.Conditions[0].Status = corev1.ConditionFalse
	reader.Put(pods["db-1"])
	sts.Generation, sts.Spec.Replicas = 3, ptr.To(int32(2))
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 2, CurrentReplicas: 3, UpdatedReplicas: 0,
		CurrentRevision: "db-a", UpdateRevision: "db-b"}
	reader.Put(sts)
	observe(t0.Add(-time.Minute))

	h := &Handler{Reader: reader, Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), Matcher: policy.NewMatcher(), Journals: journals}
	d, starts, err := h.Replacement(context.Background(), budget.Deadline{}, pods["db-2"], ns.Labels, authenticationv1.UserInfo{Username: "system:serviceaccount:kube-system:node-upgrader"})
	if err != nil {
		t.Fatal(err)
	}
	if starts || len(d) != 0 {
		t.Errorf("the eviction of db-2, an ordinal kube does not re-create (replicas 2), is judged as the start of the staged template: starts=%v %v", starts, d.Messages(0))
	}
	// Control: db-0 (ordinal inside the range) is a replacement, rightly judged.
	if vs, starts, err := h.Replacement(context.Background(), budget.Deadline{}, pods["db-0"], ns.Labels, authenticationv1.UserInfo{Username: "x"}); err != nil || !starts || len(vs) == 0 {
		t.Errorf("the eviction of db-0, whose replacement is the staged template's first pod, in the Deny window: starts=%v %v %v, want the window's refusal", starts, vs, err)
	}
}

// TestReplacementReadsTheWorkloadLive: an OnDelete StatefulSet's edit to v2 is admitted and
// a DELETE of db-0 follows at once, before this replica's cache shows the edit: kube's
// controller makes db-0's replacement from v2, the staged template's first pod. Judged on
// the cached v1 (which every pod runs) it started nothing and passed a Deny window; the
// workload is read from the API server, and the DELETE is refused. A workload the API
// server no longer has replaces nothing; an API server that does not answer is an error
// (the eviction guard answers it "not now").
func TestReplacementReadsTheWorkloadLive(t *testing.T) {
	sc := newDBScene()
	t0, ns, reader, sts := sc.t0, sc.ns, sc.reader, sc.sts
	reader.Put(sc.revision("a", "v1", 1, t0.Add(-3*time.Hour)))
	pod := sc.pod(0)
	reader.Put(pod)
	reader.Put(sts)
	edited := sts.DeepCopy()
	edited.Generation, edited.Spec.Template = 2, sc.tmpl("v2")

	judge := func(live client.Reader) (decision.Violations, bool, error) {
		h := &Handler{Reader: reader, Live: live, Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), Matcher: policy.NewMatcher(), Journals: &journal.Store{}}
		return h.Replacement(context.Background(), budget.Deadline{}, pod, ns.Labels, authenticationv1.UserInfo{Username: "alice"})
	}
	if vs, starts, err := judge(nil); err != nil || starts || len(vs) != 0 {
		t.Fatalf("control, from the cache alone (v1, every pod's): starts=%v %v %v, want nothing started", starts, vs, err)
	}
	if vs, starts, err := judge(utiltesting.NewMemReader(nil, edited)); err != nil || !starts || vs.Action() != decision.Deny {
		t.Errorf("the DELETE right after the edit to v2, read live: starts=%v %v %v, want the Deny window's refusal of v2's first pod", starts, vs, err)
	}
	if vs, starts, err := judge(utiltesting.NewMemReader(nil)); err != nil || starts || len(vs) != 0 {
		t.Errorf("a StatefulSet the API server no longer has: starts=%v %v %v, want nothing started", starts, vs, err)
	}
	recreated := edited.DeepCopy()
	recreated.UID = "uid-db-2"
	if vs, starts, err := judge(utiltesting.NewMemReader(nil, recreated)); err != nil || starts || len(vs) != 0 {
		t.Errorf("a StatefulSet of the name created again (another UID, which adopts the pod): starts=%v %v %v, want nothing judged here", starts, vs, err)
	}
	slow := interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewServerTimeout(appsv1.Resource("statefulsets"), "get", 1)
		},
	})
	if _, _, err := judge(slow); !apierrors.IsServerTimeout(err) {
		t.Errorf("the API server timing out: %v, want its error", err)
	}
	// A workload the cache shows, which no policy selects: a failed read leaves it to the
	// cache, as before every pod's workload was read (a drain of pods no rule holds does not
	// wait on the API server).
	unselected := sts.DeepCopy()
	unselected.Labels = map[string]string{"tier": "cache"}
	reader.Put(unselected)
	if vs, starts, err := judge(slow); err != nil || starts || len(vs) != 0 {
		t.Errorf("the API server timing out, the cache's workload selected by no policy: starts=%v %v %v, want nothing judged and no error", starts, vs, err)
	}
}

// dbScene is tenant-a's OnDelete StatefulSet db (3 replicas of template v1, revision db-a,
// 3 h old) selected by the RolloutPolicy dbs, whose Deny window freeze is open at t0 and
// an hour on; reader is the cache, holding the namespace and the policy.
type dbScene struct {
	t0     time.Time
	ns     *corev1.Namespace
	reader *utiltesting.MemReader
	sts    *appsv1.StatefulSet
}

func newDBScene() *dbScene {
	sc := &dbScene{t0: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	p := utiltesting.MakeRolloutPolicy("dbs").Kinds(v1alpha1.KindStatefulSet).Selector(map[string]string{"tier": "db"}).Obj()
	p.Spec.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 * * * *", Duration: metav1.Duration{Duration: 59 * time.Minute}, Action: v1alpha1.WindowDeny}}
	sc.ns = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{corev1.LabelMetadataName: "tenant-a"}}}
	sc.reader = utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, sc.ns, p)
	sc.sts = &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "db", UID: "uid-db", Generation: 1, Labels: map[string]string{"tier": "db"}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: sc.tmpl("v1"),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3,
			CurrentRevision: "db-a", UpdateRevision: "db-a"}}
	return sc
}

// tmpl is the StatefulSet's pod template running db:tag.
func (sc *dbScene) tmpl(tag string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "db", "tier": "db"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "db", Image: "db:" + tag}}}}
}

// revision is the StatefulSet's ControllerRevision db-<hash> of template tag.
func (sc *dbScene) revision(hash, tag string, n int64, created time.Time) *appsv1.ControllerRevision {
	raw, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": sc.tmpl(tag)}})
	return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "db-" + hash, UID: types.UID("cr-" + hash),
		Labels: map[string]string{"app": "db"}, CreationTimestamp: metav1.NewTime(created), OwnerReferences: controlledBy(sc.sts)}, Revision: n, Data: runtime.RawExtension{Raw: raw}}
}

// pod is ordinal i, of revision db-a, Ready for 3 h on node-<i>.
func (sc *dbScene) pod(i int) *corev1.Pod {
	at := metav1.NewTime(sc.t0.Add(-3 * time.Hour))
	return &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: fmt.Sprintf("db-%d", i),
		UID: types.UID(fmt.Sprintf("pod-db-%d", i)), Labels: map[string]string{"app": "db", "tier": "db", appsv1.ControllerRevisionHashLabelKey: "db-a"},
		CreationTimestamp: at, OwnerReferences: controlledBy(sc.sts)}, Spec: corev1.PodSpec{NodeName: fmt.Sprintf("node-%d", i)},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at}}}}
}

// TestReplacementReadsANamespaceRelabelledInLive: the policy selects db's namespace by a
// label the cache does not show yet (the namespace was relabelled into the selection a
// moment ago, and the edit to v2 staged since). The eviction guard passes the labels its
// cache holds; judged on them, db-0's replacement (v2's first pod) started nothing and
// passed the Deny window. The namespace is read live, and the DELETE is refused. Read live
// and still outside, nothing is judged; a failed read judges on the cache's labels, as the
// rollout guard's own requests do.
func TestReplacementReadsANamespaceRelabelledInLive(t *testing.T) {
	sc := newDBScene()
	t0, reader, sts := sc.t0, sc.reader, sc.sts
	p := utiltesting.MakeRolloutPolicy("dbs").Kinds(v1alpha1.KindStatefulSet).Selector(map[string]string{"tier": "db"}).Obj()
	p.Spec.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	p.Spec.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 * * * *", Duration: metav1.Duration{Duration: 59 * time.Minute}, Action: v1alpha1.WindowDeny}}
	reader.Put(p)
	reader.Put(sc.revision("a", "v1", 1, t0.Add(-3*time.Hour)))
	pod := sc.pod(0)
	reader.Put(pod)
	edited := sts.DeepCopy()
	edited.Generation, edited.Spec.Template = 2, sc.tmpl("v2")
	reader.Put(edited)
	in := sc.ns.DeepCopy()
	in.Labels["env"] = "prod"

	judge := func(live client.Reader) (decision.Violations, bool, error) {
		h := &Handler{Reader: reader, Live: live, Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), Matcher: policy.NewMatcher(), Journals: &journal.Store{}}
		return h.Replacement(context.Background(), budget.Deadline{}, pod, sc.ns.Labels, authenticationv1.UserInfo{Username: "alice"})
	}
	if vs, starts, err := judge(utiltesting.NewMemReader(nil, edited, in)); err != nil || !starts || vs.Action() != decision.Deny {
		t.Errorf("the namespace relabelled in, read live: starts=%v %v %v, want the Deny window's refusal of v2's first pod", starts, vs, err)
	}
	if vs, starts, err := judge(utiltesting.NewMemReader(nil, edited, sc.ns)); err != nil || starts || len(vs) != 0 {
		t.Errorf("the namespace outside the selection, read live: starts=%v %v %v, want nothing judged", starts, vs, err)
	}
	failing := interceptor.NewClient(fake.NewClientBuilder().WithObjects(edited, in).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if key.Namespace == "" { // the namespace (cluster-scoped), read as metadata
				return apierrors.NewServerTimeout(corev1.Resource("namespaces"), "get", 1)
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})
	if vs, starts, err := judge(failing); err != nil || starts || len(vs) != 0 {
		t.Errorf("the namespace's live read failing: starts=%v %v %v, want judged on the cache's labels (nothing)", starts, vs, err)
	}
}

// partitionHeld puts db in the scene held by a partition at its replicas with its template
// v2 staged (update revision db-b, current db-a of v1), revisions db-x (v0), db-a and db-b,
// and its three pods running revision db-<podRev>; it returns db-0.
func (sc *dbScene) partitionHeld(podRev string) *corev1.Pod {
	t0, reader, sts := sc.t0, sc.reader, sc.sts
	sts.Generation, sts.Status.ObservedGeneration = 2, 2
	sts.Spec.Template = sc.tmpl("v2")
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(int32(3))}}
	sts.Status.UpdateRevision, sts.Status.UpdatedReplicas = "db-b", 0
	if podRev != "a" {
		sts.Status.CurrentReplicas = 0 // kube counts the pods of the current revision
	}
	reader.Put(sts)
	reader.Put(sc.revision("x", "v0", 1, t0.Add(-5*time.Hour)))
	reader.Put(sc.revision("a", "v1", 2, t0.Add(-3*time.Hour)))
	reader.Put(sc.revision("b", "v2", 3, t0.Add(-time.Hour)))
	var first *corev1.Pod
	for i := range 3 {
		p := sc.pod(i)
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = "db-" + podRev
		reader.Put(p)
		if i == 0 {
			first = p
		}
	}
	return first
}

// TestPartitionHeldStatefulSetMakesPodsOfItsCurrentRevision: db held by a partition at its
// replicas, its template v2 staged. kube makes a deleted ordinal, and the new ordinals of
// a scale (below the partition), from the current revision, not the template: when that
// is db-a (v1), which the pods run, nothing starts; when the pods run v0 (db-x, adopted)
// and db-a has none, db-0's replacement, or a scale to 4, is v1's first pod, a start the
// Deny window refuses.
func TestPartitionHeldStatefulSetMakesPodsOfItsCurrentRevision(t *testing.T) {
	for _, tc := range []struct {
		name   string
		podRev string
		starts bool
	}{
		{"the pods run the current revision", "a", false},
		{"the pods run another revision", "x", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := newDBScene()
			pod := sc.partitionHeld(tc.podRev)
			h := &Handler{Reader: sc.reader, Decoder: admission.NewDecoder(informer.NewScheme()), Clock: clocktesting.NewFakePassiveClock(sc.t0.Add(time.Minute)),
				Matcher: policy.NewMatcher(), Journals: &journal.Store{}}
			vs, starts, err := h.Replacement(context.Background(), budget.Deadline{}, pod, sc.ns.Labels, authenticationv1.UserInfo{Username: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			if starts != tc.starts || (tc.starts && vs.Action() != decision.Deny) {
				t.Errorf("db-0's replacement: starts=%v %v, want starts=%v (refused by the window when it does)", starts, vs, tc.starts)
			}
			scaled := sc.sts.DeepCopy()
			scaled.Generation, scaled.Spec.Replicas = 3, ptr.To(int32(4))
			scaled.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(4))
			req := request(admissionv1.Update, "StatefulSet", mustJSON(t, scaled), mustJSON(t, sc.sts))
			req.Resource.Resource, req.Name = "statefulsets", "db"
			if resp := h.Handle(context.Background(), req); resp.Allowed == tc.starts {
				t.Errorf("the scale to 4 under a partition of 4: allowed=%v %v, want allowed=%v", resp.Allowed, resp.Result, !tc.starts)
			}
		})
	}
}

// TestCanaryOrdinalBelowThePartitionIsMadeFromTheCurrentRevision: db rolls v2 (db-b) under
// a partition of 1 of its 3 replicas; db-1 and db-2 run it, db-0 runs v0 (db-x, adopted),
// and its current revision db-a (v1) has no pod left. kube re-creates db-0, below the
// partition, from db-a (newVersionedStatefulSetPod): its eviction starts v1 again, which
// the Deny window refuses. db-1's replacement, at the partition, is v2's, which has pods.
func TestCanaryOrdinalBelowThePartitionIsMadeFromTheCurrentRevision(t *testing.T) {
	sc := newDBScene()
	first := sc.partitionHeld("x")
	sts := sc.sts.DeepCopy()
	sts.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(int32(1))
	sts.Status.UpdatedReplicas = 2
	sc.reader.Put(sts)
	var second *corev1.Pod
	for i := 1; i < 3; i++ {
		p := sc.pod(i)
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = "db-b"
		sc.reader.Put(p)
		if i == 1 {
			second = p
		}
	}
	h := &Handler{Reader: sc.reader, Decoder: admission.NewDecoder(informer.NewScheme()), Clock: clocktesting.NewFakePassiveClock(sc.t0.Add(time.Minute)),
		Matcher: policy.NewMatcher(), Journals: &journal.Store{}}
	for _, c := range []struct {
		pod    *corev1.Pod
		starts bool
	}{{first, true}, {second, false}} {
		vs, starts, err := h.Replacement(context.Background(), budget.Deadline{}, c.pod, sc.ns.Labels, authenticationv1.UserInfo{Username: "alice"})
		if err != nil {
			t.Fatal(err)
		}
		if starts != c.starts || (c.starts && vs.Action() != decision.Deny) {
			t.Errorf("%s's replacement: starts=%v %v, want starts=%v (refused by the window when it does)", c.pod.Name, starts, vs, c.starts)
		}
	}
}

// TestReplacementsHistoryReadEndsByTheRequestsDeadline: the eviction of db-0, whose
// replacement would be the staged template's first pod, reads the StatefulSet's history;
// where no synced watch holds it the read goes to the API server, and it ends by the
// eviction's one deadline: an answer in time for the webhook's timeout ("not now"), not
// the API server giving up on holdfast.
func TestReplacementsHistoryReadEndsByTheRequestsDeadline(t *testing.T) {
	sc := newDBScene()
	t0, ns, reader, sts := sc.t0, sc.ns, sc.reader, sc.sts
	reader.Put(sc.revision("a", "v1", 1, t0.Add(-3*time.Hour)))
	pod := sc.pod(0)
	reader.Put(pod)
	sts.Generation, sts.Spec.Template = 2, sc.tmpl("v2")
	reader.Put(sc.revision("b", "v2", 2, t0.Add(-2*time.Hour)))
	reader.Put(sts)
	h := &Handler{Reader: revisionsGoLive{reader}, Clock: clocktesting.NewFakePassiveClock(t0.Add(time.Minute)), Matcher: policy.NewMatcher(), Journals: &journal.Store{}}
	began := time.Now()
	_, _, err := h.Replacement(context.Background(), (&budget.Ledgers{Timeout: 100 * time.Millisecond}).Deadline(), pod, ns.Labels, authenticationv1.UserInfo{Username: "alice"})
	if took := time.Since(began); err == nil || took > 2*time.Second {
		t.Errorf("the history read the API server does not answer: err %v after %s, want an error by the 100ms deadline", err, took)
	}
}

// revisionsGoLive is a cache that passes ControllerRevision lists on to an API server that
// does not answer (for 5 s), bounded as podscope bounds its live reads.
type revisionsGoLive struct{ client.Reader }

func (r revisionsGoLive) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*appsv1.ControllerRevisionList); !ok {
		return r.Reader.List(ctx, list, opts...)
	}
	ctx, cancel := informer.BoundLive(ctx)
	defer cancel()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(5 * time.Second):
		return context.DeadlineExceeded
	}
}
