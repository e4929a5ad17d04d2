package history

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// OwnerIndex is the cache index of ReplicaSets, ControllerRevisions and pods by the UID
// of their controller.
const OwnerIndex = "holdfast.dev/controller-uid"

// cacheOwn asks the cache for its own objects, not copies.
var cacheOwn = true

// Read gathers a workload's history from a cache indexed by OwnerIndex. Pods are read
// only while w rolls out: only an unfinished rollout's decisions read LastActivity and
// Serving (stalled rollouts, rollbacks to a revision that still serves).
func Read(ctx context.Context, r client.Reader, w *workload.Workload) (History, error) {
	var h History
	owned := func(list client.ObjectList, uid string) error {
		// Read-only: the objects are the cache's own, not copies.
		return r.List(ctx, list, &client.ListOptions{Namespace: w.Namespace,
			FieldSelector: fields.OneTermEqualSelector(OwnerIndex, uid), UnsafeDisableDeepCopy: &cacheOwn})
	}
	var pods []corev1.Pod
	if w.Kind == v1alpha1.KindDeployment {
		var sets appsv1.ReplicaSetList
		if err := owned(&sets, string(w.UID)); err != nil {
			return h, err
		}
		h.Revisions = FromReplicaSets(w.UID, sets.Items)
		if !w.Rollout.InProgress {
			return h, nil
		}
		for _, rs := range sets.Items {
			var list corev1.PodList
			if err := owned(&list, string(rs.UID)); err != nil {
				return h, err
			}
			pods = append(pods, list.Items...)
		}
	} else {
		var revs appsv1.ControllerRevisionList
		var list corev1.PodList
		if err := owned(&revs, string(w.UID)); err != nil {
			return h, err
		}
		if w.Rollout.InProgress {
			if err := owned(&list, string(w.UID)); err != nil {
				return h, err
			}
		}
		pods = list.Items
		var err error
		if h.Revisions, err = FromControllerRevisions(w.UID, w.Name, revs.Items, pods); err != nil {
			return h, err
		}
	}
	h.LastActivity = LastActivity(pods)
	return h, nil
}
