package memstore_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// TestListsMetadataAsTheCacheDoes: a PartialObjectMetadataList lists the metadata of the
// objects of its kind, filtered as a typed list is and copied, as the cache's metadata
// informer answers. holdfast reads every namespace's labels so (policy.AllNamespaceLabels):
// a store that listed none read every workload of a policy with a namespaceSelector as
// unselected, and the fleet limit counted no rollout of them (holdfast simulate too).
func TestListsMetadataAsTheCacheDoes(t *testing.T) {
	ctx := context.Background()
	s := memstore.New(nil)
	for name, tier := range map[string]string{"hosted-a": "hosted", "hosted-b": "hosted", "tools": "ops"} {
		s.Put(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: map[string]string{"tier": tier}}})
	}
	s.Put(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tools", Name: "p", Labels: map[string]string{"tier": "hosted"}}})

	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := s.List(ctx, list, client.MatchingLabels{"tier": "hosted"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Fatalf("listed %d namespaces labelled hosted, want 2: %v", len(list.Items), list.Items)
	}
	for _, it := range list.Items {
		if it.Kind != "Namespace" || it.Labels["tier"] != "hosted" || it.UID == "" {
			t.Errorf("item %+v, want a Namespace's metadata with its labels", it)
		}
	}
	list.Items[0].Labels["tier"] = "changed"

	labels, err := policy.AllNamespaceLabels(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if len(labels) != 3 || labels["hosted-a"]["tier"] != "hosted" || labels["hosted-b"]["tier"] != "hosted" || labels["tools"]["tier"] != "ops" {
		t.Errorf("every namespace's labels: %v, want the three as stored (a listed copy changed, not the store)", labels)
	}
}
