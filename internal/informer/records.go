package informer

import (
	"context"
	"fmt"
	"reflect"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Record is an object a cache's transform made of a typed one, so as to hold it in less
// memory (workload.Record): the cache's reads hand out the typed object it stands for
// (Records), and so do its informers to their handlers (FanOut). A walk of a store (Each)
// hands out the records themselves.
type Record interface {
	client.Object
	// Into sets obj, of the record's kind, to the object the record stands for, sharing the
	// record's maps and slices unless deep; false for an object of another kind.
	Into(obj client.Object, deep bool) bool
	// Typed is a new object the record stands for, sharing the record's maps and slices.
	Typed() client.Object
}

// Typed is the typed object obj stands for if it is a record (a walk of the store hands
// them out), sharing its maps and slices (read it, never write it); any other object as it
// is.
func Typed(obj client.Object) client.Object {
	if r, ok := obj.(Record); ok {
		return r.Typed()
	}
	return obj
}

// typed is Typed of what a store or an event holds, a tombstone's object included.
func typed(obj any) any {
	switch o := obj.(type) {
	case Record:
		return o.Typed()
	case toolscache.DeletedFinalStateUnknown:
		if r, ok := o.Obj.(Record); ok {
			o.Obj = r.Typed()
		}
		return o
	}
	return obj
}

// recordedKind is a kind whose cached objects may be records.
type recordedKind struct {
	// object is an empty object of the kind, never written: GetInformer reads its type.
	object client.Object
	gvk    schema.GroupVersionKind
}

// recordedKinds are the kinds Records reads, by the Go type of their objects and lists:
// the workloads, which holdfast's cache holds as workload.Record makes them.
var recordedKinds = func() map[reflect.Type]recordedKind {
	out := map[reflect.Type]recordedKind{}
	for _, k := range []struct {
		obj  client.Object
		list client.ObjectList
	}{
		{&appsv1.Deployment{}, &appsv1.DeploymentList{}},
		{&appsv1.StatefulSet{}, &appsv1.StatefulSetList{}},
		{&appsv1.DaemonSet{}, &appsv1.DaemonSetList{}},
	} {
		rk := recordedKind{object: k.obj, gvk: appsv1.SchemeGroupVersion.WithKind(reflect.TypeOf(k.obj).Elem().Name())}
		out[reflect.TypeOf(k.obj)] = rk
		out[reflect.TypeOf(k.list)] = rk
	}
	return out
}()

// Records is c with the workloads read from their informers' stores, which may hold
// records (Record) in place of typed objects: Get and List hand out the typed objects,
// copied unless asked not to, as controller-runtime's cache reads them. Lists by field
// select by OwnerIndex or UIDIndex only, the indexes UIDIndexes keeps by value.
func Records(c crcache.Cache) crcache.Cache { return records{c} }

type records struct{ crcache.Cache }

// Get reads a workload from its informer's store.
func (c records) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	k, ok := recordedKinds[reflect.TypeOf(obj)]
	if !ok {
		return c.Cache.Get(ctx, key, obj, opts...)
	}
	o := client.GetOptions{}
	o.ApplyOptions(opts)
	store, err := syncedStore(ctx, c.Cache, k.object)
	if err != nil {
		return err
	}
	item, exists, err := store.GetByKey(toolscache.ObjectName{Namespace: key.Namespace, Name: key.Name}.String())
	if err != nil {
		return err
	}
	if !exists {
		// As controller-runtime's cache answers: the kind in place of the resource.
		return apierrors.NewNotFound(schema.GroupResource{Group: k.gvk.Group, Resource: k.gvk.Kind}, key.Name)
	}
	return fill(obj, item, k, o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy)
}

// fill sets obj to item (a record or a typed object of obj's kind), deep copied if deep.
func fill(obj client.Object, item any, k recordedKind, deep bool) error {
	if r, ok := item.(Record); ok {
		if !r.Into(obj, deep) {
			return fmt.Errorf("the cache holds a %T, not a record of a %T", r, obj)
		}
		return nil
	}
	co, ok := item.(client.Object)
	if !ok {
		return fmt.Errorf("cache contained %T, which is not an Object", item)
	}
	if deep {
		co = co.DeepCopyObject().(client.Object)
	}
	to, from := reflect.ValueOf(obj), reflect.ValueOf(co)
	if from.Type() != to.Type() {
		return fmt.Errorf("the cache holds a %T, not a %T", co, obj)
	}
	to.Elem().Set(from.Elem())
	obj.GetObjectKind().SetGroupVersionKind(k.gvk)
	return nil
}

// List lists workloads from their informer's store: by OwnerIndex or UIDIndex, else in a
// namespace, else all; matching the label selector asked.
func (c records) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	k, ok := recordedKinds[reflect.TypeOf(list)]
	if !ok {
		return c.Cache.List(ctx, list, opts...)
	}
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	if o.Continue != "" {
		return fmt.Errorf("the cache lists %s whole: no continue", k.gvk.Kind)
	}
	store, err := syncedStore(ctx, c.Cache, k.object)
	if err != nil {
		return err
	}
	var items []any
	switch {
	case o.FieldSelector != nil && !o.FieldSelector.Empty():
		reqs := o.FieldSelector.Requirements()
		value, exact := "", false
		if len(reqs) == 1 && (reqs[0].Field == OwnerIndex || reqs[0].Field == UIDIndex) {
			value, exact = o.FieldSelector.RequiresExactMatch(reqs[0].Field)
		}
		if !exact {
			return fmt.Errorf("field selector %q: the cache lists %s by an exact %s or %s only", o.FieldSelector, k.gvk.Kind, OwnerIndex, UIDIndex)
		}
		items, err = store.ByIndex(reqs[0].Field, value)
	case o.Namespace != "":
		items, err = store.ByIndex(toolscache.NamespaceIndex, o.Namespace)
	default:
		items = store.List()
	}
	if err != nil {
		return err
	}
	deep := o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy
	out := reflect.ValueOf(list).Elem().FieldByName("Items")
	out.Set(reflect.MakeSlice(out.Type(), 0, len(items)))
	for _, item := range items {
		co, ok := item.(client.Object)
		if !ok {
			return fmt.Errorf("cache contained %T, which is not an Object", item)
		}
		if !Selects(&o, co) {
			continue
		}
		if o.Limit > 0 && int64(out.Len()) == o.Limit {
			break
		}
		out.Set(reflect.Append(out, reflect.Zero(out.Type().Elem())))
		if err := fill(out.Index(out.Len()-1).Addr().Interface().(client.Object), item, k, deep); err != nil {
			return err
		}
	}
	list.SetContinue("continue-not-supported") // as controller-runtime's cache marks its lists
	return nil
}
