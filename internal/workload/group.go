package workload

import (
	"context"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
)

// Group is the pods of one workload: a Deployment's through its ReplicaSets, a
// StatefulSet's or a DaemonSet's.
type Group struct {
	Meta
	Pods []Pod
	// orphans are the objects without a controller GroupOf counted as the workload's
	// (ReadLive reads them alike).
	orphans orphaned
	// liveLabels are the labels of the pods ReadLive read, by name: a pod re-created under
	// its name may carry others than the one a cache still shows (LiveLabels).
	liveLabels map[string]map[string]string
}

// LiveLabels are the labels of the pod of the name as ReadLive read it; false when it did
// not read one.
func (g *Group) LiveLabels(name string) (map[string]string, bool) {
	l, ok := g.liveLabels[name]
	return l, ok
}

// Running is whether the group's pod with the UID is present and not terminating: one
// whose eviction holdfast admitted has not gone (kube's PDB check refused it).
func (g *Group) Running(uid types.UID) bool {
	return slices.ContainsFunc(g.Pods, func(p Pod) bool { return p.UID == uid && !p.Terminating })
}

// GroupOf finds the workload a pod belongs to and reads its pods, from a cache indexed by
// informer.OwnerIndex (read-only). It returns nil for pods of other owners, which holdfast
// does not guard, and for pods whose workload is gone. A pod, or a Deployment's ReplicaSet,
// without a controller (its workload was deleted orphaning it) belongs to the workload that
// kube adopts it into, once one exists (adopterOf): a workload created again over it is
// that workload already, though kube's controller has not claimed it yet. live, when not
// nil, is the API server, asked for that workload when the cache does not show one: it may
// have been created a moment ago.
func GroupOf(ctx context.Context, r, live client.Reader, pod *corev1.Pod) (*Group, error) {
	obj, orphans, err := ownerOf(ctx, r, live, pod)
	if obj == nil || err != nil {
		return nil, err
	}
	m, _ := MetaOf(obj)
	g := &Group{Meta: m, orphans: orphans}
	if g.Pods, err = PodsOf(ctx, r, m.Ref); err != nil {
		return nil, err
	}
	if g.Pods, err = orphans.add(ctx, r, g.Pods, m); err != nil {
		return nil, err
	}
	return g, nil
}

// ownerOf is the workload the pod belongs to, nil for other owners and for one that is
// gone, and which of its orphans it is about to adopt (GroupOf).
func ownerOf(ctx context.Context, r, live client.Reader, pod *corev1.Pod) (client.Object, orphaned, error) {
	ref := metav1.GetControllerOf(pod)
	switch {
	case ref == nil:
		o, err := adopterOf(ctx, r, live, pod, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet)
		return o, orphaned{pods: true}, err
	case ref.Kind == string(v1alpha1.KindDeployment):
		return nil, orphaned{}, nil // a Deployment owns ReplicaSets, never pods
	case ref.Kind != "ReplicaSet":
		o, err := getOwner(ctx, r, v1alpha1.WorkloadKind(ref.Kind), pod.Namespace, ref.Name)
		return o, orphaned{}, err
	}
	rs := &appsv1.ReplicaSet{}
	if err := informer.Get(ctx, r, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, rs); err != nil {
		return nil, orphaned{}, client.IgnoreNotFound(err)
	}
	switch dref := metav1.GetControllerOf(rs); {
	case dref == nil:
		o, err := adopterOf(ctx, r, live, rs, v1alpha1.KindDeployment)
		return o, orphaned{sets: true}, err
	case dref.Kind != string(v1alpha1.KindDeployment):
		return nil, orphaned{}, nil
	default:
		o, err := getOwner(ctx, r, v1alpha1.KindDeployment, pod.Namespace, dref.Name)
		return o, orphaned{}, err
	}
}

