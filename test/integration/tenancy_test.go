//go:build integration

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/charts"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestOwnedTemplatesAreClosed: config/tenancy's ValidatingAdmissionPolicy, in the real API
// server, refuses the two template changes holdfast never sees (a ReplicaSet's template
// its Deployment owns, the image of a pod a ReplicaSet owns), with a message that names
// the way (change the workload), refuses a ReplicaSet created for a Deployment to adopt,
// and lets every other change through: a ReplicaSet's replicas, a pod's labels, the image
// of a pod no workload owns, a ReplicaSet another controller owns.
func TestOwnedTemplatesAreClosed(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	d := utiltesting.MakeDeployment(ns, "kas").Replicas(2).Container("konnectivity-server", "--server-count=2").Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	owner := func(kind, name string, uid string) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: k8stypes.UID(uid), Controller: ptr.To(true)}}
	}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kas-a", Labels: d.Spec.Template.Labels, OwnerReferences: owner("Deployment", d.Name, string(d.UID))},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: d.Spec.Selector, Template: *d.Spec.Template.DeepCopy()}}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kas-a-1", Labels: d.Spec.Template.Labels, OwnerReferences: owner("ReplicaSet", rs.Name, string(rs.UID))},
		Spec: *d.Spec.Template.Spec.DeepCopy()}
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debug"}, Spec: *d.Spec.Template.Spec.DeepCopy()}
	for _, p := range []*corev1.Pod{pod, bare} {
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Installed after the Deployment's ReplicaSet is made, as kube's controller would make it.
	objs, err := charts.Kustomize("tenancy")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		u = u.DeepCopy()
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), u) })
	}
	update := func(obj client.Object, change func()) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				return err
			}
			change()
			return k8s.Update(ctx, obj)
		})
	}
	// The API server loads a new policy by watch: wait until a dry run is refused.
	deadline := time.Now().Add(20 * time.Second)
	for {
		edited := rs.DeepCopy()
		edited.Spec.Template.Spec.Containers[0].Image = "registry.example/main:c"
		if err := k8s.Update(ctx, edited, client.DryRunAll); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a ReplicaSet template edit is still admitted 20 s after the policy was created")
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := update(rs, func() { rs.Spec.Template.Spec.Containers[0].Image = "registry.example/main:c" }); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "change the Deployment") {
		t.Fatalf("a ReplicaSet template edit: %v, want 403 naming the Deployment as the way", err)
	}
	if err := update(pod, func() { pod.Spec.Containers[0].Image = "registry.example/main:c" }); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "change the image in the workload") {
		t.Errorf("an owned pod's image: %v, want 403 naming the workload as the way", err)
	}
	// A ReplicaSet created for the Deployment to adopt: an orphan its selector matches, or
	// one naming it as controller. One another controller owns is created.
	other := func(name string, owners []metav1.OwnerReference) *appsv1.ReplicaSet {
		o := rs.DeepCopy()
		o.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: name, Labels: d.Spec.Template.Labels, OwnerReferences: owners}
		o.Spec.Template.Spec.Containers[0].Image = "registry.example/main:c"
		return o
	}
	for what, o := range map[string]*appsv1.ReplicaSet{
		"an orphan ReplicaSet the Deployment would adopt": other("kas-orphan", nil),
		"a ReplicaSet naming the Deployment its owner":    other("kas-forged", owner("Deployment", d.Name, string(d.UID))),
	} {
		// The API server loads each policy by watch: the first may be in force before this one.
		err := k8s.Create(ctx, o, client.DryRunAll)
		for wait := time.Now().Add(20 * time.Second); err == nil && time.Now().Before(wait); err = k8s.Create(ctx, o, client.DryRunAll) {
			time.Sleep(200 * time.Millisecond)
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the Deployment controller") {
			t.Errorf("%s: %v, want 403 naming the Deployment as the way", what, err)
		}
	}
	rollout := []metav1.OwnerReference{{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Name: "kas", UID: "r-1", Controller: ptr.To(true)}}
	if err := k8s.Create(ctx, other("kas-rollout", rollout), client.DryRunAll); err != nil {
		t.Errorf("a ReplicaSet another controller owns: %v, want admitted", err)
	}
	for what, change := range map[string]func() error{
		"a ReplicaSet's replicas": func() error { return update(rs, func() { rs.Spec.Replicas = ptr.To[int32](3) }) },
		"an owned pod's labels":   func() error { return update(pod, func() { pod.Labels["debug"] = "true" }) },
		"an unowned pod's image": func() error {
			return update(bare, func() { bare.Spec.Containers[0].Image = "registry.example/main:c" })
		},
	} {
		if err := change(); err != nil {
			t.Errorf("%s: %v, want admitted", what, err)
		}
	}
}
