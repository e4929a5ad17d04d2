// Package memstore is an in-memory object store that reads the way controller-runtime's
// informer cache does and writes the way the API server does for the few calls holdfast's
// handlers make: Create, Update and Delete with optimistic concurrency. It lets the
// production handlers run offline, in `holdfast simulate` and in unit tests of handlers
// and benchmarks; it is not an API server (no defaulting, validation, admission or watch).
package memstore

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Store holds objects by Go type and key. Reads deep-copy what they return unless asked
// not to with client.UnsafeDisableDeepCopy, answer NotFound for missing objects, and list
// by namespace, labels and exact-match indexes whose values are computed when an object is
// stored, as the cache's indexer does. Lists return objects in the order they were first
// stored, so that what runs on it is deterministic. A Store is not safe for concurrent use.
type Store struct {
	byType  map[reflect.Type]*objects
	indexes map[string]client.IndexerFunc
	version int
	// Now, when set, stamps the creation time of objects created through Create.
	Now func() metav1.Time
}

type objects struct {
	byKey map[client.ObjectKey]*stored
	order []client.ObjectKey
}

type stored struct {
	obj client.Object
	// indexed are the object's values of each index.
	indexed map[string][]string
}

// New is an empty store with the field indexes given by name, as registered with the
// manager's FieldIndexer.
func New(indexes map[string]client.IndexerFunc) *Store {
	return &Store{byType: map[reflect.Type]*objects{}, indexes: indexes}
}

// Put stores obj as it is (not a copy), replacing an object of the same type and key; it
// is how the owner of the store changes what readers see.
func (s *Store) Put(obj client.Object) {
	t := reflect.TypeOf(obj)
	objs := s.byType[t]
	if objs == nil {
		objs = &objects{byKey: map[client.ObjectKey]*stored{}}
		s.byType[t] = objs
	}
	key := client.ObjectKeyFromObject(obj)
	st := &stored{obj: obj, indexed: make(map[string][]string, len(s.indexes))}
	for name, index := range s.indexes {
		st.indexed[name] = index(obj)
	}
	if _, ok := objs.byKey[key]; !ok {
		objs.order = append(objs.order, key)
	}
	objs.byKey[key] = st
}

// Remove removes the object of obj's type and key, if stored.
func (s *Store) Remove(obj client.Object) {
	objs := s.byType[reflect.TypeOf(obj)]
	if objs == nil {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	if _, ok := objs.byKey[key]; ok {
		delete(objs.byKey, key)
		objs.order = slices.DeleteFunc(objs.order, func(k client.ObjectKey) bool { return k == key })
	}
}

// Len is how many objects of obj's type the store holds.
func (s *Store) Len(obj client.Object) int {
	if objs := s.byType[reflect.TypeOf(obj)]; objs != nil {
		return len(objs.byKey)
	}
	return 0
}

func (s *Store) lookup(t reflect.Type, key client.ObjectKey) *stored {
	if objs := s.byType[t]; objs != nil {
		return objs.byKey[key]
	}
	return nil
}

func notFound(t reflect.Type, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Resource: t.Elem().Name()}, name)
}

// Get implements client.Reader.
func (s *Store) Get(_ context.Context, key client.ObjectKey, out client.Object, opts ...client.GetOption) error {
	o := client.GetOptions{}
	o.ApplyOptions(opts)
	copied := o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy
	if pm, ok := out.(*metav1.PartialObjectMetadata); ok {
		return s.getMetadata(key, pm, copied)
	}
	st := s.lookup(reflect.TypeOf(out), key)
	if st == nil {
		return notFound(reflect.TypeOf(out), key.Name)
	}
	obj := st.obj
	if copied {
		obj = obj.DeepCopyObject().(client.Object)
	}
	reflect.ValueOf(out).Elem().Set(reflect.ValueOf(obj).Elem())
	return nil
}

