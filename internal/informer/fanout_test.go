package informer

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// countingInformer counts the registrations made with a client-go informer.
type countingInformer struct {
	toolscache.SharedIndexInformer
	registrations atomic.Int32
}

func (c *countingInformer) AddEventHandlerWithOptions(h toolscache.ResourceEventHandler, o toolscache.HandlerOptions) (toolscache.ResourceEventHandlerRegistration, error) {
	c.registrations.Add(1)
	return c.SharedIndexInformer.AddEventHandlerWithOptions(h, o)
}

// oneInformerCache hands out one informer for every kind.
type oneInformerCache struct {
	crcache.Cache
	inf crcache.Informer
}

func (c oneInformerCache) GetInformer(context.Context, client.Object, ...crcache.InformerGetOption) (crcache.Informer, error) {
	return c.inf, nil
}

// seenBy keeps what a handler was handed: each ConfigMap's last resource version, by
// name, as a handler that queues keys would read it.
type seenBy struct {
	mu   sync.Mutex
	objs map[string]string
	evts int
}

func (s *seenBy) set(obj any) {
	cm := obj.(*corev1.ConfigMap)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objs[cm.Name] = cm.ResourceVersion
	s.evts++
}

func (s *seenBy) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.set(obj) },
		UpdateFunc: func(_, obj any) { s.set(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			delete(s.objs, obj.(*corev1.ConfigMap).Name)
			s.evts++
		},
	}
}

func (s *seenBy) state() (map[string]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.objs), s.evts
}

// TestFanOutHandsEveryHandlerEveryEventThroughOneRegistration: handlers added to a synced
// informer, and while it changes, each end with the store's objects as they are, through
// one registration of the informer's own; a removed handler is handed nothing more; a
// handler asking for resyncs has a registration of its own.
func TestFanOutHandsEveryHandlerEveryEventThroughOneRegistration(t *testing.T) {
	src := fcache.NewFakeControllerSource()
	cm := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("cm-%03d", i)}}
	}
	for i := range 100 {
		src.Add(cm(i))
	}
	counting := &countingInformer{SharedIndexInformer: toolscache.NewSharedIndexInformer(src, &corev1.ConfigMap{}, 0, toolscache.Indexers{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go counting.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), counting.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	c := FanOut(oneInformerCache{inf: counting})
	inf, err := c.GetInformer(ctx, &corev1.ConfigMap{})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := c.GetInformer(ctx, &corev1.ConfigMap{}); again != inf {
		t.Fatal("a second GetInformer made a second fan of the same informer")
	}

	var seen [4]*seenBy
	var regs [4]toolscache.ResourceEventHandlerRegistration
	add := func(i int) {
		seen[i] = &seenBy{objs: map[string]string{}}
		if regs[i], err = inf.AddEventHandler(seen[i].handler()); err != nil {
			t.Fatal(err)
		}
	}
	add(0)
	if !toolscache.WaitForCacheSync(ctx.Done(), regs[0].HasSynced) {
		t.Fatal("the first handler did not sync")
	}
	// Handed out to the first: a handler added now is handed the store's objects by its
	// own walk, all of them by the time it has synced.
	add(1)
	if !toolscache.WaitForCacheSync(ctx.Done(), regs[1].HasSynced) {
		t.Fatal("the second handler did not sync")
	}
	if got, _ := seen[1].state(); len(got) != 100 {
		t.Fatalf("a handler added to a synced informer was handed %d objects, want the store's 100", len(got))
	}
	// Changes while the others are added: each new handler walks a store that may be ahead
	// of the events handed out yet.
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 100 {
			switch i % 3 {
			case 0:
				src.Modify(cm(i))
			case 1:
				src.Delete(cm(i))
			default:
				src.Add(cm(100 + i))
			}
		}
	})
	add(2)
	add(3)
	wg.Wait()
	for i, r := range regs {
		if !toolscache.WaitForCacheSync(ctx.Done(), r.HasSynced) {
			t.Fatalf("handler %d did not sync", i)
		}
	}

	want := func() map[string]string {
		out := map[string]string{}
		for _, obj := range counting.GetStore().List() {
			out[obj.(*corev1.ConfigMap).Name] = obj.(*corev1.ConfigMap).ResourceVersion
		}
		return out
	}
	converge := func(which ...int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for _, i := range which {
			for {
				got, _ := seen[i].state()
				if maps.Equal(got, want()) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("handler %d holds %d objects, the store %d", i, len(got), len(want()))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
	converge(0, 1, 2, 3)
	if n := len(want()); n != 100-33+33 {
		t.Fatalf("the store holds %d objects, want 100", n)
	}

	// A handler that does not return delays none of the others, and a handled queue holds
	// no array.
	release := make(chan struct{})
	blocked, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(any, any) { <-release }})
	if err != nil {
		t.Fatal(err)
	}
	src.Modify(cm(97))
	src.Modify(cm(96))
	converge(0, 1, 2, 3)
	close(release)
	idle := func(r toolscache.ResourceEventHandlerRegistration) {
		t.Helper()
		h := r.(*fanHandler)
		deadline := time.Now().Add(10 * time.Second)
		for {
			h.mu.Lock()
			held := h.queue != nil || h.running
			h.mu.Unlock()
			if !held {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("a handler's queue was not handled, or its array kept")
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, r := range append(regs[:], blocked) {
		idle(r)
	}

	if err := inf.RemoveEventHandler(regs[1]); err != nil {
		t.Fatal(err)
	}
	idle(regs[1]) // an event it was handling when removed
	_, before := seen[1].state()
	src.Modify(cm(99))
	src.Delete(cm(98))
	converge(0, 2, 3)
	if _, after := seen[1].state(); after != before {
		t.Errorf("a removed handler was handed %d more events", after-before)
	}
	if n := counting.registrations.Load(); n != 1 {
		t.Errorf("four handlers made %d registrations with the informer, want 1", n)
	}

	resync := time.Hour
	if _, err := inf.AddEventHandlerWithOptions(toolscache.ResourceEventHandlerFuncs{}, toolscache.HandlerOptions{ResyncPeriod: &resync}); err != nil {
		t.Fatal(err)
	}
	if n := counting.registrations.Load(); n != 2 {
		t.Errorf("a handler asking for resyncs: %d registrations, want its own (2)", n)
	}
	if _, ok := inf.(stored); !ok {
		t.Error("a fanned-out informer hides its store from Each")
	}
}
