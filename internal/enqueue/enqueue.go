// Package enqueue maps watch events to reconcile requests for many objects at once.
package enqueue

import (
	"context"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// All returns a request for each object of obj's kind (list is an empty list of it) that r
// holds in namespace, or in every namespace when it is "". Every namespace's are read in
// the informer's store, never copied (informer.Each): a fleet's tens of thousands of
// workloads, deep-copied for their names alone, were most of what a replica held while it
// started, when every controller that watches the policies lists them all at once. One
// namespace's are listed without a deep copy, which still copies each object's top-level
// struct into the list.
func All(ctx context.Context, r client.Reader, obj client.Object, list client.ObjectList, namespace string) []reconcile.Request {
	return Where(ctx, r, obj, list, namespace, nil)
}

// Where is All of the objects keep passes (nil: every one): a controller with work for a
// few of a fleet's objects keeps the rest out of its queue.
func Where(ctx context.Context, r client.Reader, obj client.Object, list client.ObjectList, namespace string, keep func(client.Object) bool) []reconcile.Request {
	var out []reconcile.Request
	add := func(o client.Object) {
		if keep != nil && !keep(o) {
			return
		}
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}})
	}
	var err error
	if namespace == "" {
		err = informer.Each(ctx, r, obj, list, add)
	} else {
		err = informer.EachIn(ctx, r, list, namespace, add)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing objects to reconcile")
		return nil
	}
	return out
}
