// Package enqueue maps watch events to reconcile requests for many objects at once.
package enqueue

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// All lists the objects of a kind (newList gives an empty list of it) and returns a
// request for each.
func All(ctx context.Context, c client.Reader, newList func() client.ObjectList, opts ...client.ListOption) []reconcile.Request {
	list := newList()
	if err := c.List(ctx, list, opts...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing objects to reconcile")
		return nil
	}
	objs, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(objs))
	for _, o := range objs {
		if m, err := meta.Accessor(o); err == nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: m.GetNamespace(), Name: m.GetName()}})
		}
	}
	return out
}
