package informer

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheView reads r as a cache built with opts holds it: every object it returns has been
// through the transform opts give its type (ByObject, else DefaultTransform), as the
// informers apply them to what they store. It lets what reads a store or the API server
// instead of holdfast's cache (holdfast simulate, check --cluster) decide on exactly what
// the webhook decides on: templates packed, revisions slimmed, pods lean. Reads always
// copy (client.UnsafeDisableDeepCopy is dropped): the transforms change what they are given.
func CacheView(r client.Reader, opts crcache.Options) client.Reader {
	v := view{Reader: r, byType: map[reflect.Type]toolscache.TransformFunc{}, otherwise: opts.DefaultTransform}
	for obj, o := range opts.ByObject {
		if o.Transform != nil {
			v.byType[reflect.TypeOf(obj)] = o.Transform
		}
	}
	return v
}

type view struct {
	client.Reader
	byType    map[reflect.Type]toolscache.TransformFunc
	otherwise toolscache.TransformFunc
}

func (v view) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := v.Reader.Get(ctx, key, obj, Copying(opts)...); err != nil {
		return err
	}
	return v.transform(obj)
}

func (v view) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := v.Reader.List(ctx, list, Copying(opts)...); err != nil {
		return err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	for _, item := range items {
		if err := v.transform(item); err != nil {
			return err
		}
	}
	return nil
}

// Copying is opts without client.UnsafeDisableDeepCopy, whether given alone or within
// client.ListOptions or client.GetOptions (informer.ListIn's): a read that changes what it
// returns (the view's transforms, a test's mutants) must not be handed the store's own
// objects, whose pointers a list's items share.
func Copying[O any](opts []O) []O {
	out := make([]O, 0, len(opts))
	for _, o := range opts {
		switch opt := any(o).(type) {
		case client.UnsafeDisableDeepCopyOption:
			continue
		case *client.ListOptions:
			c := *opt
			c.UnsafeDisableDeepCopy = nil
			o = any(&c).(O)
		case *client.GetOptions:
			c := *opt
			c.UnsafeDisableDeepCopy = nil
			o = any(&c).(O)
		}
		out = append(out, o)
	}
	return out
}

// transform applies obj's transform to obj, as the cache stores what its transform returns.
func (v view) transform(obj runtime.Object) error {
	t, ok := v.byType[reflect.TypeOf(obj)]
	if !ok {
		t = v.otherwise
	}
	if t == nil {
		return nil
	}
	out, err := t(obj)
	if err != nil {
		return err
	}
	if out == any(obj) {
		return nil
	}
	if r, ok := out.(Record); ok {
		// A transform that makes a record (workload.Record): obj is what reads of it hand
		// out.
		if co, ok := obj.(client.Object); !ok || !r.Into(co, false) {
			return fmt.Errorf("the cache's transform of %T returned a %T", obj, out)
		}
		return nil
	}
	// A transform that builds a new object (LeanPod): it takes obj's place.
	to, from := reflect.ValueOf(obj), reflect.ValueOf(out)
	if from.Type() != to.Type() {
		return fmt.Errorf("the cache's transform of %T returned a %T", obj, out)
	}
	to.Elem().Set(from.Elem())
	return nil
}
