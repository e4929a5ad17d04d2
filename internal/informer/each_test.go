package informer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// storeInformer is the part of a client-go shared informer Each and EachInNamespaces
// read: its store, an indexer.
type storeInformer struct {
	crcache.Informer
	store    toolscache.Indexer
	unsynced bool
}

func (s storeInformer) GetStore() toolscache.Store     { return s.store }
func (s storeInformer) GetIndexer() toolscache.Indexer { return s.store }
func (s storeInformer) HasSynced() bool                { return !s.unsynced }

// storeCache hands out one informer for every kind, as an informer cache does.
type storeCache struct {
	client.Reader
	inf storeInformer
}

func (c storeCache) GetInformer(context.Context, client.Object, ...crcache.InformerGetOption) (crcache.Informer, error) {
	return c.inf, nil
}

// TestEachWalksTheStoreInPlace: over an informer cache, Each hands out the store's own
// objects, with no list of copies (one allocation however many objects: the store's
// slice of pointers); over any other reader it lists, and walks every item.
func TestEachWalksTheStoreInPlace(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	held := map[*appsv1.Deployment]bool{}
	for i := range 1000 {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("d-%d", i)}}
		held[d] = true
		if err := store.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	r := storeCache{inf: storeInformer{store: store}}
	seen := 0
	err := Each(context.Background(), r, &appsv1.Deployment{}, &appsv1.DeploymentList{}, func(o client.Object) {
		if !held[o.(*appsv1.Deployment)] {
			t.Fatalf("%s is not the store's own object", o.GetName())
		}
		seen++
	})
	if err != nil || seen != 1000 {
		t.Fatalf("walked %d of 1000 (%v)", seen, err)
	}
	walk := func() float64 {
		return testing.AllocsPerRun(10, func() {
			_ = Each(context.Background(), r, &appsv1.Deployment{}, &appsv1.DeploymentList{}, func(client.Object) {})
		})
	}
	before := walk()
	for i := range 1000 {
		if err := store.Add(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "more", Name: fmt.Sprintf("d-%d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if after := walk(); after != before || after > 8 {
		t.Errorf("walking 1,000 cached objects allocates %.0f times and 2,000 %.0f: want the same few, no copy per object", before, after)
	}

	// A cache not started hands out its informer unsynced: an error, as List answers, never
	// an empty walk.
	unsynced := storeCache{inf: storeInformer{store: store, unsynced: true}}
	var notStarted *crcache.ErrCacheNotStarted
	if err := Each(context.Background(), unsynced, &appsv1.Deployment{}, &appsv1.DeploymentList{}, func(client.Object) {
		t.Fatal("walked an unsynced store")
	}); !errors.As(err, &notStarted) {
		t.Errorf("an unsynced informer: %v, want ErrCacheNotStarted", err)
	}

	c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "x"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "y"}}).Build()
	var names []string
	if err := Each(context.Background(), c, &appsv1.Deployment{}, &appsv1.DeploymentList{}, func(o client.Object) {
		names = append(names, o.GetNamespace()+"/"+o.GetName())
	}); err != nil || len(names) != 2 {
		t.Fatalf("through a client: %v (%v), want a/x and b/y", names, err)
	}
}

// TestEachInNamespacesReadsTheirObjectsAlone: over an informer with controller-runtime's
// namespace index, the walk visits the store's own objects of the namespaces named and no
// other; an informer without the index, or a reader that is not an informer cache, is
// listed namespace by namespace, with the same objects.
func TestEachInNamespacesReadsTheirObjectsAlone(t *testing.T) {
	ctx := context.Background()
	indexed := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	plain := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	builder := fake.NewClientBuilder()
	for i := range 300 {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%30), Name: fmt.Sprintf("d-%d", i)}}
		for _, s := range []toolscache.Indexer{indexed, plain} {
			if err := s.Add(d); err != nil {
				t.Fatal(err)
			}
		}
		builder = builder.WithObjects(d.DeepCopy())
	}
	live := builder.Build()
	for name, r := range map[string]client.Reader{
		"namespace index": storeCache{Reader: noList{live}, inf: storeInformer{store: indexed}},
		"no index":        storeCache{Reader: live, inf: storeInformer{store: plain}},
		"not an informer": live,
	} {
		var seen []string
		err := EachInNamespaces(ctx, r, &appsv1.Deployment{}, &appsv1.DeploymentList{}, []string{"ns-3", "ns-17"}, func(o client.Object) {
			seen = append(seen, o.GetNamespace())
		})
		if err != nil || len(seen) != 20 {
			t.Errorf("%s: walked %d objects (%v), want the 20 of ns-3 and ns-17", name, len(seen), err)
		}
		for _, ns := range seen {
			if ns != "ns-3" && ns != "ns-17" {
				t.Errorf("%s: walked an object of %s", name, ns)
				break
			}
		}
	}
}

// noList is a reader whose lists fail: a walk that reads an index must not list.
type noList struct{ client.Reader }

func (noList) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("listed where the index answers")
}