// getOwner is the workload of a guarded kind from the cache; nil for other kinds and for
// one that is gone.
func getOwner(ctx context.Context, r client.Reader, kind v1alpha1.WorkloadKind, namespace, name string) (client.Object, error) {
	obj, err := New(kind)
	if err != nil {
		return nil, nil // other owners are not guarded
	}
	if err := informer.Get(ctx, r, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return obj, nil
}

// adopterOf is the workload of one of kinds in the object's namespace that kube's
// controller would adopt the object (a pod or a ReplicaSet without a controller) into, from
// the cache: one not being deleted whose selector matches the object's labels (a
// StatefulSet only its own ordinals' pods), as ClaimReplicaSets and ClaimPods adopt
// (pkg/controller/controller_ref_manager.go; the StatefulSet's isMemberOf,
// pkg/controller/statefulset/stateful_set_utils.go). When several match, kube's
// controllers race for it; holdfast takes the first by name. When the
// cache shows none, live (when not nil) is asked. nil when none does.
func adopterOf(ctx context.Context, r, live client.Reader, obj client.Object, kinds ...v1alpha1.WorkloadKind) (client.Object, error) {
	found, err := adopterIn(ctx, r, obj, kinds)
	if found != nil || err != nil || live == nil {
		return found, err
	}
	return adopterIn(ctx, live, obj, kinds)
}

func adopterIn(ctx context.Context, r client.Reader, obj client.Object, kinds []v1alpha1.WorkloadKind) (client.Object, error) {
	var found client.Object
	for _, kind := range kinds {
		list, err := NewList(kind)
		if err != nil {
			return nil, err
		}
		if err := informer.ListIn(ctx, r, list, obj.GetNamespace()); err != nil {
			return nil, err
		}
		err = meta.EachListItem(list, func(o runtime.Object) error {
			w := o.(client.Object)
			if w.GetDeletionTimestamp() != nil || (found != nil && found.GetName() < w.GetName()) {
				return nil
			}
			if kind == v1alpha1.KindStatefulSet && !ordinalOf(w.GetName(), obj.GetName()) {
				return nil
			}
			if m, ok := MetaOf(w); ok && selects(m.Selector, obj.GetLabels()) {
				found = w
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return found, nil
}

// ordinalOf is whether pod is named as an ordinal of the StatefulSet set: set-<ordinal>.
func ordinalOf(set, pod string) bool {
	_, ok := Ordinal(set, pod)
	return ok
}

// Ordinal is the ordinal of the pod named pod in the StatefulSet set, as kube's StatefulSet
// controller reads it (pkg/controller/statefulset/stateful_set_utils.go,
// getParentNameAndOrdinal and isMemberOf: "<set>-<digits>", an int32); false for a pod
// that is none of set's.
func Ordinal(set, pod string) (int, bool) {
	n, ok := strings.CutPrefix(pod, set+"-")
	if !ok || n == "" || strings.TrimLeft(n, "0123456789") != "" {
		return 0, false
	}
	i, err := strconv.ParseInt(n, 10, 32)
	return int(i), err == nil
}

// KeepsOrdinal is whether kube's StatefulSet controller keeps the pod named pod as one of
// w's replicas: an ordinal of w in [ordinals.start, start+replicas). It deletes the other
// ordinals it owns (condemned) and creates the missing ones from its update revision
// (pkg/controller/statefulset/stateful_set_control.go, updateStatefulSet and
// podInOrdinalRange).
func (w *Workload) KeepsOrdinal(pod string) bool {
	i, ok := Ordinal(w.Name, pod)
	start := int(w.OrdinalStart)
	return ok && i >= start && i < start+int(ptr.Deref(w.Replicas, 1))
}

// selects is whether a workload's selector matches labels; an empty or invalid selector
// matches nothing, as kube's controllers read them.
func selects(sel *metav1.LabelSelector, set map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(set))
}

// orphaned is which of a workload's objects without a controller it is about to adopt:
// pods (a StatefulSet's or DaemonSet's) or ReplicaSets (a Deployment's).
type orphaned struct{ pods, sets bool }

// add is pods with those of the orphans kube would adopt into the workload m: without a
// controller, matching its selector (a StatefulSet's own ordinals). Two workloads whose
// selectors overlap each count them, the stricter reading.
func (o orphaned) add(ctx context.Context, r client.Reader, pods []Pod, m Meta) ([]Pod, error) {
	if !o.pods && !o.sets {
		return pods, nil
	}
	// An empty or invalid selector adopts nothing, as kube's controllers read them (selects).
	sel, err := metav1.LabelSelectorAsSelector(m.Selector)
	if err != nil || sel.Empty() {
		return pods, nil
	}
	var owners []types.UID
	if o.sets {
		// By the selector, which the ReplicaSets it adopts match: a cache that holds only
		// the guarded workloads' (podscope) serves the list from the watch that holds them.
		var sets appsv1.ReplicaSetList
		if err := r.List(ctx, &sets, client.InNamespace(m.Namespace), client.MatchingLabelsSelector{Selector: sel}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, err
		}
		for i := range sets.Items {
			if rs := &sets.Items[i]; metav1.GetControllerOf(rs) == nil {
				owners = append(owners, rs.UID)
			}
		}
	}
	var list corev1.PodList
	if err := informer.ListIn(ctx, r, &list, m.Namespace); err != nil {
		return nil, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		ref := metav1.GetControllerOf(p)
		switch {
		case o.pods && ref == nil && sel.Matches(labels.Set(p.Labels)) && (m.Kind != v1alpha1.KindStatefulSet || ordinalOf(m.Name, p.Name)):
			pods = append(pods, PodOf(p))
		case o.sets && ref != nil && slices.Contains(owners, ref.UID):
			pods = append(pods, PodOf(p))
		}
	}
	return pods, nil
}

// PodsOf reads the pods of the workload ref, from a cache indexed by informer.OwnerIndex.
func PodsOf(ctx context.Context, r client.Reader, m Ref) ([]Pod, error) {
	var out []Pod
	// A Deployment's pods are owned by its ReplicaSets; the others' by the workload itself.
	owners := []types.UID{m.UID}
	if m.Kind == v1alpha1.KindDeployment {
		var sets appsv1.ReplicaSetList
		if err := informer.ListOwned(ctx, r, &sets, m.Namespace, m.UID); err != nil {
			return nil, err
		}
		owners = owners[:0]
		for i := range sets.Items {
			owners = append(owners, sets.Items[i].UID)
		}
	}
	for _, uid := range owners {
		var pods corev1.PodList
		if err := informer.ListOwned(ctx, r, &pods, m.Namespace, uid); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			out = append(out, PodOf(&pods.Items[i]))
		}
	}
	return out, nil
}

// ReadLive reads the group's pods again from the API server (live), by the workload's
// selector in its namespace, as GroupOf read them from the cache: those its controller owns
// (a Deployment's through its ReplicaSets) and the orphans GroupOf counted, those without a
// controller that kube is about to adopt into it. It is what a cache that lags shows of the
// group, read again: a replaced pod it still shows Ready, a replacement it does not show
// yet. A workload whose selector selects nothing has no pods.
func (g *Group) ReadLive(ctx context.Context, live client.Reader) error {
	g.Pods, g.liveLabels = nil, nil
	sel, err := metav1.LabelSelectorAsSelector(g.Selector)
	if err != nil || sel.Empty() {
		return nil
	}
	in := client.MatchingLabelsSelector{Selector: sel}
	owners := []types.UID{g.UID}
	if g.Kind == v1alpha1.KindDeployment {
		// Its ReplicaSets by its selector (kube's controller releases one its selector no
		// longer matches), then by owner: one missed counts its pods as missing, which
		// only holds the eviction.
		var sets appsv1.ReplicaSetList
		if err := live.List(ctx, &sets, client.InNamespace(g.Namespace), in); err != nil {
			return err
		}
		owners = owners[:0]
		for i := range sets.Items {
			rs := &sets.Items[i]
			if ref := metav1.GetControllerOf(rs); (ref != nil && ref.UID == g.UID) || (ref == nil && g.orphans.sets) {
				owners = append(owners, rs.UID)
			}
		}
	}
	var list corev1.PodList
	if err := live.List(ctx, &list, client.InNamespace(g.Namespace), in); err != nil {
		return err
	}
	for i := range list.Items {
		p := &list.Items[i]
		ref := metav1.GetControllerOf(p)
		owned := ref != nil && slices.Contains(owners, ref.UID)
		adopted := ref == nil && g.orphans.pods && (g.Kind != v1alpha1.KindStatefulSet || ordinalOf(g.Name, p.Name))
		if owned || adopted {
			g.Pods = append(g.Pods, PodOf(p))
			if g.liveLabels == nil {
				g.liveLabels = make(map[string]map[string]string, len(list.Items))
			}
			g.liveLabels[p.Name] = p.Labels
		}
	}
	return nil
}
