package testing

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MemReader is a client.Reader over objects held in memory that reads the way
// controller-runtime's informer cache does: it deep-copies what it returns unless asked
// not to with client.UnsafeDisableDeepCopy, answers NotFound for missing objects, and
// lists by namespace, labels and exact-match indexes. It stands in for the cache in
// benchmarks and unit tests of handlers; it is not an API server.
type MemReader struct {
	objects map[reflect.Type][]client.Object
	indexes map[string]client.IndexerFunc
}

// NewMemReader holds objs; indexes maps a field index name to its function, as
// registered with the manager's FieldIndexer.
func NewMemReader(indexes map[string]client.IndexerFunc, objs ...client.Object) *MemReader {
	r := &MemReader{objects: map[reflect.Type][]client.Object{}, indexes: indexes}
	for _, o := range objs {
		t := reflect.TypeOf(o)
		r.objects[t] = append(r.objects[t], o)
	}
	return r
}

// Get implements client.Reader.
func (r *MemReader) Get(_ context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	o := client.GetOptions{}
	o.ApplyOptions(opts)
	if pm, ok := out.(*metav1.PartialObjectMetadata); ok {
		return r.getMetadata(key, pm)
	}
	for _, obj := range r.objects[reflect.TypeOf(out)] {
		if obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
			if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
				obj = obj.DeepCopyObject().(client.Object)
			}
			reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: reflect.TypeOf(out).Elem().Name()}, key.Name)
}

// getMetadata reads the metadata of an object whose Go type is named as pm's kind.
func (r *MemReader) getMetadata(key client.ObjectKey, pm *metav1.PartialObjectMetadata) error {
	kind := pm.GroupVersionKind().Kind
	for t, objs := range r.objects {
		if t.Elem().Name() != kind {
			continue
		}
		for _, obj := range objs {
			if obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
				om := reflect.ValueOf(obj).Elem().FieldByName("ObjectMeta").Interface().(metav1.ObjectMeta)
				pm.ObjectMeta = *om.DeepCopy()
				return nil
			}
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: kind}, key.Name)
}

// List implements client.Reader.
func (r *MemReader) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	itemsPtr, err := meta.GetItemsPtr(list)
	if err != nil {
		return err
	}
	items := reflect.ValueOf(itemsPtr).Elem()
	item := reflect.New(items.Type().Elem()).Interface()
	var out []runtime.Object
	for _, obj := range r.objects[reflect.TypeOf(item)] {
		if o.Namespace != "" && obj.GetNamespace() != o.Namespace {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		if o.FieldSelector != nil {
			match := true
			for _, req := range o.FieldSelector.Requirements() {
				index, ok := r.indexes[req.Field]
				if !ok {
					return fmt.Errorf("no index %q", req.Field)
				}
				found := false
				for _, v := range index(obj) {
					found = found || v == req.Value
				}
				match = match && found
			}
			if !match {
				continue
			}
		}
		if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
			obj = obj.DeepCopyObject().(client.Object)
		}
		out = append(out, obj)
	}
	return meta.SetList(list, out)
}
