package workload

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
)

// Group is the pods of one workload: a Deployment's through its ReplicaSets, a
// StatefulSet's or a DaemonSet's.
type Group struct {
	Meta
	Pods []Pod
}

// Running is whether the group's pod with the UID is present and not terminating: one
// whose eviction holdfast admitted has not gone (kube's PDB check refused it).
func (g *Group) Running(uid types.UID) bool {
	return slices.ContainsFunc(g.Pods, func(p Pod) bool { return p.UID == uid && !p.Terminating })
}

// GroupOf finds the workload a pod belongs to and reads its pods, from a cache indexed by
// informer.OwnerIndex (read-only). It returns nil for pods of other owners, which holdfast
// does not guard, and for pods whose workload is gone.
func GroupOf(ctx context.Context, r client.Reader, pod *corev1.Pod) (*Group, error) {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return nil, nil
	}
	owner, kind := ref.Name, v1alpha1.WorkloadKind(ref.Kind)
	if ref.Kind == "ReplicaSet" {
		rs := &appsv1.ReplicaSet{}
		if err := informer.Get(ctx, r, client.ObjectKey{Namespace: pod.Namespace, Name: ref.Name}, rs); err != nil {
			return nil, client.IgnoreNotFound(err)
		}
		dref := metav1.GetControllerOf(rs)
		if dref == nil || dref.Kind != string(v1alpha1.KindDeployment) {
			return nil, nil
		}
		owner, kind = dref.Name, v1alpha1.KindDeployment
	} else if kind == v1alpha1.KindDeployment {
		return nil, nil // a Deployment owns ReplicaSets, never pods
	}
	obj, err := New(kind)
	if err != nil {
		return nil, nil // other owners are not guarded
	}
	if err := informer.Get(ctx, r, client.ObjectKey{Namespace: pod.Namespace, Name: owner}, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	m, _ := MetaOf(obj)
	g := &Group{Meta: m}
	if g.Pods, err = PodsOf(ctx, r, m.Ref); err != nil {
		return nil, err
	}
	return g, nil
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
