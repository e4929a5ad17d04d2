package history

import (
	"context"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Read gathers a workload's history from a cache indexed by informer.OwnerIndex (read-only). Pods are read
// only while w rolls out or is held: only then do decisions read LastActivity, Serving and
// Pods (stalled rollouts, rollbacks to a revision that still serves, staged templates).
func Read(ctx context.Context, r client.Reader, w *workload.Workload) (History, error) {
	var h History
	owned := func(list client.ObjectList, uid types.UID) error {
		return informer.ListOwned(ctx, r, list, w.Namespace, uid)
	}
	var pods []corev1.Pod
	if w.Kind == v1alpha1.KindDeployment {
		var sets appsv1.ReplicaSetList
		if err := owned(&sets, w.UID); err != nil {
			return h, err
		}
		h.Revisions = FromReplicaSets(w.UID, sets.Items)
		if !w.Rollout.InProgress {
			return h, nil
		}
		for _, rs := range sets.Items {
			var list corev1.PodList
			if err := owned(&list, rs.UID); err != nil {
				return h, err
			}
			pods = append(pods, list.Items...)
		}
	} else {
		var revs appsv1.ControllerRevisionList
		var list corev1.PodList
		if err := owned(&revs, w.UID); err != nil {
			return h, err
		}
		// Held, its newest ControllerRevision may be a staged template: its pods tell. Under
		// a partition, a finished rollout leaves the ordinals below it on another template.
		if p := w.Rollout.Progress; w.Rollout.InProgress || w.Rollout.Held || p.Target < p.Want {
			if err := owned(&list, w.UID); err != nil {
				return h, err
			}
		}
		pods = list.Items
		var joined map[string]time.Time
		if w.Kind == v1alpha1.KindDaemonSet && len(pods) > 0 {
			var nodes corev1.NodeList
			if err := informer.List(ctx, r, &nodes); err != nil {
				return h, err
			}
			// No node known (a cache without nodes): every serving pod counts.
			if len(nodes.Items) > 0 {
				joined = daemonNodes(w, nodes.Items)
			}
		}
		var err error
		if h.Revisions, err = FromControllerRevisions(w.UID, w.Name, revs.Items, pods, joined); err != nil {
			return h, err
		}
		if joined != nil {
			h.Nodes = make([]time.Time, 0, len(joined))
			for _, at := range joined {
				h.Nodes = append(h.Nodes, at)
			}
		}
	}
	h.LastActivity = workload.LastActivity(pods)
	return h, nil
}

// daemonNodes is when each node the DaemonSet w runs on joined the cluster (its
// creation), by name: the nodes its controller keeps a pod on, by its current template's
// node selector, affinity and tolerations (workload.DaemonRunsOn), as kube's own rollout
// counts them (nodeShouldRunDaemonPod: a node being deleted still counts until it is gone).
// Both a DaemonSet's progress (the pods serving on these nodes, Revision.ServingBefore) and
// the nodes that need its update (History.Nodes) are read from this one set: a node it no
// longer runs on (relabelled, tainted), or one gone from the cache, leaves both at once, so
// a progress mark is never held above what the nodes left can reach. A node it does not
// run on leaving is no change to its rollout; nor is a pod of it deleted (a tenant's),
// which leaves the node. nil when the template does not decode (every serving pod counts
// then).
func daemonNodes(w *workload.Workload, nodes []corev1.Node) map[string]time.Time {
	spec, err := w.Template.Spec()
	if err != nil {
		return nil
	}
	out := make(map[string]time.Time, len(nodes))
	for i := range nodes {
		if n := &nodes[i]; workload.DaemonRunsOn(&spec.Spec, n) {
			out[n.Name] = n.CreationTimestamp.Time
		}
	}
	return out
}

// claims is the selector by which w's controller claims pods and revisions; false when it
// claims nothing (kube refuses a workload whose selector is invalid or selects everything).
func claims(w *workload.Workload) (labels.Selector, bool, error) {
	ls, err := w.Selector()
	if err != nil {
		return nil, false, err
	}
	selector, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil || ls == nil || selector.Empty() {
		return nil, false, nil
	}
	return selector, true, nil
}

// ReadSelected counts the live pods in w's namespace that w's selector matches
// (History.Selected), and for a Deployment the replicas each ReplicaSet the selector
// matches and w does not control still wants: an orphan it has not adopted yet, or the
// deleted workload's awaiting the garbage collector, may create pods of its template
// whatever pods run now. One LIST of pods (and of ReplicaSets), from r.
func (h *History) ReadSelected(ctx context.Context, r client.Reader, w *workload.Workload) error {
	selector, ok, err := claims(w)
	if err != nil || !ok {
		return err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(w.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return err
	}
	var selected int32
	for i := range pods.Items {
		if p := pods.Items[i].Status.Phase; p != corev1.PodSucceeded && p != corev1.PodFailed {
			selected++
		}
	}
	if w.Kind == v1alpha1.KindDeployment {
		var sets appsv1.ReplicaSetList
		if err := r.List(ctx, &sets, client.InNamespace(w.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
			return err
		}
		for i := range sets.Items {
			rs := &sets.Items[i]
			if c := metav1.GetControllerOfNoCopy(rs); c != nil && c.UID == w.UID {
				continue
			}
			selected += ptr.Deref(rs.Spec.Replicas, 1) // the API server's default
		}
	}
	h.Selected, h.SelectedRead = selected, true
	return nil
}

// ReadAdoptable gathers the history a workload created as w would adopt: the ReplicaSets
// (Deployments) or ControllerRevisions (StatefulSets, DaemonSets) in its namespace that no
// other workload controls and that its spec.selector matches, as an orphaning delete of a
// workload of the same name (or of another name) leaves them (their pods too). It is what
// a CREATE continues from when the revision journal has not caught up.
func ReadAdoptable(ctx context.Context, r client.Reader, w *workload.Workload) (History, error) {
	var h History
	selector, ok, err := claims(w)
	if err != nil || !ok {
		return h, err
	}
	// kube's controllers claim what the selector matches, whatever its other labels
	// (ClaimReplicaSets, ClaimControllerRevisions, ClaimPods): a template that adds or drops
	// a label still adopts them.
	matching := client.MatchingLabelsSelector{Selector: selector}
	ours := func(refs []metav1.OwnerReference) bool {
		c := metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: refs})
		return c == nil || (c.Kind == string(w.Kind) && c.Name == w.Name)
	}
	if w.Kind == v1alpha1.KindDeployment {
		var sets appsv1.ReplicaSetList
		if err := r.List(ctx, &sets, client.InNamespace(w.Namespace), matching); err != nil {
			return h, err
		}
		var adoptable []appsv1.ReplicaSet
		for _, rs := range sets.Items {
			if ours(rs.OwnerReferences) {
				rs.OwnerReferences = nil
				adoptable = append(adoptable, rs)
			}
		}
		h.Revisions = FromReplicaSets("", adoptable)
		if len(adoptable) == 0 {
			return h, nil
		}
		// Their pods date the rollout's last progress, as Read's do: without them an
		// unfinished rollout would be dated at its ReplicaSet's creation, and a re-create
		// over one that lost a pod a moment ago would pass as the fix of a stalled rollout.
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(w.Namespace), matching); err != nil {
			return h, err
		}
		theirs := pods.Items[:0]
		for _, p := range pods.Items {
			if c := metav1.GetControllerOfNoCopy(&p); c != nil && slices.ContainsFunc(adoptable, func(rs appsv1.ReplicaSet) bool { return rs.UID == c.UID }) {
				theirs = append(theirs, p)
			}
		}
		h.LastActivity = workload.LastActivity(theirs)
		return h, nil
	}
	var revs appsv1.ControllerRevisionList
	if err := r.List(ctx, &revs, client.InNamespace(w.Namespace), matching); err != nil {
		return h, err
	}
	var adoptable []appsv1.ControllerRevision
	for _, cr := range revs.Items {
		if ours(cr.OwnerReferences) {
			cr.OwnerReferences = nil
			adoptable = append(adoptable, cr)
		}
	}
	if len(adoptable) == 0 {
		return h, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(w.Namespace), matching); err != nil {
		return h, err
	}
	if w.Kind == v1alpha1.KindStatefulSet {
		// Its pods are its members (getPodsForStatefulSet claims only those isMemberOf
		// names "<set>-<ordinal>"), its own or left by a set of its name: a pod of another
		// name or owner carrying a revision's hash label (anyone may label a pod so) runs
		// none of its revisions.
		pods.Items = slices.DeleteFunc(pods.Items, func(p corev1.Pod) bool {
			_, member := workload.Ordinal(w.Name, p.Name)
			c := metav1.GetControllerOfNoCopy(&p)
			return !member || (c != nil && (c.Kind != string(v1alpha1.KindStatefulSet) || c.Name != w.Name))
		})
	}
	if h.Revisions, err = FromControllerRevisions("", w.Name, adoptable, pods.Items, nil); err != nil {
		return h, err
	}
	h.LastActivity = workload.LastActivity(pods.Items)
	if w.Kind == v1alpha1.KindStatefulSet {
		// Its controller keeps only the orphans (ClaimPods: a pod another object controls,
		// a deleted StatefulSet's whose cascading delete the garbage collector has not
		// finished, is not adopted and goes) and its own pods, of the ordinals in its range
		// (KeepsOrdinal), one per ordinal (updateStatefulSet's replicas slots; a pod going
		// or ended holds none, it is replaced): the others are live until they go, but it
		// creates the missing ordinals in the range from its template, so only those it
		// keeps are kept.
		slots := map[int]bool{}
		kept := slices.DeleteFunc(slices.Clone(pods.Items), func(p corev1.Pod) bool {
			i, _ := workload.Ordinal(w.Name, p.Name)
			c := metav1.GetControllerOfNoCopy(&p)
			if (c != nil && (w.UID == "" || c.UID != w.UID)) || !w.KeepsOrdinal(p.Name) || slots[i] || p.DeletionTimestamp != nil || workload.PodEnded(&p) {
				return true
			}
			slots[i] = true
			return false
		})
		inRange, err := FromControllerRevisions("", w.Name, adoptable, kept, nil)
		if err != nil {
			return h, err
		}
		for i := range h.Revisions {
			h.Revisions[i].Kept = inRange[i].Kept
		}
	}
	return h, nil
}
