package informer

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// UIDIndexes is c with OwnerIndex and UIDIndex kept once per object for the workloads,
// ReplicaSets and ControllerRevisions of the whole cluster. controller-runtime keys a field
// index twice, by namespace and across namespaces, each key a new string with a set of its
// own; the values of these two are UIDs, unique in the cluster, so one key each, the UID
// itself, answers both. With every ReplicaSet in the cluster indexed by both, that is a
// tenth of the cache. Indexes of other fields and objects (the pods' among them) are c's.
func UIDIndexes(c crcache.Cache) crcache.Cache { return uidIndexes{c} }

type uidIndexes struct{ crcache.Cache }

// byUID is whether field of obj's kind (an object or a list) is indexed by UIDIndexes.
func byUID(obj any, field string) (client.Object, bool) {
	if field != OwnerIndex && field != UIDIndex {
		return nil, false
	}
	switch obj.(type) {
	case *appsv1.ReplicaSet, *appsv1.ReplicaSetList:
		return &appsv1.ReplicaSet{}, true
	case *appsv1.ControllerRevision, *appsv1.ControllerRevisionList:
		return &appsv1.ControllerRevision{}, true
	case *appsv1.StatefulSet, *appsv1.StatefulSetList:
		return &appsv1.StatefulSet{}, true
	case *appsv1.DaemonSet, *appsv1.DaemonSetList:
		return &appsv1.DaemonSet{}, true
	case *appsv1.Deployment, *appsv1.DeploymentList:
		return &appsv1.Deployment{}, true
	}
	return nil, false
}

// IndexField indexes field by its values alone for the kinds byUID names.
func (c uidIndexes) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if _, ok := byUID(obj, field); !ok {
		return c.Cache.IndexField(ctx, obj, field, extract)
	}
	inf, err := c.Cache.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return inf.AddIndexers(toolscache.Indexers{field: func(o any) ([]string, error) {
		co, ok := o.(client.Object)
		if !ok {
			return nil, fmt.Errorf("object of type %T is not an Object", o)
		}
		return extract(co), nil
	}})
}

type indexed interface{ GetIndexer() toolscache.Indexer }

// syncedStore is the store of obj's informer in c, once it has synced.
func syncedStore(ctx context.Context, c crcache.Informers, obj client.Object) (toolscache.Indexer, error) {
	inf, err := synced(ctx, c, obj)
	if err != nil {
		return nil, err
	}
	ix, ok := inf.(indexed)
	if !ok {
		return nil, fmt.Errorf("the informer of %T has no store", obj)
	}
	return ix.GetIndexer(), nil
}

// Selects is whether a list with options o, read from a store, holds obj: in its
// namespace, matching its label selector.
func Selects(o *client.ListOptions, obj metav1.Object) bool {
	return (o.Namespace == "" || obj.GetNamespace() == o.Namespace) &&
		(o.LabelSelector == nil || o.LabelSelector.Matches(labels.Set(obj.GetLabels())))
}

// List answers a list by one of the indexes IndexField keeps from it, as controller-runtime's
// cache answers one by a field: in the namespace asked, matching the label selector asked,
// copied unless asked not to.
func (c uidIndexes) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := client.ListOptions{}
	o.ApplyOptions(opts)
	if o.FieldSelector == nil || len(o.FieldSelector.Requirements()) != 1 || o.Continue != "" || o.Limit > 0 {
		return c.Cache.List(ctx, list, opts...)
	}
	req := o.FieldSelector.Requirements()[0]
	obj, ok := byUID(list, req.Field)
	if !ok {
		return c.Cache.List(ctx, list, opts...)
	}
	value, exact := o.FieldSelector.RequiresExactMatch(req.Field)
	if !exact {
		return fmt.Errorf("field selector %q: only an exact match of %s is supported by the cache", o.FieldSelector, req.Field)
	}
	store, err := syncedStore(ctx, c.Cache, obj)
	if err != nil {
		return err
	}
	items, err := store.ByIndex(req.Field, value)
	if err != nil {
		return err
	}
	copied := o.UnsafeDisableDeepCopy == nil || !*o.UnsafeDisableDeepCopy
	out := make([]runtime.Object, 0, len(items))
	for _, item := range items {
		co, ok := item.(client.Object)
		if !ok {
			return fmt.Errorf("cache contained %T, which is not an Object", item)
		}
		if !Selects(&o, co) {
			continue
		}
		if copied {
			co = co.DeepCopyObject().(client.Object)
		}
		out = append(out, co)
	}
	if err := apimeta.SetList(list, out); err != nil {
		return err
	}
	list.SetContinue("continue-not-supported")
	return nil
}
