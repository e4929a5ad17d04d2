package history

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/cache"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Read gathers a workload's history from a cache indexed by cache.OwnerIndex (read-only). Pods are read
// only while w rolls out: only an unfinished rollout's decisions read LastActivity and
// Serving (stalled rollouts, rollbacks to a revision that still serves).
func Read(ctx context.Context, r client.Reader, w *workload.Workload) (History, error) {
	var h History
	owned := func(list client.ObjectList, uid types.UID) error {
		return cache.ListOwned(ctx, r, list, w.Namespace, uid)
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
		if w.Rollout.InProgress {
			if err := owned(&list, w.UID); err != nil {
				return h, err
			}
		}
		pods = list.Items
		var err error
		if h.Revisions, err = FromControllerRevisions(w.UID, w.Name, revs.Items, pods); err != nil {
			return h, err
		}
	}
	h.LastActivity = workload.LastActivity(pods)
	return h, nil
}
