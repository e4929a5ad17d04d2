package informer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FanOut is c with the handlers of each of its informers behind one registration of the
// informer's own. client-go gives each registration a buffer of the events it has not
// handled yet, which grows to the largest burst it held and never shrinks; a handler added
// to a synced informer is handed every object at once, so each holds a slot per object for
// good. Eight handlers on the workload informers (the controllers' watches, the pod-scope
// planner, the writers' forgetter) cost more per unguarded workload than its labels do.
//
// A handler added to a fanned-out informer is handed the objects its store holds at once,
// in the caller's goroutine, and then every event the informer's one registration
// receives, in turn with the other handlers. Its store can be ahead of the events handed
// out yet: a handler may be handed an object it was handed by that first walk again, or a
// deletion of one it never saw. holdfast's handlers queue keys, which that leaves right.
// A handler must not add or remove a handler of the same informer. A handler asking for
// resyncs is registered with the informer itself.
//
// Handlers are handed the typed objects the store's records stand for (Record), made once
// per event for them all.
func FanOut(c crcache.Cache) crcache.Cache {
	return &fanOutCache{Cache: c, fans: map[toolscache.SharedIndexInformer]*fanInformer{}}
}

type fanOutCache struct {
	crcache.Cache
	mu   sync.Mutex
	fans map[toolscache.SharedIndexInformer]*fanInformer
}

// GetInformer returns the informer of obj's kind, fanned out.
func (c *fanOutCache) GetInformer(ctx context.Context, obj client.Object, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	inf, err := c.Cache.GetInformer(ctx, obj, opts...)
	return c.fan(inf), err
}

// GetInformerForKind returns the informer of gvk, fanned out.
func (c *fanOutCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...crcache.InformerGetOption) (crcache.Informer, error) {
	inf, err := c.Cache.GetInformerForKind(ctx, gvk, opts...)
	return c.fan(inf), err
}

// RemoveInformer stops the informer of obj's kind and forgets its fan.
func (c *fanOutCache) RemoveInformer(ctx context.Context, obj client.Object) error {
	inf, err := c.Cache.GetInformer(ctx, obj, crcache.BlockUntilSynced(false))
	if err == nil {
		if sii, ok := inf.(toolscache.SharedIndexInformer); ok {
			c.mu.Lock()
			delete(c.fans, sii)
			c.mu.Unlock()
		}
	}
	return c.Cache.RemoveInformer(ctx, obj)
}

// fan is inf's fan, made once; an informer that is not client-go's is returned as it is.
func (c *fanOutCache) fan(inf crcache.Informer) crcache.Informer {
	sii, ok := inf.(toolscache.SharedIndexInformer)
	if !ok {
		return inf
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	f := c.fans[sii]
	if f == nil {
		f = &fanInformer{SharedIndexInformer: sii}
		c.fans[sii] = f
	}
	return f
}

// fanInformer is a client-go informer whose handlers share one registration (FanOut).
type fanInformer struct {
	toolscache.SharedIndexInformer
	// mu is held while an event is handed out, and while a handler is added or removed:
	// a new handler's first walk of the store comes between two events, never inside one.
	mu       sync.Mutex
	handlers []*fanHandler
	reg      toolscache.ResourceEventHandlerRegistration // nil until the first handler
}

// fanHandler is a handler of a fanInformer: its registration.
type fanHandler struct {
	toolscache.ResourceEventHandler
	f *fanInformer
}

// HasSynced is whether the informer has synced and its registration has handed out every
// object of its first list: then this handler has seen each, handed out or walked.
func (h *fanHandler) HasSynced() bool { return h.f.reg.HasSynced() }

// HasSyncedChecker completes when HasSynced holds.
func (h *fanHandler) HasSyncedChecker() toolscache.DoneChecker { return h.f.reg.HasSyncedChecker() }

// AddEventHandler adds h to the handlers of the informer's one registration.
func (f *fanInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod registers h with the informer itself: resyncs are per
// registration.
func (f *fanInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.SharedIndexInformer.AddEventHandlerWithResyncPeriod(typedHandler{h}, resync)
}

// AddEventHandlerWithOptions adds h to the handlers of the informer's one registration,
// after handing it the objects the store holds; with a resync period, it registers h with
// the informer itself. The first handler's options (its logger) are the registration's.
func (f *fanInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if o.ResyncPeriod != nil {
		return f.SharedIndexInformer.AddEventHandlerWithOptions(typedHandler{h}, o)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reg == nil {
		// The informer hands the new registration its store's objects, and through it h.
		reg, err := f.SharedIndexInformer.AddEventHandlerWithOptions(fanDispatch{f}, o)
		if err != nil {
			return nil, err
		}
		f.reg = reg
	} else {
		for _, obj := range f.GetStore().List() {
			h.OnAdd(typed(obj), true)
		}
	}
	r := &fanHandler{ResourceEventHandler: h, f: f}
	f.handlers = append(f.handlers, r)
	return r, nil
}

// RemoveEventHandler removes a handler this informer's fan added, or one registered with
// the informer itself (typedHandler's registration).
func (f *fanInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*fanHandler)
	if !ok {
		return f.SharedIndexInformer.RemoveEventHandler(handle)
	}
	if r.f != f {
		return errors.New("not a registration of this informer")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.handlers = slices.DeleteFunc(f.handlers, func(x *fanHandler) bool { return x == r })
	return nil
}

// fanDispatch is the informer's one registration: it hands each event to every handler.
type fanDispatch struct{ f *fanInformer }

func (d fanDispatch) OnAdd(obj any, initial bool) {
	obj = typed(obj)
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	for _, h := range d.f.handlers {
		h.OnAdd(obj, initial)
	}
}

func (d fanDispatch) OnUpdate(oldObj, newObj any) {
	oldObj, newObj = typed(oldObj), typed(newObj)
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	for _, h := range d.f.handlers {
		h.OnUpdate(oldObj, newObj)
	}
}

func (d fanDispatch) OnDelete(obj any) {
	obj = typed(obj)
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	for _, h := range d.f.handlers {
		h.OnDelete(obj)
	}
}

// typedHandler hands a handler registered with the informer itself the typed objects the
// store's records stand for.
type typedHandler struct {
	h toolscache.ResourceEventHandler
}

func (t typedHandler) OnAdd(obj any, initial bool) { t.h.OnAdd(typed(obj), initial) }
func (t typedHandler) OnUpdate(oldObj, newObj any) { t.h.OnUpdate(typed(oldObj), typed(newObj)) }
func (t typedHandler) OnDelete(obj any)            { t.h.OnDelete(typed(obj)) }
