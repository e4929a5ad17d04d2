package informer

import (
	"context"
	"errors"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// indexerInformer is the part of a client-go shared informer UIDIndexes uses: its indexer.
type indexerInformer struct {
	crcache.Informer
	indexer  toolscache.Indexer
	unsynced bool
}

func (i indexerInformer) AddIndexers(ix toolscache.Indexers) error { return i.indexer.AddIndexers(ix) }
func (i indexerInformer) GetIndexer() toolscache.Indexer           { return i.indexer }
func (i indexerInformer) HasSynced() bool                          { return !i.unsynced }

// indexerCache is an informer cache, an informer per kind (inf the ReplicaSets'), that
// counts what else it is asked.
type indexerCache struct {
	crcache.Cache
	inf    *indexerInformer
	others map[string]*indexerInformer
	fields []string // the fields controller-runtime was asked to index
	listed int      // lists controller-runtime was asked
}

func (c *indexerCache) GetInformer(_ context.Context, obj client.Object, _ ...crcache.InformerGetOption) (crcache.Informer, error) {
	if _, ok := obj.(*appsv1.ReplicaSet); ok {
		return c.inf, nil
	}
	kind := fmt.Sprintf("%T", obj)
	if c.others[kind] == nil {
		c.others[kind] = &indexerInformer{indexer: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})}
	}
	return c.others[kind], nil
}

func (c *indexerCache) IndexField(_ context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	c.fields = append(c.fields, field)
	return nil
}

func (c *indexerCache) List(context.Context, client.ObjectList, ...client.ListOption) error {
	c.listed++
	return nil
}

// TestUIDIndexesKeyEachObjectOnce: a ReplicaSet is indexed under its owner's UID and its
// own, one key each, and a list by either answers as controller-runtime's cache does: in
// the namespace asked, by the labels asked, copied unless asked not to. Other fields and
// kinds are controller-runtime's; a cache not started yet is an error, never "none".
func TestUIDIndexesKeyEachObjectOnce(t *testing.T) {
	ctx := context.Background()
	inner := &indexerCache{inf: &indexerInformer{indexer: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})},
		others: map[string]*indexerInformer{}}
	c := UIDIndexes(inner)
	if err := IndexOwners(ctx, c); err != nil {
		t.Fatal(err)
	}
	if want := []string{OwnerIndex}; len(inner.fields) != 1 || inner.fields[0] != want[0] {
		t.Fatalf("controller-runtime indexed %v, want only the pods' %v", inner.fields, want)
	}
	rs := func(ns, name string, owner types.UID, app string) *appsv1.ReplicaSet {
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name), Labels: map[string]string{"app": app},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Deployment", Name: "d", UID: owner, Controller: ptr.To(true)}}}}
	}
	for _, o := range []*appsv1.ReplicaSet{rs("a", "web-1", "d1", "web"), rs("a", "web-2", "d1", "web"), rs("a", "api-1", "d1", "api"), rs("b", "web-1", "d2", "web")} {
		if err := inner.inf.indexer.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	for value, keys := range map[string]int{"d1": 3, "d2": 1, "a-web-1": 1} {
		field := OwnerIndex
		if value == "a-web-1" {
			field = UIDIndex
		}
		if got, _ := inner.inf.indexer.IndexKeys(field, value); len(got) != keys {
			t.Errorf("%s %s: %d keys, want %d", field, value, len(got), keys)
		}
	}
	var list appsv1.ReplicaSetList
	if err := ListOwned(ctx, c, &list, "a", "d1"); err != nil || len(list.Items) != 3 {
		t.Fatalf("owned by d1 in a: %d (%v), want 3", len(list.Items), err)
	}
	stored, _, _ := inner.inf.indexer.GetByKey("a/web-1")
	if err := ListOwned(ctx, c, &list, "b", "d1"); err != nil || len(list.Items) != 0 {
		t.Errorf("owned by d1 in b: %d (%v), want none", len(list.Items), err)
	}
	if err := c.List(ctx, &list, client.InNamespace("a"), client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector(OwnerIndex, "d1")},
		client.MatchingLabelsSelector{Selector: labels.SelectorFromSet(labels.Set{"app": "web"})}); err != nil || len(list.Items) != 2 {
		t.Errorf("owned by d1 in a, app=web: %d (%v), want 2", len(list.Items), err)
	}
	list.Items[0].Labels["app"] = "changed" // a copy: the cache's own is untouched
	if stored.(*appsv1.ReplicaSet).Labels["app"] != "web" {
		t.Error("a list without UnsafeDisableDeepCopy handed out the cache's own object")
	}
	if err := ListByUID(ctx, c, &list, "a", "a-web-1"); err != nil || len(list.Items) != 1 || list.Items[0].Name != "web-1" {
		t.Errorf("by UID a-web-1: %v (%v)", list.Items, err)
	}
	var pods corev1.PodList
	if err := ListOwned(ctx, c, &pods, "a", "rs1"); err != nil || inner.listed != 1 {
		t.Errorf("a pod list went to controller-runtime %d times (%v), want 1", inner.listed, err)
	}
	inner.inf.unsynced = true
	if err := ListOwned(ctx, c, &list, "a", "d1"); !errors.As(err, new(*crcache.ErrCacheNotStarted)) {
		t.Errorf("over an unsynced informer: %v, want ErrCacheNotStarted", err)
	}
}
