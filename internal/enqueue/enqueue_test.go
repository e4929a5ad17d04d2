package enqueue

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/internal/memstore"
)

func TestAllNamesEveryObjectOrOneNamespaces(t *testing.T) {
	store := memstore.New(nil)
	for _, key := range [][2]string{{"a", "one"}, {"a", "two"}, {"b", "three"}} {
		store.Put(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key[0], Name: key[1]}})
	}
	names := func(rs []reconcile.Request) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.String())
		}
		slices.Sort(out)
		return out
	}
	ctx := context.Background()
	if got, want := names(All(ctx, store, &appsv1.Deployment{}, &appsv1.DeploymentList{}, "")), []string{"a/one", "a/two", "b/three"}; !slices.Equal(got, want) {
		t.Errorf("every namespace: %v, want %v", got, want)
	}
	if got, want := names(All(ctx, store, &appsv1.Deployment{}, &appsv1.DeploymentList{}, "a")), []string{"a/one", "a/two"}; !slices.Equal(got, want) {
		t.Errorf("namespace a: %v, want %v", got, want)
	}
	if got := All(ctx, store, &appsv1.Deployment{}, &appsv1.DeploymentList{}, "c"); len(got) != 0 {
		t.Errorf("an empty namespace: %v, want none", got)
	}
}
