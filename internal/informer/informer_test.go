package informer

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
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

// TestLabelSetsShareOneMapPerSet: objects that carry the same labels, however their maps
// were built, end with one map of them; others keep their own, and reading an object
// copied shares nothing with the map the others hold.
func TestLabelSetsShareOneMapPerSet(t *testing.T) {
	journal := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"app.kubernetes.io/component": "revision-journal", "app.kubernetes.io/managed-by": "holdfast"}}}
	}
	var s LabelSets
	a, b := journal("a"), journal("b")
	other := journal("other")
	other.Labels["app.kubernetes.io/managed-by"] = "someone-else"
	unlabelled := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}
	for _, obj := range []any{a, b, other, unlabelled, "not an object"} {
		if got, err := s.Share(obj); err != nil || got != obj {
			t.Fatalf("Share(%v) = %v, %v; want the object itself", obj, got, err)
		}
	}
	same := func(x, y map[string]string) bool {
		return reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	}
	if !same(a.Labels, b.Labels) {
		t.Error("two journals with the same labels hold two maps")
	}
	if same(a.Labels, other.Labels) || other.Labels["app.kubernetes.io/managed-by"] != "someone-else" {
		t.Errorf("an object with other labels shares the set's map, or lost its own: %v", other.Labels)
	}
	if unlabelled.Labels != nil {
		t.Errorf("an object without labels was given some: %v", unlabelled.Labels)
	}
	if c := b.DeepCopy(); same(c.Labels, a.Labels) {
		t.Error("a copied read shares the map every journal holds")
	}
	for i := range maxLabelSets + 1 { // the bound: it starts again, and still shares
		if _, err := s.Share(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"n": fmt.Sprint(i)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.sets) > maxLabelSets {
		t.Errorf("LabelSets holds %d sets, more than %d", len(s.sets), maxLabelSets)
	}
	c := journal("c")
	if _, err := s.Share(c); err != nil || !reflect.DeepEqual(c.Labels, a.Labels) {
		t.Errorf("after the bound, a journal's labels are %v", c.Labels)
	}
}
