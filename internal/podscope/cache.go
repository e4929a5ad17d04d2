package podscope

import (
	"context"
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// Cache is the manager's cache with the kinds the Scope holds read through it: Get and List
// of pods, ReplicaSets and ControllerRevisions, their informers (whose handlers see the
// objects of every watch) and their indexes.
type Cache struct {
	crcache.Cache
	scope *Scope
}

// Get reads an object of a kind the Scope holds from the watch that holds it, or anything
// else from the manager's cache.
func (c *Cache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if k, ok := c.scope.holds(obj); ok {
		return c.scope.get(ctx, k, key, obj, opts...)
	}
	return c.Cache.Get(ctx, key, obj, opts...)
}

// List lists objects of a kind the Scope holds from the watch that covers them, or from the
// API server.
func (c *Cache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if k, ok := c.scope.holds(list); ok {
		return c.scope.list(ctx, k, list, opts...)
	}
	return c.Cache.List(ctx, list, opts...)
}

// GetInformer returns, for a kind the Scope holds, an informer over every watch of the Scope.
func (c *Cache) GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	if k, ok := c.scope.holds(obj); ok {
		return c.scope.informer(k), nil
	}
	return c.Cache.GetInformer(ctx, obj, opts...)
}

// GetInformerForKind is GetInformer by kind.
func (c *Cache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	for k := range kinds {
		if kinds[k].gvk == gvk && c.scope.scoped[k] {
			return c.scope.informer(k), nil
		}
	}
	return c.Cache.GetInformerForKind(ctx, gvk, opts...)
}

// RemoveInformer leaves the watches of the kinds the Scope holds to its plan.
func (c *Cache) RemoveInformer(ctx context.Context, obj client.Object) error {
	if _, ok := c.scope.holds(obj); ok {
		return nil
	}
	return c.Cache.RemoveInformer(ctx, obj)
}

// IndexField adds an index of a kind the Scope holds to every watch, present and future.
func (c *Cache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	if k, ok := c.scope.holds(obj); ok {
		return c.scope.indexField(k, field, extract)
	}
	return c.Cache.IndexField(ctx, obj, field, extract)
}

func (s *Scope) indexField(k int, field string, extract client.IndexerFunc) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx != nil {
		return errors.New("the scope's indexes must be added before it starts")
	}
	if s.indexers[k] == nil {
		s.indexers[k] = map[string]client.IndexerFunc{}
	}
	s.indexers[k][field] = extract
	return nil
}

// kindInformer is the informer of one kind the Scope holds: a handler added to it sees the
// objects of every watch, those started later included (a replaced watch's new cache lists
// its objects as added again). The Scope is its pods' (it embeds theirs).
type kindInformer struct {
	s    *Scope
	kind int
}

func (s *Scope) informer(k int) *kindInformer {
	if k == kindPod {
		return &s.kindInformer
	}
	return &kindInformer{s: s, kind: k}
}

// AddEventHandler adds a handler to every watch.
func (i *kindInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod adds a handler to every watch.
func (i *kindInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return i.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{ResyncPeriod: &resync})
}

// AddEventHandlerWithOptions adds a handler to every watch.
func (i *kindInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	s := i.s
	s.mu.Lock()
	defer s.mu.Unlock()
	r := &registration{handler: h, opts: o, scope: s, kind: i.kind}
	s.regs = append(s.regs, r)
	for _, w := range s.running() {
		r.attach(w)
	}
	return r, nil
}

// RemoveEventHandler removes a handler from every watch.
func (i *kindInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	s := i.s
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
			_ = w.inf[r.kind].RemoveEventHandler(reg)
			delete(w.regs, r)
		}
	}
	return nil
}

// AddIndexers is not supported: the scope's indexes are added through the cache's IndexField.
func (i *kindInformer) AddIndexers(toolscache.Indexers) error {
	return errors.New("the pod scope takes indexes through IndexField")
}

// HasSynced is whether a plan's watches have all synced (Ready).
func (i *kindInformer) HasSynced() bool { return i.s.Ready() == nil }

// HasSyncedChecker completes once the Scope is Ready.
func (i *kindInformer) HasSyncedChecker() toolscache.DoneChecker {
	return informer.Done("pod scope", i.s.planned)
}

// IsStopped is whether the scope has stopped.
func (i *kindInformer) IsStopped() bool {
	s := i.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.ctx != nil && s.ctx.Err() != nil
}

// registration is a handler added to the Scope, and its registration with each watch.
type registration struct {
	handler toolscache.ResourceEventHandler
	opts    toolscache.HandlerOptions
	scope   *Scope
	kind    int
}

// attach registers the handler with w; the caller holds the Scope's mu.
func (r *registration) attach(w *watch) {
	inf := w.inf[r.kind]
	if inf == nil {
		return
	}
	h := r.handler
	if r.kind == kindPod {
		h = informer.Converting(h, asPod) // the watch holds records; handlers see pods
	}
	if reg, err := inf.AddEventHandlerWithOptions(h, r.opts); err == nil {
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
		for !r.HasSynced() && !r.scope.informer(r.kind).IsStopped() {
			time.Sleep(50 * time.Millisecond)
		}
		close(done)
	}()
	return informer.Done("pod scope handler", done)
}

// ownerLists are the kinds whose pods are read by owner, bar the Deployment's (it owns
// ReplicaSets, never pods); for ControllerRevisions (k), those that own them.
func ownerLists(k int) []client.ObjectList {
	if k == kindRevision {
		return []client.ObjectList{&appsv1.StatefulSetList{}, &appsv1.DaemonSetList{}}
	}
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
