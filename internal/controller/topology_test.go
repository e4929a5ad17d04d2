package controller

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/memstore"
)

// TestTopologyKeyNoNodeCarries: a topologyBudget key no node carries makes the policy
// Ready=False naming the field, through Reconcile; a node that carries it makes it Ready.
func TestTopologyKeyNoNodeCarries(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	store.Put(&v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zones", Generation: 1}, Spec: v1alpha1.DisruptionPolicySpec{
		TopologyBudget: &v1alpha1.TopologyBudget{Key: "topology.kubernetes.io/zoen", MaxDisruptedDomains: 1}}})
	store.Put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Labels: map[string]string{"topology.kubernetes.io/zone": "a"}}})
	r := &DisruptionPolicyStatus{Client: statusStore{memstore.Writer{Store: store}}, Clock: clock.RealClock{}}
	ready := func() *metav1.Condition {
		t.Helper()
		if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "zones"}}); err != nil {
			t.Fatal(err)
		}
		p := &v1alpha1.DisruptionPolicy{}
		if err := store.Get(ctx, client.ObjectKey{Name: "zones"}, p); err != nil {
			t.Fatal(err)
		}
		return meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
	}
	if c := ready(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTopologyKeyMissing ||
		!strings.Contains(c.Message, "spec.topologyBudget.key") || !strings.Contains(c.Message, "zoen") {
		t.Errorf("Ready = %+v, want False (%s) naming the field and the key", c, v1alpha1.ReasonTopologyKeyMissing)
	}
	// A node with the label empty is in no domain: it does not carry the key.
	store.Put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-empty", Labels: map[string]string{"topology.kubernetes.io/zoen": ""}}})
	if c := ready(); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonTopologyKeyMissing {
		t.Errorf("Ready = %+v with the key on a node only empty, want False (%s)", c, v1alpha1.ReasonTopologyKeyMissing)
	}
	store.Put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Labels: map[string]string{"topology.kubernetes.io/zoen": "b"}}})
	if c := ready(); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v once a node carries the key, want True", c)
	}
}
