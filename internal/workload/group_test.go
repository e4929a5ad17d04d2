package workload_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

var app = map[string]string{"app": "kas"}

func reader(objs ...client.Object) client.Reader {
	return utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, objs...)
}

func orphanPod(name string, owner client.Object) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, UID: types.UID("pod-" + name), Labels: app}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(owner, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}
	}
	return p
}

// TestGroupOfAnOrphanIsTheWorkloadKubeAdoptsItInto: the pod of a ReplicaSet an orphaning
// delete left, or a StatefulSet's pod it left, belongs to the workload of the namespace
// whose selector kube's controller claims it by (a StatefulSet only its own ordinals), read
// from the API server when the cache does not show it yet; with its pods, those orphans
// included. One being deleted adopts nothing, nor does a selector that does not match.
func TestGroupOfAnOrphanIsTheWorkloadKubeAdoptsItInto(t *testing.T) {
	ctx := context.Background()
	sel := &metav1.LabelSelector{MatchLabels: app}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "kas-7f", UID: "rs-uid", Labels: app}}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "kas", UID: "dep-2"}, Spec: appsv1.DeploymentSpec{Selector: sel}}
	pods := []client.Object{orphanPod("kas-7f-a", rs), orphanPod("kas-7f-b", rs)}

	cached := reader(append([]client.Object{rs, dep}, pods...)...)
	g, err := workload.GroupOf(ctx, cached, nil, pods[0].(*corev1.Pod))
	if err != nil || g == nil || g.UID != "dep-2" || len(g.Pods) != 2 {
		t.Fatalf("a pod of an orphaned ReplicaSet: group %+v, %v; want Deployment dep-2 with both pods", g, err)
	}

	// The cache has not seen the Deployment created again: the API server has.
	stale := reader(append([]client.Object{rs}, pods...)...)
	if g, err = workload.GroupOf(ctx, stale, nil, pods[0].(*corev1.Pod)); err != nil || g != nil {
		t.Fatalf("without the API server: group %+v, %v; want none", g, err)
	}
	if g, err = workload.GroupOf(ctx, stale, reader(dep), pods[0].(*corev1.Pod)); err != nil || g == nil || g.UID != "dep-2" || len(g.Pods) != 2 {
		t.Fatalf("with the API server: group %+v, %v; want Deployment dep-2 with both pods", g, err)
	}

	deleting := dep.DeepCopy()
	deleting.DeletionTimestamp, deleting.Finalizers = &metav1.Time{}, []string{"foregroundDeletion"}
	if g, err = workload.GroupOf(ctx, reader(append([]client.Object{rs, deleting}, pods...)...), nil, pods[0].(*corev1.Pod)); err != nil || g != nil {
		t.Errorf("a Deployment being deleted: group %+v, %v; want none", g, err)
	}
	other := dep.DeepCopy()
	other.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}
	if g, err = workload.GroupOf(ctx, reader(append([]client.Object{rs, other}, pods...)...), nil, pods[0].(*corev1.Pod)); err != nil || g != nil {
		t.Errorf("a Deployment selecting other pods: group %+v, %v; want none", g, err)
	}

	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "kas", UID: "sts-2"}, Spec: appsv1.StatefulSetSpec{Selector: sel}}
	ordinal, stranger := orphanPod("kas-1", nil), orphanPod("kas-x", nil)
	r := reader(sts, ordinal, stranger)
	if g, err = workload.GroupOf(ctx, r, nil, ordinal); err != nil || g == nil || g.UID != "sts-2" || len(g.Pods) != 1 || g.Pods[0].UID != ordinal.UID {
		t.Errorf("an orphaned ordinal: group %+v, %v; want StatefulSet sts-2 with that pod alone", g, err)
	}
	if g, err = workload.GroupOf(ctx, r, nil, stranger); err != nil || g != nil {
		t.Errorf("a pod not named as an ordinal: group %+v, %v; want none", g, err)
	}
}
