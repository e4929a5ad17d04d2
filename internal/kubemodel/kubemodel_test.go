package kubemodel

import (
	"slices"
	"testing"
	"time"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// world is a workload whose pods are Ready as soon as they exist (unless notReady), on a
// clock that does not matter.
func world(kind v1alpha1.WorkloadKind, replicas int) (*Workload[string], map[*Pod[string]]bool) {
	notReady := map[*Pod[string]]bool{}
	w := &Workload[string]{Kind: kind, Template: "a", Replicas: replicas, MaxUnavailable: 1}
	w.Ready = func(p *Pod[string]) bool { return !p.Terminating && !notReady[p] }
	w.NewPod = func(t string, slot int) *Pod[string] {
		return &Pod[string]{Template: t, Slot: slot, Created: time.Time{}}
	}
	for i := range replicas {
		w.Nodes = append(w.Nodes, i)
	}
	w.Settle(100)
	return w, notReady
}

func templates(w *Workload[string]) map[string]int {
	out := map[string]int{}
	for _, p := range w.Pods {
		out[p.Template]++
	}
	return out
}

func bySlot(w *Workload[string], slot int) *Pod[string] {
	for _, p := range w.Pods {
		if p.Slot == slot && !p.Terminating {
			return p
		}
	}
	return nil
}

func TestDeploymentKeepsSurgeAndUnavailable(t *testing.T) {
	w, notReady := world(v1alpha1.KindDeployment, 3)
	w.MaxSurge, w.MaxUnavailable, w.Template = 1, 0, "b"
	// New pods never Ready: one surge pod, and no old pod removed.
	w.NewPod = func(t string, slot int) *Pod[string] {
		p := &Pod[string]{Template: t, Slot: slot}
		notReady[p] = true
		return p
	}
	w.Settle(100)
	if got := templates(w); got["a"] != 3 || got["b"] != 1 {
		t.Errorf("pods %v, want 3 old and 1 surge pod", got)
	}
}

func TestDeploymentScalesDownNotReadyFirst(t *testing.T) {
	w, notReady := world(v1alpha1.KindDeployment, 3)
	notReady[w.Pods[2]] = true
	w.Replicas = 2
	w.Step()
	if len(w.Pods) != 2 || notReady[w.Pods[0]] || notReady[w.Pods[1]] {
		t.Errorf("want the pod that is not Ready removed; pods %v", w.Pods)
	}
}

func TestStatefulSetOneOrdinalAtATimeFromTheTop(t *testing.T) {
	w, _ := world(v1alpha1.KindStatefulSet, 3)
	w.Graceful, w.Template = true, "b"
	w.Settle(100)
	if p := bySlot(w, 2); p != nil {
		t.Fatalf("ordinal 2 %+v: want it terminating, not yet replaced", p)
	}
	if got := templates(w); got["a"] != 3 {
		t.Errorf("pods %v: want only ordinal 2 terminating", got)
	}
	// Gone: its replacement comes on b, and ordinal 1 goes next.
	for _, p := range w.Pods {
		if p.Terminating {
			w.Remove(p)
		}
	}
	w.Settle(100)
	if p := bySlot(w, 2); p == nil || p.Template != "b" {
		t.Errorf("ordinal 2 %+v, want it recreated on b", p)
	}
	if p := bySlot(w, 1); p != nil {
		t.Errorf("ordinal 1 %+v, want it terminating", p)
	}
}

func TestStatefulSetRecreatesByRevision(t *testing.T) {
	for name, tc := range map[string]struct {
		onDelete  bool
		partition int
		want      string
	}{
		"below the partition: the current revision": {partition: 3, want: "a"},
		"OnDelete: the update revision":             {onDelete: true, want: "b"},
	} {
		t.Run(name, func(t *testing.T) {
			w, _ := world(v1alpha1.KindStatefulSet, 3)
			w.OnDelete, w.Partition, w.Template = tc.onDelete, tc.partition, "b"
			w.Settle(100)
			w.Remove(bySlot(w, 0)) // evicted and gone
			w.Settle(100)
			if p := bySlot(w, 0); p == nil || p.Template != tc.want {
				t.Errorf("ordinal 0 %+v, want it on %s", p, tc.want)
			}
		})
	}
}

func TestStatefulSetOrderedReadyCreation(t *testing.T) {
	w, notReady := world(v1alpha1.KindStatefulSet, 0)
	w.OrderedReady, w.Replicas = true, 3
	w.NewPod = func(t string, slot int) *Pod[string] {
		p := &Pod[string]{Template: t, Slot: slot}
		notReady[p] = true
		return p
	}
	w.Settle(100)
	if len(w.Pods) != 1 {
		t.Fatalf("%d pods, want ordinal 0 only until it is Ready", len(w.Pods))
	}
	delete(notReady, w.Pods[0])
	w.Settle(100)
	if len(w.Pods) != 2 {
		t.Errorf("%d pods, want ordinal 1 once 0 is Ready", len(w.Pods))
	}
}

func TestDaemonSetBudgetAndNodes(t *testing.T) {
	w, notReady := world(v1alpha1.KindDaemonSet, 4)
	w.Template = "b"
	w.NewPod = func(t string, slot int) *Pod[string] {
		p := &Pod[string]{Template: t, Slot: slot}
		notReady[p] = true
		return p
	}
	w.Settle(100)
	if got := templates(w); got["b"] != 1 {
		t.Errorf("pods %v, want one node updated within maxUnavailable 1", got)
	}
	w.Nodes = w.Nodes[:2] // the nodeSelector now leaves nodes 2 and 3 out
	w.Settle(100)
	if bySlot(w, 2) != nil || bySlot(w, 3) != nil {
		t.Errorf("want the pods on nodes the DaemonSet no longer selects deleted; pods %v", w.Pods)
	}
}

func TestPausedDeploymentReplacesOnItsTemplate(t *testing.T) {
	w, _ := world(v1alpha1.KindDeployment, 3)
	w.Paused, w.Template = true, "b"
	w.Remove(w.Pods[0]) // evicted
	w.Settle(100)
	if got := templates(w); got["a"] != 3 || got["b"] != 0 {
		t.Errorf("pods %v, want the evicted pod replaced on a, nothing on b while paused", got)
	}
}

// notReadyOn makes every pod of template bad never Ready.
func notReadyOn(w *Workload[string], bad string) {
	w.Ready = func(p *Pod[string]) bool { return !p.Terminating && p.Template != bad }
}

func TestDeploymentRecreateEmptiesFirst(t *testing.T) {
	w, _ := world(v1alpha1.KindDeployment, 3)
	w.Recreate, w.Template = true, "b"
	for w.Step() {
		if got := templates(w); got["a"] > 0 && got["b"] > 0 {
			t.Fatalf("pods %v: want no pod of b while a pod of a is left", got)
		}
	}
	if got := templates(w); got["b"] != 3 {
		t.Errorf("pods %v, want 3 on b", got)
	}
}

// TestDeploymentScalesProportionally: a scale during a stalled rollout is shared by the
// ReplicaSets in proportion to their size (sync.go, scale), not all given to the new one.
func TestDeploymentScalesProportionally(t *testing.T) {
	w, _ := world(v1alpha1.KindDeployment, 3)
	// maxSurge 1 from the start: the ReplicaSet's max-replicas annotation says 4. (Had it
	// been 0 when the set was last sized, it would say 3 and a would take all 3 more.)
	w.MaxSurge, w.MaxUnavailable, w.Sets = 1, 0, nil
	w.Template = "b"
	notReadyOn(w, "b")
	w.Settle(100)
	if got := templates(w); got["a"] != 3 || got["b"] != 1 {
		t.Fatalf("pods %v, want 3 on a and the surge pod on b", got)
	}
	w.Replicas = 6 // 7 pods allowed: a gets round(3*7/4)-3 = 2 more, b round(1*7/4)-1 = 1
	w.Settle(100)
	if got := templates(w); got["a"] != 5 || got["b"] != 2 {
		t.Errorf("pods %v, want 5 on a and 2 on b", got)
	}
}

func TestRevisionsRenumberAReturn(t *testing.T) {
	for _, kind := range []v1alpha1.WorkloadKind{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet} {
		w, _ := world(kind, 2)
		w.Template = "b"
		w.Settle(100)
		w.Template = "a"
		w.Settle(100)
		if w.Revisions["a"] != 3 || w.Revisions["b"] != 2 {
			t.Errorf("%s: revisions %v, want b 2 and a renumbered to 3", kind, w.Revisions)
		}
	}
}

// TestStatefulSetCurrentRevision: status.currentRevision moves to the update revision
// once every pod runs it and is Ready, under OnDelete too (completeUpdate), and not
// while an updated pod is not Ready.
func TestStatefulSetCurrentRevision(t *testing.T) {
	w, _ := world(v1alpha1.KindStatefulSet, 2)
	w.OnDelete, w.Template = true, "b"
	notReadyOn(w, "b")
	for _, p := range slices.Clone(w.Pods) {
		w.Remove(p)
	}
	w.Settle(100)
	if got := templates(w); got["b"] != 2 || w.Current != "a" {
		t.Fatalf("pods %v current %s, want 2 on b and a current while b is not Ready", got, w.Current)
	}
	notReadyOn(w, "")
	w.Settle(100)
	if w.Current != "b" {
		t.Errorf("current %s, want b once its pods are Ready", w.Current)
	}
}

// TestParallelStatefulSetReplacesUnavailableOldPods: under Parallel, old pods that are
// not available are all replaced whatever maxUnavailable says (phase 1 of
// updateStatefulSetAfterInvariantEstablished); OrderedReady waits.
func TestParallelStatefulSetReplacesUnavailableOldPods(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		w, _ := world(v1alpha1.KindStatefulSet, 3)
		w.OrderedReady = ordered
		notReadyOn(w, "a")
		w.Template = "b"
		w.Settle(100)
		want := 3
		if ordered {
			want = 0
		}
		if got := templates(w); got["b"] != want {
			t.Errorf("OrderedReady %v: pods %v, want %d on b", ordered, got, want)
		}
	}
}

