//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/holdfast-dev/holdfast/internal/budget"

	admissionv1 "k8s.io/api/admission/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/eviction"
)

// setNotReady marks a pod not Ready and waits until holdfast's cache sees it.
func setNotReady(t *testing.T, p *corev1.Pod) {
	t.Helper()
	ctx := context.Background()
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
	if err := k8s.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod not Ready in holdfast's cache", func() bool {
		got := &corev1.Pod{}
		return cached.Get(ctx, client.ObjectKeyFromObject(p), got) == nil && !workload.PodServing(got)
	})
}

// TestNotReadyPodUnderAlwaysAllowIsNeitherDeferredNorRecorded (E3): with a cooldown of an
// hour, evicting a pod that is not Ready passes at once and does not start the cooldown
// for the group's healthy pods; the first healthy eviction does.
func TestNotReadyPodUnderAlwaysAllowIsNeitherDeferredNorRecorded(t *testing.T) {
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, anyNumberAnHourApart)
	pods := agentGroup(t, ns, 3)
	if err := evict(t, ns, pods[0].Name, false); err != nil {
		t.Fatalf("the first eviction: %v", err)
	}
	setNotReady(t, pods[1])
	if err := evict(t, ns, pods[1].Name, false); err != nil {
		t.Fatalf("a not-Ready pod under AlwaysAllow within the cooldown: %v, want it evicted", err)
	}

	other := createNamespace(t, nil)
	disruptionPolicy(t, other, anyNumberAnHourApart)
	fresh := agentGroup(t, other, 3)
	setNotReady(t, fresh[0])
	if err := evict(t, other, fresh[0].Name, false); err != nil {
		t.Fatalf("a not-Ready pod: %v", err)
	}
	if err := evict(t, other, fresh[1].Name, false); err != nil {
		t.Fatalf("the not-Ready pod's eviction started the cooldown: %v", err)
	}
	err := evict(t, other, fresh[2].Name, false)
	assertDeferred(t, err)
	if !strings.Contains(err.Error(), "/cooldown]") {
		t.Errorf("deferral %q does not name the cooldown", err)
	}
}

// TestNotReadyPodUnderIfHealthyBudgetIsNotNow: a budget of zero refuses (403) the eviction
// of a healthy pod; a pod that is not Ready, under IfHealthyBudget, gets kube's answer for
// a group below its budget: 429, which drains retry.
func TestNotReadyPodUnderIfHealthyBudgetIsNotNow(t *testing.T) {
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) {
		s.MaxUnavailable = ptr.To(intstr.FromInt32(0))
		s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
	})
	pods := agentGroup(t, ns, 3)
	if err := evict(t, ns, pods[0].Name, false); !apierrors.IsForbidden(err) {
		t.Errorf("a healthy pod under a budget of zero: got %v, want 403", err)
	}
	setNotReady(t, pods[1])
	assertDeferred(t, evict(t, ns, pods[1].Name, false))
}

// deletingWriter deletes the ledger it is about to update, once: the sweeper deleting a
// ledger between the handler's read and its write, as a real API server reports it.
type deletingWriter struct {
	client.Client
	deleted bool
}

func (w *deletingWriter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if !w.deleted {
		w.deleted = true
		if err := w.Client.Delete(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			return err
		}
	}
	return w.Client.Update(ctx, obj, opts...)
}

// TestLedgerDeletedBetweenReadAndWrite: the write then fails with NotFound, and holdfast
// decides again on a fresh read instead of answering 500 (which drains do not retry).
func TestLedgerDeletedBetweenReadAndWrite(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromString("100%")) })
	pods := agentGroup(t, ns, 3)
	if err := evict(t, ns, pods[0].Name, false); err != nil { // creates the group's ledger
		t.Fatalf("the first eviction: %v", err)
	}
	writer := &deletingWriter{Client: k8s}
	h := &eviction.Handler{Reader: cached, APIReader: k8s, Ledgers: &budget.Ledgers{Live: writer, Namespace: holdfastNamespace,
		Identity: "integration-direct"}, Clock: clock.RealClock{}}
	body, err := json.Marshal(&policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pods[1].Name}})
	if err != nil {
		t.Fatal(err)
	}
	resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction",
		Namespace: ns, Name: pods[1].Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body}}})
	if !writer.deleted {
		t.Fatal("the ledger was never updated: the test did not reach the race")
	}
	if !resp.Allowed {
		t.Fatalf("answer %+v, want the eviction admitted after a fresh read", resp.Result)
	}
	var leases coordinationv1.LeaseList
	if err := k8s.List(ctx, &leases, client.InNamespace(holdfastNamespace)); err != nil {
		t.Fatal(err)
	}
	recorded := false
	for _, l := range leases.Items {
		recorded = recorded || strings.Contains(l.Annotations["holdfast.dev/evictions"], string(pods[1].UID))
	}
	if !recorded {
		t.Error("the admitted eviction is in no ledger")
	}
}

// TestLedgersOutliveLongCooldowns: while a DisruptionPolicy's cooldown is 3 h, a ledger
// last written 2 h ago holds a record that cooldown still needs, and is kept; once the
// policy is gone, it is swept. The suite sweeps every second.
func TestLedgersOutliveLongCooldowns(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: 3 * time.Hour} })
	renewed := metav1.NewMicroTime(time.Now().Add(-2 * time.Hour))
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: holdfastNamespace, Name: "holdfast-evictions-" + ns,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "holdfast"}}, Spec: coordinationv1.LeaseSpec{RenewTime: &renewed}}
	if err := k8s.Create(ctx, l); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), l) })
	time.Sleep(2500 * time.Millisecond) // two sweeps
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}); err != nil {
		t.Fatalf("a ledger a 3 h cooldown still needs: %v", err)
	}
	if err := k8s.Delete(ctx, &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-agents"}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ledger swept once no cooldown needs it", func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(l), &coordinationv1.Lease{}))
	})
}

// TestPDBOfAPolicyWithALongName: a policy name longer than a label value (63) still gets
// its PDBs, labelled with a value that fits, and its status counts them.
func TestPDBOfAPolicyWithALongName(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + strings.Repeat("konnectivity-agents.", 4)},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), PDB: &v1alpha1.PDBGeneration{Generate: true},
			Targets: v1alpha1.PodTargets{NamespaceSelector: namespaceNamed(ns),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "agent"}}}}}
	p.Name = strings.TrimSuffix(p.Name, ".")
	if len(p.Name) <= 63 {
		t.Fatalf("the name %q is not longer than a label value", p.Name)
	}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)
	if err := k8s.Create(ctx, agentDeployment(ns, "agent", 3)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "PDB created", func() bool { return pdbOf(t, ns, "Deployment", "agent") != nil })
	eventually(t, "the policy counts its PDB", func() bool {
		got := &v1alpha1.DisruptionPolicy{}
		return k8s.Get(ctx, client.ObjectKeyFromObject(p), got) == nil && got.Status.PDBsManaged == 1
	})
	var owned policyv1.PodDisruptionBudgetList
	if err := k8s.List(ctx, &owned, pdb.Owned(p.Name)); err != nil || len(owned.Items) != 1 {
		t.Errorf("the policy's PDBs by label: %d (%v), want 1", len(owned.Items), err)
	}
}