// getMetadata reads the metadata of an object whose Go type is named as pm's kind.
func (s *Store) getMetadata(key client.ObjectKey, pm *metav1.PartialObjectMetadata, copied bool) error {
	kind := pm.GroupVersionKind().Kind
	for t := range s.byType {
		if t.Elem().Name() != kind {
			continue
		}
		if st := s.lookup(t, key); st != nil {
			om := st.obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
			if copied {
				om = om.DeepCopy()
			}
			pm.ObjectMeta = *om
			return nil
		}
	}
	return apierrors.NewNotFound(schema.GroupResource{Resource: kind}, key.Name)
}

// List implements client.Reader. A PartialObjectMetadataList lists the metadata of the
// objects whose Go type is named as its kind less "List", as the cache's metadata
// informer does.
func (s *Store) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	copied := o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy
	var reqs fields.Requirements
	if o.FieldSelector != nil {
		reqs = o.FieldSelector.Requirements()
		for _, req := range reqs {
			if _, ok := s.indexes[req.Field]; !ok {
				return fmt.Errorf("no index %q", req.Field)
			}
		}
	}
	if pl, ok := list.(*metav1.PartialObjectMetadataList); ok {
		return s.listMetadata(pl, o, reqs, copied)
	}
	itemsPtr, err := meta.GetItemsPtr(list)
	if err != nil {
		return err
	}
	objs := s.byType[reflect.PointerTo(reflect.TypeOf(itemsPtr).Elem().Elem())]
	if objs == nil {
		return meta.SetList(list, nil)
	}
	out := make([]runtime.Object, 0, len(objs.order))
	for _, key := range objs.order {
		if obj := objs.byKey[key].matching(o, reqs); obj != nil {
			if copied {
				obj = obj.DeepCopyObject().(client.Object)
			}
			out = append(out, obj)
		}
	}
	return meta.SetList(list, out)
}

// listMetadata lists into pl the metadata of the objects of its kind that match.
func (s *Store) listMetadata(pl *metav1.PartialObjectMetadataList, o client.ListOptions, reqs fields.Requirements, copied bool) error {
	gvk := pl.GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	pl.Items = nil
	for t, objs := range s.byType {
		if t.Elem().Name() != gvk.Kind {
			continue
		}
		for _, key := range objs.order {
			obj := objs.byKey[key].matching(o, reqs)
			if obj == nil {
				continue
			}
			om := obj.(metav1.ObjectMetaAccessor).GetObjectMeta().(*metav1.ObjectMeta)
			if copied {
				om = om.DeepCopy()
			}
			pm := metav1.PartialObjectMetadata{ObjectMeta: *om}
			pm.SetGroupVersionKind(gvk)
			pl.Items = append(pl.Items, pm)
		}
	}
	return nil
}

// matching is the object stored, not copied, when it is in o's namespace (any when unset),
// its labels match o's selector and its indexes hold each requirement's value; else nil.
func (st *stored) matching(o client.ListOptions, reqs fields.Requirements) client.Object {
	obj := st.obj
	if o.Namespace != "" && obj.GetNamespace() != o.Namespace {
		return nil
	}
	if o.LabelSelector != nil && !o.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
		return nil
	}
	if slices.ContainsFunc(reqs, func(req fields.Requirement) bool { return !slices.Contains(st.indexed[req.Field], req.Value) }) {
		return nil // not every requirement met
	}
	return obj
}

// Writer is the store seen as the API server by a client that creates, updates and
// deletes objects with optimistic concurrency (holdfast's ledgers). Methods holdfast never
// calls answer an error.
type Writer struct {
	*Store
}

var _ client.Client = Writer{}

// Create implements client.Writer: AlreadyExists for a taken key; it sets the
// resourceVersion, a UID and the creation time.
func (w Writer) Create(_ context.Context, obj client.Object, opts ...client.CreateOption) error {
	if dryRun(opts) {
		return nil
	}
	t := reflect.TypeOf(obj)
	if w.lookup(t, client.ObjectKeyFromObject(obj)) != nil {
		return apierrors.NewAlreadyExists(schema.GroupResource{Resource: t.Elem().Name()}, obj.GetName())
	}
	w.version++
	obj.SetResourceVersion(strconv.Itoa(w.version))
	obj.SetUID(types.UID(fmt.Sprintf("memstore-%d", w.version)))
	if w.Now != nil {
		obj.SetCreationTimestamp(w.Now())
	}
	w.Put(obj.DeepCopyObject().(client.Object))
	return nil
}

