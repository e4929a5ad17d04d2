package testing

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/memstore"
)

// MemReader is a client.Reader over objects held in memory that reads the way
// controller-runtime's informer cache does (memstore.Store). It stands in for the cache
// in benchmarks and unit tests of handlers; it is not an API server.
type MemReader = memstore.Store

// NewMemReader holds objs; indexes maps a field index name to its function, as
// registered with the manager's FieldIndexer.
func NewMemReader(indexes map[string]client.IndexerFunc, objs ...client.Object) *MemReader {
	r := memstore.New(indexes)
	for _, o := range objs {
		r.Put(o)
	}
	return r
}

// ReaderFunc reads through whichever reader the function returns at each call: a model's
// replica cache, swapped at each sync.
type ReaderFunc func() client.Reader

// Get implements client.Reader.
func (f ReaderFunc) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return f().Get(ctx, key, obj, opts...)
}

// List implements client.Reader.
func (f ReaderFunc) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return f().List(ctx, list, opts...)
}
