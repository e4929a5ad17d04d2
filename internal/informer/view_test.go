package informer_test

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestCacheViewReadsWhatTheCacheHolds: a store read through CacheView answers as holdfast's
// cache would (a workload's template packed, a pod lean, managed fields gone), copies
// included, and the store keeps what it holds.
func TestCacheViewReadsWhatTheCacheHolds(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	d := utiltesting.MakeDeployment("tenant", "kas").Obj()
	d.UID = "d-uid"
	d.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationUpdate}}
	store.Put(d.DeepCopy())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: "kas-1", Labels: map[string]string{"app": "kas"}},
		Spec: d.Spec.Template.Spec}
	store.Put(pod)
	view := informer.CacheView(store, informer.Options(history.Slim, workload.Pack, "holdfast", labels.Everything(), nil))

	var got appsv1.Deployment
	if err := view.Get(ctx, client.ObjectKeyFromObject(d), &got, client.UnsafeDisableDeepCopy); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Template.Spec.Containers != nil || got.Annotations[workload.PackedTemplateAnnotation] == "" || got.ManagedFields != nil {
		t.Errorf("the Deployment read through the view is not as the cache holds it: containers %v, annotations %v, managed fields %v",
			got.Spec.Template.Spec.Containers, got.Annotations, got.ManagedFields)
	}
	w, err := workload.From(&got)
	if err != nil {
		t.Fatal(err)
	}
	if spec, err := w.Template.Spec(); err != nil || !equality.Semantic.DeepEqual(spec.Spec, d.Spec.Template.Spec) {
		t.Errorf("the packed template reads %v (%v), want the Deployment's", spec, err)
	}

	var pods corev1.PodList
	if err := view.List(ctx, &pods, client.InNamespace("tenant"), client.UnsafeDisableDeepCopy); err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Spec.Containers != nil || pods.Items[0].Name != "kas-1" {
		t.Errorf("pods read through the view = %+v, want kas-1, lean", pods.Items)
	}

	var stored appsv1.Deployment
	if err := store.Get(ctx, client.ObjectKeyFromObject(d), &stored); err != nil {
		t.Fatal(err)
	}
	var storedPod corev1.Pod
	if err := store.Get(ctx, client.ObjectKeyFromObject(pod), &storedPod); err != nil {
		t.Fatal(err)
	}
	if stored.Spec.Template.Spec.Containers == nil || stored.ManagedFields == nil || storedPod.Spec.Containers == nil {
		t.Error("reading through the view changed what the store holds")
	}
}

// TestCacheViewNeverTransformsTheStoresObjects: a list of one namespace (ListIn, whose
// client.ListOptions ask for no copy) through the view still copies, so that a transform
// writing through a pointer its item shares with the store (a selector) leaves the store's
// object as it was.
func TestCacheViewNeverTransformsTheStoresObjects(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	store.Put(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "d"},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d"}}}})
	v := informer.CacheView(store, crcache.Options{ByObject: map[client.Object]crcache.ByObject{&appsv1.Deployment{}: {Transform: func(o any) (any, error) {
		o.(*appsv1.Deployment).Spec.Selector.MatchLabels = map[string]string{"app": "transformed"}
		return o, nil
	}}}})
	var l appsv1.DeploymentList
	if err := informer.ListIn(ctx, v, &l, "a"); err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 || l.Items[0].Spec.Selector.MatchLabels["app"] != "transformed" {
		t.Fatalf("the view's list: %v, want the transformed Deployment", l.Items)
	}
	d := &appsv1.Deployment{}
	if err := store.Get(ctx, client.ObjectKey{Namespace: "a", Name: "d"}, d); err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Selector.MatchLabels["app"]; got != "d" {
		t.Errorf("the store's Deployment after a list through the view: selector app=%s, want d", got)
	}
}