// Update implements client.Writer: NotFound for a missing object, Conflict for a stale
// resourceVersion.
func (w Writer) Update(_ context.Context, obj client.Object, opts ...client.UpdateOption) error {
	t := reflect.TypeOf(obj)
	st := w.lookup(t, client.ObjectKeyFromObject(obj))
	switch {
	case st == nil:
		return notFound(t, obj.GetName())
	case obj.GetResourceVersion() != "" && st.obj.GetResourceVersion() != obj.GetResourceVersion():
		return apierrors.NewConflict(schema.GroupResource{Resource: t.Elem().Name()}, obj.GetName(), fmt.Errorf("the object has been modified"))
	}
	o := client.UpdateOptions{}
	o.ApplyOptions(opts)
	if len(o.DryRun) > 0 {
		return nil
	}
	w.version++
	obj.SetResourceVersion(strconv.Itoa(w.version))
	w.Put(obj.DeepCopyObject().(client.Object))
	return nil
}

// Delete implements client.Writer, with UID and resourceVersion preconditions.
func (w Writer) Delete(_ context.Context, obj client.Object, opts ...client.DeleteOption) error {
	t := reflect.TypeOf(obj)
	st := w.lookup(t, client.ObjectKeyFromObject(obj))
	if st == nil {
		return notFound(t, obj.GetName())
	}
	o := client.DeleteOptions{}
	o.ApplyOptions(opts)
	if p := o.Preconditions; p != nil && ((p.UID != nil && *p.UID != st.obj.GetUID()) ||
		(p.ResourceVersion != nil && *p.ResourceVersion != st.obj.GetResourceVersion())) {
		return apierrors.NewConflict(schema.GroupResource{Resource: t.Elem().Name()}, obj.GetName(), fmt.Errorf("precondition failed"))
	}
	if len(o.DryRun) > 0 {
		return nil
	}
	w.Remove(obj)
	return nil
}

func dryRun(opts []client.CreateOption) bool {
	o := client.CreateOptions{}
	o.ApplyOptions(opts)
	return len(o.DryRun) > 0
}

var errUnsupported = fmt.Errorf("memstore: not supported")

// Patch implements client.Writer: unsupported.
func (Writer) Patch(context.Context, client.Object, client.Patch, ...client.PatchOption) error {
	return errUnsupported
}

// Apply implements client.Writer: unsupported.
func (Writer) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return errUnsupported
}

// DeleteAllOf implements client.Writer: unsupported.
func (Writer) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return errUnsupported
}

// Status implements client.StatusClient: unsupported.
func (Writer) Status() client.SubResourceWriter { return unsupportedSubResource{} }

// SubResource implements client.SubResourceClientConstructor: unsupported.
func (Writer) SubResource(string) client.SubResourceClient { return unsupportedSubResource{} }

// Scheme implements client.Client: none.
func (Writer) Scheme() *runtime.Scheme { return nil }

// RESTMapper implements client.Client: none.
func (Writer) RESTMapper() meta.RESTMapper { return nil }

// GroupVersionKindFor implements client.Client: unsupported.
func (Writer) GroupVersionKindFor(runtime.Object) (schema.GroupVersionKind, error) {
	return schema.GroupVersionKind{}, errUnsupported
}

// IsObjectNamespaced implements client.Client: unsupported.
func (Writer) IsObjectNamespaced(runtime.Object) (bool, error) { return false, errUnsupported }

type unsupportedSubResource struct{}

func (unsupportedSubResource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return errUnsupported
}

func (unsupportedSubResource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return errUnsupported
}

func (unsupportedSubResource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return errUnsupported
}

func (unsupportedSubResource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return errUnsupported
}

func (unsupportedSubResource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return errUnsupported
}
