package informer

import (
	"errors"
	"reflect"
	"sort"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deploymentRecord is a record of a Deployment, as workload.Record makes them: here its
// metadata and replicas.
type deploymentRecord struct {
	metav1.ObjectMeta
	replicas int32
}

func (r *deploymentRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (r *deploymentRecord) DeepCopyObject() runtime.Object {
	c := *r
	r.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return &c
}

func (r *deploymentRecord) Into(obj client.Object, deep bool) bool {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return false
	}
	*d = appsv1.Deployment{ObjectMeta: r.ObjectMeta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(r.replicas)}}
	if deep {
		*d = *d.DeepCopy()
	}
	d.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("Deployment"))
	return true
}

func (r *deploymentRecord) Typed() client.Object {
	d := &appsv1.Deployment{}
	r.Into(d, false)
	return d
}

// toRecord is the test's transform: Deployments with replicas become records, others stay
// typed.
func toRecord(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok || d.Spec.Replicas == nil {
		return obj, nil
	}
	return &deploymentRecord{ObjectMeta: d.ObjectMeta, replicas: *d.Spec.Replicas}, nil
}

// TestRecordsReadTypedObjects: the cache's reads of workloads held as records hand out
// the typed objects they stand for (by name, whole, by namespace, by labels, by UID),
// copied unless asked not to, and so do its informers to their handlers; the walk of the
// store hands out the records.
func TestRecordsReadTypedObjects(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	dep := func(ns, name, app string, replicas *int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name),
			Labels: map[string]string{"app": app}}, Spec: appsv1.DeploymentSpec{Replicas: replicas}}
	}
	src.Add(dep("a", "web", "web", ptr.To[int32](3)))
	src.Add(dep("a", "db", "db", ptr.To[int32](1)))
	src.Add(dep("b", "web", "web", ptr.To[int32](2)))
	src.Add(dep("b", "typed", "web", nil)) // stays typed
	sii := toolscache.NewSharedIndexInformer(src, &appsv1.Deployment{}, 0, toolscache.Indexers{
		toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc,
		UIDIndex:                  func(o any) ([]string, error) { return []string{string(o.(client.Object).GetUID())}, nil },
	})
	if err := sii.SetTransform(toRecord); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	c := Records(oneInformerCache{inf: sii})

	var notStarted *crcache.ErrCacheNotStarted
	if err := c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "web"}, &appsv1.Deployment{}); !errors.As(err, &notStarted) {
		t.Fatalf("a read before the informer synced: %v, want ErrCacheNotStarted", err)
	}
	go sii.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), sii.HasSynced) {
		t.Fatal("the informer did not sync")
	}

	got := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "web"}, got); err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 3 || got.Labels["app"] != "web" || got.Kind != "Deployment" {
		t.Fatalf("read %+v, want a/web's 3 replicas, its labels and its kind", got)
	}
	got.Labels["app"] = "written"
	stored, _, _ := sii.GetStore().GetByKey("a/web")
	if stored.(*deploymentRecord).Labels["app"] != "web" {
		t.Fatal("a copying read shares its labels with the store")
	}
	shared := &appsv1.Deployment{}
	if err := Get(ctx, c, client.ObjectKey{Namespace: "a", Name: "web"}, shared); err != nil {
		t.Fatal(err)
	}
	if reflect.ValueOf(shared.Labels).UnsafePointer() != reflect.ValueOf(stored.(*deploymentRecord).Labels).UnsafePointer() {
		t.Error("a read without a copy copied the labels")
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "b", Name: "typed"}, got); err != nil || got.Spec.Replicas != nil || got.Name != "typed" {
		t.Fatalf("a typed object in the store: %+v (%v)", got, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "a", Name: "gone"}, got); !apierrors.IsNotFound(err) {
		t.Fatalf("a missing Deployment: %v, want NotFound", err)
	}

	names := func(opts ...client.ListOption) []string {
		t.Helper()
		l := &appsv1.DeploymentList{}
		if err := c.List(ctx, l, opts...); err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, d := range l.Items {
			out = append(out, d.Namespace+"/"+d.Name)
		}
		sort.Strings(out)
		return out
	}
	for _, tc := range []struct {
		opts []client.ListOption
		want []string
	}{
		{nil, []string{"a/db", "a/web", "b/typed", "b/web"}},
		{[]client.ListOption{client.InNamespace("a")}, []string{"a/db", "a/web"}},
		{[]client.ListOption{client.MatchingLabels{"app": "web"}}, []string{"a/web", "b/typed", "b/web"}},
		{[]client.ListOption{client.InNamespace("b"), client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{"app": "web"})}}, []string{"b/typed", "b/web"}},
		{[]client.ListOption{client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(UIDIndex, "uid-b-web")}}, []string{"b/web"}},
		{[]client.ListOption{client.InNamespace("a"), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(UIDIndex, "uid-b-web")}}, nil},
	} {
		if got := names(tc.opts...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("list %v: %v, want %v", tc.opts, got, tc.want)
		}
	}
	if err := c.List(ctx, &appsv1.DeploymentList{}, client.MatchingFields{"metadata.name": "web"}); err == nil {
		t.Error("a list by a field the cache does not index answered")
	}

	// Handlers see Deployments, whether handed out or walked; the walk sees records.
	fanned, err := FanOut(oneInformerCache{inf: sii}).GetInformer(ctx, &appsv1.Deployment{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := make(chan string, 16)
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { kinds <- reflect.TypeOf(obj).String() },
		UpdateFunc: func(_, obj any) { kinds <- reflect.TypeOf(obj).String() },
	}
	for range 2 { // the first handed out, the second walked
		if _, err := fanned.AddEventHandler(handler); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 * 4 {
		if k := <-kinds; k != "*v1.Deployment" {
			t.Fatalf("a handler was handed a %s", k)
		}
	}
	// A queue holds the store's records, not typed copies, however long it grows.
	release := make(chan struct{})
	slow, err := fanned.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(any) { <-release }})
	if err != nil {
		t.Fatal(err)
	}
	h := slow.(*fanHandler)
	h.mu.Lock()
	for _, e := range h.queue {
		if _, ok := e.newObj.(Record); !ok && e.newObj.(client.Object).GetName() != "typed" {
			t.Errorf("a handler's queue holds a %T", e.newObj)
		}
	}
	h.mu.Unlock()
	close(release)

	records := 0
	if err := Each(ctx, oneInformerCache{inf: sii}, &appsv1.Deployment{}, &appsv1.DeploymentList{}, func(o client.Object) {
		if _, ok := o.(Record); ok {
			records++
		}
	}); err != nil || records != 3 {
		t.Errorf("the walk handed out %d records (%v), want the store's 3", records, err)
	}
}
