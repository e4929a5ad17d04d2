package informer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FanOut is c with the handlers of each of its informers behind one registration of the
// informer's own. client-go gives each registration a buffer of the events its handler has
// not handled yet, which grows to the largest burst it held and never shrinks; a handler
// added to a synced informer is handed every object at once, so each holds a slot per
// object for good. Eight handlers on the workload informers (the controllers' watches, the
// pod-scope planner, the writers' forgetter) cost more per unguarded workload than its
// labels do.
//
// Each handler of a fan has a queue of its own, as client-go's do, handled in order by a
// goroutine that runs while the queue holds events: a slow handler delays none of the
// others, and an empty queue holds no memory. A handler added to a fanned-out informer is
// queued the objects its store holds, then every event the informer's one registration
// receives. The store can be ahead of the events handed out yet: a handler may be handed
// an object it was handed by that first walk again, or a deletion of one it never saw.
// holdfast's handlers queue keys, which that leaves right. A handler asking for resyncs is
// registered with the informer itself.
//
// Handlers are handed the typed objects the store's records stand for (Record), made when
// each handles its event: a queue holds the store's own objects, never copies, however long
// it grows.
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

// RemoveInformer stops the informer of obj's kind; its fan is forgotten once it has
// stopped.
func (c *fanOutCache) RemoveInformer(ctx context.Context, obj client.Object) error {
	err := c.Cache.RemoveInformer(ctx, obj)
	c.mu.Lock()
	c.forgetStopped()
	c.mu.Unlock()
	return err
}

// forgetStopped forgets the fans of stopped informers; the caller holds mu.
func (c *fanOutCache) forgetStopped() {
	for sii := range c.fans {
		if sii.IsStopped() {
			delete(c.fans, sii)
		}
	}
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
		c.forgetStopped()
		f = &fanInformer{SharedIndexInformer: sii}
		c.fans[sii] = f
	}
	return f
}

// fanInformer is a client-go informer whose handlers share one registration (FanOut).
type fanInformer struct {
	toolscache.SharedIndexInformer
	// mu is held while an event is queued to the handlers, and while a handler is added (its
	// queue filled from the store) or removed: never while a handler runs.
	mu       sync.Mutex
	handlers []*fanHandler
	reg      toolscache.ResourceEventHandlerRegistration // nil until the first handler
}

// AddEventHandler adds h to the handlers of the informer's one registration.
func (f *fanInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.AddEventHandlerWithOptions(h, toolscache.HandlerOptions{})
}

// AddEventHandlerWithResyncPeriod registers h with the informer itself: resyncs are per
// registration.
func (f *fanInformer) AddEventHandlerWithResyncPeriod(h toolscache.ResourceEventHandler, resync time.Duration) (toolscache.ResourceEventHandlerRegistration, error) {
	return f.SharedIndexInformer.AddEventHandlerWithResyncPeriod(Converting(h, typed), resync)
}

