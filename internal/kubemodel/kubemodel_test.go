package kubemodel

import (
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
