package informer

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestDirectListsOwnedAsTheCache: through Direct, a client of the API server (which has
// no OwnerIndex) answers ListOwned as the cache does: the namespace's objects whose
// controller has the UID.
func TestDirectListsOwnedAsTheCache(t *testing.T) {
	owned := func(name, ns, uid string) *appsv1.ReplicaSet {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		if uid != "" {
			rs.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "d", UID: types.UID(uid), Controller: ptr.To(true)}}
		}
		return rs
	}
	c := fake.NewClientBuilder().WithScheme(NewScheme()).WithObjects(
		owned("a", "ns", "u1"), owned("b", "ns", "u2"), owned("c", "ns", ""), owned("d", "other", "u1")).Build()
	r := Direct(c)
	var list appsv1.ReplicaSetList
	if err := ListOwned(context.Background(), r, &list, "ns", "u1"); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.Items[0].Name != "a" {
		t.Errorf("owned by u1 in ns: %v, want a", list.Items)
	}
	if err := List(context.Background(), r, &list); err != nil || len(list.Items) != 4 {
		t.Errorf("an unindexed list: %d items (%v), want all 4", len(list.Items), err)
	}
	both := fields.AndSelectors(fields.OneTermEqualSelector(OwnerIndex, "u1"), fields.OneTermEqualSelector("metadata.name", "a"))
	if err := r.List(context.Background(), &list, &client.ListOptions{FieldSelector: both}); err == nil {
		t.Error("a list by OwnerIndex and another field: want an error, not a list that ignores one")
	}
}