// AddEventHandlerWithOptions adds h to the handlers of the informer's one registration,
// its queue filled with the objects the store holds; with a resync period, it registers h
// with the informer itself. The first handler's options (its logger) are the
// registration's.
func (f *fanInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	if o.ResyncPeriod != nil {
		return f.SharedIndexInformer.AddEventHandlerWithOptions(Converting(h, typed), o)
	}
	if f.IsStopped() {
		return nil, fmt.Errorf("handler %v was not added to the informer: it has stopped", h)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &fanHandler{handler: h, f: f}
	if f.reg == nil {
		// The informer hands the new registration its store's objects, and through it h.
		reg, err := f.SharedIndexInformer.AddEventHandlerWithOptions(fanDispatch{f}, o)
		if err != nil {
			return nil, err
		}
		f.reg = reg
	} else {
		for _, obj := range f.GetStore().List() {
			r.push(fanEvent{newObj: obj, initial: true})
		}
	}
	f.handlers = append(f.handlers, r)
	return r, nil
}

// RemoveEventHandler removes a handler this informer's fan added, or one registered with
// the informer itself (a resync handler's registration). A removed handler is handed nothing
// more.
func (f *fanInformer) RemoveEventHandler(handle toolscache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(*fanHandler)
	if !ok {
		return f.SharedIndexInformer.RemoveEventHandler(handle)
	}
	if r.f != f {
		return errors.New("not a registration of this informer")
	}
	f.mu.Lock()
	f.handlers = slices.DeleteFunc(f.handlers, func(x *fanHandler) bool { return x == r })
	f.mu.Unlock()
	r.mu.Lock()
	r.removed, r.queue = true, nil
	r.mu.Unlock()
	return nil
}

// fanDispatch is the informer's one registration: it queues each event to every handler.
type fanDispatch struct{ f *fanInformer }

func (d fanDispatch) OnAdd(obj any, initial bool) {
	d.queue(fanEvent{newObj: obj, initial: initial})
}

func (d fanDispatch) OnUpdate(oldObj, newObj any) {
	d.queue(fanEvent{oldObj: oldObj, newObj: newObj, update: true})
}

func (d fanDispatch) OnDelete(obj any) { d.queue(fanEvent{oldObj: obj}) }

func (d fanDispatch) queue(e fanEvent) {
	d.f.mu.Lock()
	defer d.f.mu.Unlock()
	for _, h := range d.f.handlers {
		h.push(e)
	}
}

// fanEvent is an event queued to a handler: an add (newObj), an update (both) or a
// deletion (oldObj), of the store's objects (records among them).
type fanEvent struct {
	oldObj, newObj any
	update         bool
	// initial is an add of the informer's first list, or of the store's objects the
	// handler was queued when added.
	initial bool
}

// fanHandler is a handler of a fanInformer, its queue, and its registration.
type fanHandler struct {
	handler toolscache.ResourceEventHandler
	f       *fanInformer

	mu       sync.Mutex
	queue    []fanEvent // nil once handled: a burst's array is not kept
	running  bool       // a goroutine handles the queue
	removed  bool
	initials int // initial adds queued and not yet handled
}

// push queues e, and starts the goroutine that handles the queue if none runs.
func (h *fanHandler) push(e fanEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.removed {
		return
	}
	h.queue = append(h.queue, e)
	if e.initial {
		h.initials++
	}
	if !h.running {
		h.running = true
		go h.run()
	}
}

// run hands the handler its queue in order, until the queue is empty.
func (h *fanHandler) run() {
	defer utilruntime.HandleCrash()
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.queue, h.running = nil, false
			h.mu.Unlock()
			return
		}
		e := h.queue[0]
		h.queue[0] = fanEvent{}
		h.queue = h.queue[1:]
		h.mu.Unlock()
		switch {
		case e.update:
			h.handler.OnUpdate(typed(e.oldObj), typed(e.newObj))
		case e.newObj != nil:
			h.handler.OnAdd(typed(e.newObj), e.initial)
		default:
			h.handler.OnDelete(typed(e.oldObj))
		}
		if e.initial {
			h.mu.Lock()
			h.initials--
			h.mu.Unlock()
		}
	}
}

// HasSynced is whether the informer has synced, its registration has queued every object
// of its first list, and this handler has handled each it was queued as initial.
func (h *fanHandler) HasSynced() bool {
	if !h.f.reg.HasSynced() {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.initials == 0 || h.removed
}

// HasSyncedChecker completes when HasSynced holds; never, as client-go's, for an informer
// that stops first.
func (h *fanHandler) HasSyncedChecker() toolscache.DoneChecker {
	done := make(chan struct{})
	go func() {
		for !h.HasSynced() {
			if h.f.IsStopped() {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		close(done)
	}()
	return Done("fan-out handler", done)
}

// Converting is h handed each object through convert (a tombstone's object too, if convert
// handles DeletedFinalStateUnknown): for caches whose stores hold records.
func Converting(h toolscache.ResourceEventHandler, convert func(any) any) toolscache.ResourceEventHandler {
	return converting{h: h, convert: convert}
}

type converting struct {
	h       toolscache.ResourceEventHandler
	convert func(any) any
}

func (c converting) OnAdd(obj any, initial bool) { c.h.OnAdd(c.convert(obj), initial) }
func (c converting) OnUpdate(oldObj, newObj any) { c.h.OnUpdate(c.convert(oldObj), c.convert(newObj)) }
func (c converting) OnDelete(obj any)            { c.h.OnDelete(c.convert(obj)) }

// Done is a DoneChecker named name that completes when done is closed.
func Done(name string, done chan struct{}) toolscache.DoneChecker { return doneChecker{name, done} }

type doneChecker struct {
	name string
	done chan struct{}
}

func (d doneChecker) Name() string          { return d.name }
func (d doneChecker) Done() <-chan struct{} { return d.done }
