package floor

import (
	"context"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestBadRequests: what is not a PodDisruptionBudget, or does not decode, gets 400 with the
// reason before any read; a DELETE (never sent) is admitted.
func TestBadRequests(t *testing.T) {
	h := &Handler{Clock: clock.RealClock{}} // no reader: bad input must not reach one
	req := func(op admissionv1.Operation, group, kind, body string) admission.Request {
		return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Operation: op, Namespace: "kube-system",
			Kind: metav1.GroupVersionKind{Group: group, Version: "v1", Kind: kind}, Object: runtime.RawExtension{Raw: []byte(body)}}}
	}
	for name, c := range map[string]admission.Request{
		"another kind":     req(admissionv1.Create, "", "Pod", `{}`),
		"undecodable body": req(admissionv1.Create, "policy", "PodDisruptionBudget", `{"spec":`),
		"a wrong type":     req(admissionv1.Update, "policy", "PodDisruptionBudget", `{"spec":{"maxUnavailable":{}}}`),
	} {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), c)
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || resp.Result.Message == "" {
				t.Errorf("response = %+v, want 400 with a reason", resp.Result)
			}
		})
	}
	if resp := h.Handle(context.Background(), req(admissionv1.Delete, "policy", "PodDisruptionBudget", ``)); !resp.Allowed {
		t.Errorf("a DELETE: %+v, want admitted", resp.Result)
	}
}

// TestUpdatesAreJudgedOnWhatTheyWeaken: an update of a PDB stored weaker is refused only
// for what it makes weaker than it was: a floor it did not weaken, more pods at once, or
// unhealthy pods newly let go.
func TestUpdatesAreJudgedOnWhatTheyWeaken(t *testing.T) {
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}}
	a := workload.Meta{Ref: workload.Ref{Kind: v1alpha1.KindDeployment, Name: "a", UID: "a"}}
	b := workload.Meta{Ref: workload.Ref{Kind: v1alpha1.KindDeployment, Name: "b", UID: "b"}}
	weak := func(w workload.Meta, allows int32, always bool) pdb.Weakening {
		return pdb.Weakening{Policy: p, Workload: w, Coverage: &pdb.Coverage{Weakens: true, Allows: allows, AlwaysAllow: always}}
	}
	for name, c := range map[string]struct {
		found, was []pdb.Weakening
		refused    int
	}{
		"weakened before, no more now":       {found: []pdb.Weakening{weak(a, 2, false)}, was: []pdb.Weakening{weak(a, 3, false)}},
		"as weak as before":                  {found: []pdb.Weakening{weak(a, 3, true)}, was: []pdb.Weakening{weak(a, 3, true)}},
		"more pods at once than before":      {found: []pdb.Weakening{weak(a, 3, false)}, was: []pdb.Weakening{weak(a, 2, false)}, refused: 1},
		"unhealthy pods newly let go":        {found: []pdb.Weakening{weak(a, 2, true)}, was: []pdb.Weakening{weak(a, 2, false)}, refused: 1},
		"a floor it did not weaken":          {found: []pdb.Weakening{weak(a, 2, false), weak(b, 1, false)}, was: []pdb.Weakening{weak(a, 2, false)}, refused: 1},
		"weak before, strict enough now":     {was: []pdb.Weakening{weak(a, 3, false)}},
		"weakening what was strict (create)": {found: []pdb.Weakening{weak(a, 1, false)}, refused: 1},
	} {
		t.Run(name, func(t *testing.T) {
			if got := weakerThan(c.found, c.was); len(got) != c.refused {
				t.Errorf("refused %d (%+v), want %d", len(got), got, c.refused)
			}
		})
	}
}
