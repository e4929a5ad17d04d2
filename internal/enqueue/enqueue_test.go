package enqueue

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

func TestWhereNamesOnlyWhatItKeeps(t *testing.T) {
	store := memstore.New(nil)
	for _, key := range [][2]string{{"a", "one"}, {"a", "two"}, {"b", "three"}} {
		store.Put(&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: key[0], Name: key[1]}})
	}
	notTwo := func(o client.Object) bool { return o.GetName() != "two" }
	ctx := context.Background()
	for _, ns := range []string{"", "a"} {
		got := Where(ctx, store, &appsv1.Deployment{}, &appsv1.DeploymentList{}, ns, notTwo)
		for _, r := range got {
			if r.Name == "two" {
				t.Errorf("namespace %q: %v names the object keep refused", ns, got)
			}
		}
		if len(got) == 0 {
			t.Errorf("namespace %q: none named, want the kept", ns)
		}
	}
}
