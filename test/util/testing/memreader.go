package testing

import (
	"context"
	"fmt"
	"reflect"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MemReader is a client.Reader over objects held in memory that reads the way
// controller-runtime's informer cache does: it deep-copies what it returns unless asked
// not to with client.UnsafeDisableDeepCopy, answers NotFound for missing objects, and
// lists by namespace, labels and exact-match indexes, whose values it computes when it
// stores an object, as the cache's indexer does. It stands in for the cache in benchmarks
// and unit tests of handlers; it is not an API server.
type MemReader struct {
	objects map[reflect.Type][]stored
	indexes map[string]client.IndexerFunc
}

type stored struct {
	obj client.Object
	// indexed are the object's values of each index.
	indexed map[string][]string
}

// NewMemReader holds objs; indexes maps a field index name to its function, as
// registered with the manager's FieldIndexer.
func NewMemReader(indexes map[string]client.IndexerFunc, objs ...client.Object) *MemReader {
	r := &MemReader{objects: map[reflect.Type][]stored{}, indexes: indexes}
	for _, o := range objs {
		s := stored{obj: o, indexed: map[string][]string{}}
		for name, index := range indexes {
			s.indexed[name] = index(o)
		}
		t := reflect.TypeOf(o)
		r.objects[t] = append(r.objects[t], s)
	}
	return r
}

// Get implements client.Reader.
func (r *MemReader) Get(_ context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	o := client.GetOptions{}
	o.ApplyOptions(opts)
	copied := o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy
	if pm, ok := out.(*metav1.PartialObjectMetadata); ok {
		return r.getMetadata(key, pm, copied)
	}
	for _, s := range r.objects[reflect.TypeOf(out)] {
		if obj := s.obj; obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
			if copied {
				obj = obj.DeepCopyObject().(client.Object)
			}
			reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: reflect.TypeOf(out).Elem().Name()}, key.Name)
}

// getMetadata reads the metadata of an object whose Go type is named as pm's kind.
func (r *MemReader) getMetadata(key client.ObjectKey, pm *metav1.PartialObjectMetadata, copied bool) error {
	kind := pm.GroupVersionKind().Kind
	for t, objs := range r.objects {
		if t.Elem().Name() != kind {
			continue
		}
		for _, s := range objs {
			if obj := s.obj; obj.GetNamespace() == key.Namespace && obj.GetName() == key.Name {
				om := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
				if copied {
					om = om.DeepCopy()
				}
				pm.ObjectMeta = *om
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
	objs := r.objects[reflect.PointerTo(reflect.TypeOf(itemsPtr).Elem().Elem())]
	var reqs fields.Requirements
	if o.FieldSelector != nil {
		reqs = o.FieldSelector.Requirements()
		for _, req := range reqs {
			if _, ok := r.indexes[req.Field]; !ok {
				return fmt.Errorf("no index %q", req.Field)
			}
		}
	}
	out := make([]runtime.Object, 0, len(objs))
	for _, s := range objs {
		obj := s.obj
		if o.Namespace != "" && obj.GetNamespace() != o.Namespace {
			continue
		}
		if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		if slices.ContainsFunc(reqs, func(req fields.Requirement) bool { return !slices.Contains(s.indexed[req.Field], req.Value) }) {
			continue // not every requirement met
		}
		if o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy {
			obj = obj.DeepCopyObject().(client.Object)
		}
		out = append(out, obj)
	}
	return meta.SetList(list, out)
}

// ReaderFunc reads through whichever reader the function returns at each call: a model's
// replica cache, swapped at each sync.
type ReaderFunc func() client.Reader

// Get implements client.Reader.
func (f ReaderFunc) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return f().Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (f ReaderFunc) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return f().List(ctx, list, opts...)
}
