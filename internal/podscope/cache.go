package podscope

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Cache is the manager's cache with its pods read through the Scope: Get and List of pods,
// their informer (whose handlers see the pods of every watch) and their indexes.
type Cache struct {
	crcache.Cache
	scope *Scope
}

var podKind = corev1.SchemeGroupVersion.WithKind("Pod")

func isPod(obj any) bool {
	switch obj.(type) {
	case *corev1.Pod, *corev1.PodList:
		return true
	}
	return false
}

// Get reads a pod from the watch that holds it, or anything else from the manager's cache.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*corev1.Pod); ok {
		return c.scope.getPod(ctx, key, p, opts...)
	}
	return c.Cache.Get(ctx, key, obj, opts...)
}

// List lists pods from the watch that covers them, or from the API server.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if l, ok := list.(*corev1.PodList); ok {
		return c.scope.listPods(ctx, l, opts...)
	}
	return c.Cache.List(ctx, list, opts...)
}

// GetInformer returns, for pods, an informer over every watch of the Scope.
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	if isPod(obj) {
		return c.scope, nil
	}
	return c.Cache.GetInformer(ctx, obj, opts...)
}

// GetInformerForKind is GetInformer by kind.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	if gvk == podKind {
		return c.scope, nil
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

// RemoveInformer leaves the pod watches to the Scope's plan.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	if isPod(obj) {
		return nil
	}
	return c.Cache.RemoveInformer(ctx, obj)
}

// IndexField adds a pod index to every watch, present and future.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if isPod(obj) {
		return c.scope.indexField(ctx, field, extract)
	}
	return c.Cache.IndexField(ctx, obj, field, extract)
}

func (s *Scope) indexField(ctx context.Context, field string, extract client.IndexerFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil {
		return errors.New("pod indexes must be added before the pod scope starts")
	}
	s.indexers[field] = extract
	return nil
}

// The Scope is the pods' informer: a handler added to it sees the pods of every watch, those
// started later included (a replaced watch's new cache lists its pods as added again).

// AddEventHandler adds a handler to every watch.
func (s *Scope) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds a handler to every watch.
func (s *Scope) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return s.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions adds a handler to every watch.
func (s *Scope) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &registration{handler: h, opts: o, scope: s}
	s.regs = append(s.regs, r)
	for _, w := range s.running() {
		r.attach(w)
	}
	return r, nil
}

// RemoveEventHandler removes a handler from every watch.
func (s *Scope) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*registration)
	if !ok {
		return errors.New("not a registration of the pod scope")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, x := range s.regs {
		if x == r {
			s.regs = append(s.regs[:i], s.regs[i+1:]...)
			break
		}
	}
	for _, w := range s.running() {
		if reg, ok := w.regs[r]; ok {
			_ = w.inf.RemoveEventHandler(reg)
			delete(w.regs, r)
		}
	}
	return nil
}

// AddIndexers is not supported: pod indexes are added through the cache's IndexField.
func (s *Scope) AddIndexers(toolscache.Indexers) error {
	return errors.New("the pod scope takes indexes through IndexField")
}

// HasSynced is whether a plan's watches have all synced (Ready).
func (s *Scope) HasSynced() bool { return s.Ready() == nil }

// HasSyncedChecker completes once the Scope is Ready.
func (s *Scope) HasSyncedChecker() toolscache.DoneChecker { return doneChecker{s.planned} }

// IsStopped is whether the scope has stopped.
func (s *Scope) IsStopped() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ctx != nil && s.ctx.Err() != nil
}

type doneChecker struct{ done chan struct{} }

func (d doneChecker) Name() string          { return "pod scope" }
func (d doneChecker) Done() <-chan struct{} { return d.done }

// registration is a handler added to the Scope, and its registration with each watch.
type registration struct {
	handler toolscache.ResourceEventHandler
	opts    toolscache.HandlerOptions
	scope   *Scope
}

// attach registers the handler with w; the caller holds the Scope's mu.
func (r *registration) attach(w *watch) {
	if reg, err := w.inf.AddEventHandlerWithOptions(r.handler, r.opts); err == nil {
		w.regs[r] = reg
	}
}

// HasSynced is whether the handler has seen the pods of every synced watch and the first
// plan has synced.
func (r *registration) HasSynced() bool {
	if r.scope.Ready() != nil {
		return false
	}
	r.scope.mu.RLock()
	defer r.scope.mu.RUnlock()
	for _, cur := range r.scope.watches {
		if reg, ok := cur.regs[r]; ok && cur.isSynced() && !reg.HasSynced() {
			return false
		}
	}
	return true
}

// HasSyncedChecker completes when HasSynced holds.
func (r *registration) HasSyncedChecker() toolscache.DoneChecker {
	done := make(chan struct{})
	go func() {
		for !r.HasSynced() && !r.scope.IsStopped() {
			time.Sleep(50 * time.Millisecond)
		}
		close(done)
	}()
	return doneChecker{done}
}

// ownerLists are the kinds whose pods are read by owner, bar the Deployment's (it owns
// ReplicaSets, never pods).
func ownerLists() []client.ObjectList {
	return []client.ObjectList{&appsv1.ReplicaSetList{}, &appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}}
}

// selectorOf is the pod selector of the list's first item, nil for an empty list or an
// invalid selector.
func selectorOf(list client.ObjectList) labels.Selector {
	var sel *metav1.LabelSelector
	switch l := list.(type) {
	case *appsv1.ReplicaSetList:
		if len(l.Items) > 0 {
			sel = l.Items[0].Spec.Selector
		}
	case *appsv1.StatefulSetList:
		if len(l.Items) > 0 {
			sel = l.Items[0].Spec.Selector
		}
	case *appsv1.DaemonSetList:
		if len(l.Items) > 0 {
			sel = l.Items[0].Spec.Selector
		}
	}
	return parseSelector(sel)
}

// parseSelector is sel as a labels.Selector; nil for none, an invalid one, or one that
// selects everything (a pod read by it is no narrower than its namespace).
func parseSelector(sel *metav1.LabelSelector) labels.Selector {
	if sel == nil {
		return nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return nil
	}
	return s
}
