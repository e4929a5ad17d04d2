package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
)

// TestAnUpdateReadsTheNamespaceOnce: the new PDB and the stored one are judged against one
// read of the namespace (its policies, workloads and pods), and judged as before: an
// UPDATE that lets more pods go than the stored PDB is refused, one that does not is
// admitted.
func TestAnUpdateReadsTheNamespaceOnce(t *testing.T) {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "agents"}},
		&v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), PDB: &v1alpha1.PDBGeneration{Generate: true},
			Targets: v1alpha1.PodTargets{Selector: sel}}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agent", UID: "agent"}, Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](4), Selector: sel,
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel.MatchLabels}}}},
	}
	for i := range 4 {
		objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "agent-" + string(rune('a'+i)), Labels: sel.MatchLabels}})
	}
	lists := map[string]int{}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(informer.NewScheme()).WithObjects(objs...).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists[fmt.Sprintf("%T", list)]++
			return c.List(ctx, list, opts...)
		},
	})
	h := &Handler{Reader: c, Clock: clock.RealClock{}}
	pdb := func(maxUnavailable int32) []byte {
		raw, err := json.Marshal(&policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}, Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)), Selector: sel}})
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	for name, c := range map[string]struct {
		from, to int32
		allowed  bool
	}{
		"no weaker than it was": {from: 3, to: 2, allowed: true},
		"weaker than it was":    {from: 2, to: 3},
	} {
		t.Run(name, func(t *testing.T) {
			clear(lists)
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
				Operation: admissionv1.Update, Namespace: "agents", Name: "theirs",
				Kind:   metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "PodDisruptionBudget"},
				Object: runtime.RawExtension{Raw: pdb(c.to)}, OldObject: runtime.RawExtension{Raw: pdb(c.from)}}})
			if resp.Allowed != c.allowed {
				t.Fatalf("allowed = %v (%+v), want %v", resp.Allowed, resp.Result, c.allowed)
			}
			if !c.allowed && resp.Result.Code != http.StatusForbidden {
				t.Errorf("refused with %d, want 403", resp.Result.Code)
			}
			for _, kind := range []string{"*v1alpha1.DisruptionPolicyList", "*v1.DeploymentList", "*v1.PodList"} {
				if lists[kind] != 1 {
					t.Errorf("%s listed %d times, want once (%v)", kind, lists[kind], lists)
				}
			}
		})
	}
}
