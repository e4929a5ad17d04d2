package rollout

import (
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestRefusalNamesTheWriters: a refusal names the request's user and field manager (read
// from the request's options) and the template's last writer, and says two writers may be
// fighting when the two managers differ.
func TestRefusalNamesTheWriters(t *testing.T) {
	h := &Handler{Writers: informer.NewWriters()}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Update,
		UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:flux-system:kustomize-controller"},
		Options:  runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"gitops-b"}`)}}}
	in := &Input{Old: &workload.Workload{Ref: workload.Ref{UID: "u1"}}}
	w := h.requestWriters(req, in)
	if w.User != "system:serviceaccount:flux-system:kustomize-controller" || w.FieldManager != "gitops-b" || w.Template != "" {
		t.Errorf("writers %+v", w)
	}

	d := Decision{Violations: decision.Violations{{Policy: "control-planes", Rule: RuleRevertWindow, Action: decision.Deny, Message: "a second return"}}}
	d.Writers = &Writers{User: "alice", FieldManager: "gitops-b", Template: "operator-a"}
	msg := Respond(d).Result.Message
	for _, want := range []string{`request by user "alice" with field manager "gitops-b"`, `last changed by field manager "operator-a"`, "two writers may be alternating"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}
	d.Writers = &Writers{User: "alice", Template: "operator-a"}
	if msg := Respond(d).Result.Message; strings.Contains(msg, "alternating") || !strings.Contains(msg, `request by user "alice"; the template`) {
		t.Errorf("without the request's field manager: %q", msg)
	}
}
