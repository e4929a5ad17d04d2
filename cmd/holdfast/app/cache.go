package app

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/history"
)

// CacheOptions trims what holdfast caches to what its decisions read: no managed
// fields anywhere, and pods reduced to identity, ownership, node and readiness. Revisions
// carry their template's fingerprint instead of the template (history.Slim).
func CacheOptions() cache.Options {
	strip := cache.TransformStripManagedFields()
	revision := func(obj any) (any, error) {
		obj, err := strip(obj)
		if err != nil {
			return obj, err
		}
		return history.Slim(obj)
	}
	return cache.Options{
		DefaultTransform: strip,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:                {Transform: leanPod},
			&appsv1.ReplicaSet{}:         {Transform: revision},
			&appsv1.ControllerRevision{}: {Transform: revision},
		},
	}
}

// leanPod keeps what decisions read of a pod; at 10,000 pods the rest is most of the cache.
func leanPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	lean := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              p.Name,
			Namespace:         p.Namespace,
			UID:               p.UID,
			ResourceVersion:   p.ResourceVersion,
			Labels:            p.Labels,
			OwnerReferences:   p.OwnerReferences,
			CreationTimestamp: p.CreationTimestamp,
			DeletionTimestamp: p.DeletionTimestamp,
		},
		Spec:   corev1.PodSpec{NodeName: p.Spec.NodeName},
		Status: corev1.PodStatus{Phase: p.Status.Phase},
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			lean.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return lean, nil
}

// indexOwners indexes the objects that make up workload history by their controller's UID.
func indexOwners(ctx context.Context, idx client.FieldIndexer) error {
	for _, obj := range []client.Object{&appsv1.ReplicaSet{}, &appsv1.ControllerRevision{}, &corev1.Pod{}} {
		if err := idx.IndexField(ctx, obj, history.OwnerIndex, ownerUID); err != nil {
			return fmt.Errorf("indexing %T by owner: %w", obj, err)
		}
	}
	return nil
}

func ownerUID(obj client.Object) []string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}
