package eviction

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/history"
)

// podState is what decisions read of a pod.
func podState(p *corev1.Pod) Pod {
	s := Pod{Name: p.Name, UID: p.UID, Phase: p.Status.Phase, Terminating: p.DeletionTimestamp != nil}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			s.Ready, s.ReadySince = true, c.LastTransitionTime.Time
		}
	}
	return s
}

// groupOf finds the controller whose pods the pod belongs to, from the cache: a
// Deployment through its ReplicaSet, a StatefulSet or a DaemonSet. It returns nil for
// pods of other owners, which holdfast does not guard.
func groupOf(ctx context.Context, r client.Reader, pod *corev1.Pod) (*Group, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil, nil
	}
	key := client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}
	var g *Group
	var owners []string
	switch ref.Kind {
	case "ReplicaSet":
		rs := &appsv1.ReplicaSet{}
		if err := r.Get(ctx, key, rs); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		dref := metav1.GetControllerOf(rs)
		if dref == nil || dref.Kind != "Deployment" {
			return nil, nil
		}
		d := &appsv1.Deployment{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: dref.Name}, d); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		g = &Group{Kind: "Deployment", Namespace: d.Namespace, Name: d.Name, UID: d.UID, Expected: ptr.Deref(d.Spec.Replicas, 1)}
		var sets appsv1.ReplicaSetList
		if err := r.List(ctx, &sets, client.InNamespace(d.Namespace), client.MatchingFields{history.OwnerIndex: string(d.UID)}); err != nil {
			return nil, err
		}
		for _, s := range sets.Items {
			owners = append(owners, string(s.UID))
		}
	case "StatefulSet":
		s := &appsv1.StatefulSet{}
		if err := r.Get(ctx, key, s); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		g = &Group{Kind: "StatefulSet", Namespace: s.Namespace, Name: s.Name, UID: s.UID, Expected: ptr.Deref(s.Spec.Replicas, 1)}
		owners = []string{string(s.UID)}
	case "DaemonSet":
		ds := &appsv1.DaemonSet{}
		if err := r.Get(ctx, key, ds); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		g = &Group{Kind: "DaemonSet", Namespace: ds.Namespace, Name: ds.Name, UID: ds.UID, Expected: ds.Status.DesiredNumberScheduled}
		owners = []string{string(ds.UID)}
	default:
		return nil, nil
	}
	for _, uid := range owners {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(pod.Namespace), client.MatchingFields{history.OwnerIndex: uid}); err != nil {
			return nil, err
		}
		for i := range pods.Items {
			g.Pods = append(g.Pods, podState(&pods.Items[i]))
		}
	}
	return g, nil
}