// TestDaemonSetReplacesUnavailableOldPods: an old pod that is not available is replaced
// even when the budget is spent (rollingUpdate's allowedReplacementPods).
func TestDaemonSetReplacesUnavailableOldPods(t *testing.T) {
	w, _ := world(v1alpha1.KindDaemonSet, 3)
	notReadyOn(w, "a")
	w.Template = "b"
	w.Settle(100)
	if got := templates(w); got["b"] != 3 {
		t.Errorf("pods %v, want every node's unavailable old pod replaced", got)
	}
}

// TestDeploymentStuckByAStaleDesiredReplicas: kube 1.37's Deployment controller never
// writes a set's desired-replicas annotation when a scale finds the only active set at the
// Deployment's replicas already (kubernetes/kubernetes#138036): mid-rollout, the old set
// scaled to 0 and the new one at 2 of 3, a scale to 2 leaves the annotation at 3, every
// sync is a scaling event, and the next template is never rolled out. A scale to another
// count and back writes it (the fleet explorer's operator does, and counts it).
func TestDeploymentStuckByAStaleDesiredReplicas(t *testing.T) {
	w, _ := world(v1alpha1.KindDeployment, 3)
	w.MaxSurge = 1
	w.Sets = []*ReplicaSet[string]{{Template: "a", Replicas: 0, Desired: 3, MaxReplicas: 4}, {Template: "b", Replicas: 2, Desired: 3, MaxReplicas: 4, Created: 1}}
	w.Pods = []*Pod[string]{{Template: "b", Slot: -1}, {Template: "b", Slot: -1}}
	w.Template, w.Replicas = "b", 2
	w.Settle(100)
	w.Template = "c"
	w.Settle(100)
	if got := templates(w); got["c"] != 0 || !w.StaleScale() {
		t.Fatalf("pods %v, stale %t: want kube's stuck rollout (no pod of c)", got, w.StaleScale())
	}
	w.Replicas = 3
	w.Settle(100)
	w.Replicas = 2
	w.Settle(100)
	if got := templates(w); got["c"] != 2 || w.StaleScale() {
		t.Errorf("after a scale to 3 and back, pods %v, want 2 of c", got)
	}
}
