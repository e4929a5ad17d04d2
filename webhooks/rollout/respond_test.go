package rollout

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sevents "k8s.io/client-go/tools/events"

	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
)

func TestRespondMapsActions(t *testing.T) {
	audit := decision.Violation{Policy: "a", Rule: RuleSettle, Action: decision.Audit, Message: "m1"}
	warn := decision.Violation{Policy: "w", Rule: RuleMinInterval, Action: decision.Warn, Message: "m2"}
	deny := decision.Violation{Policy: "d", Rule: RuleRevertWindow, Action: decision.Deny, Message: "m3"}

	resp := Respond(Decision{Violations: []decision.Violation{audit, warn}})
	if !resp.Allowed {
		t.Fatal("warn and audit must admit")
	}
	if len(resp.Warnings) != 1 || resp.Warnings[0] != "[w/minInterval] m2" {
		t.Errorf("warnings = %q", resp.Warnings)
	}
	if got := resp.AuditAnnotations[RuleSettle]; got != "[a/settle] m1" {
		t.Errorf("audit annotations = %v", resp.AuditAnnotations)
	}

	resp = Respond(Decision{Violations: []decision.Violation{audit, warn, deny}})
	if resp.Allowed || resp.Result.Code != 403 {
		t.Fatalf("deny must answer 403, got %+v", resp.Result)
	}
	// Every message is reported: the denial lists enforced ones, warnings and audit the rest.
	if !strings.Contains(resp.Result.Message, "[d/revertWindow] m3") || len(resp.Warnings) != 1 || len(resp.AuditAnnotations) != 1 {
		t.Errorf("response = %+v", resp)
	}
}

func TestRecordEventsForDenialsAndWarnings(t *testing.T) {
	rec := k8sevents.NewFakeRecorder(10)
	l := &events.Limiter{Recorder: rec}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kas", UID: "u1"}}
	settle := decision.Violation{Policy: "p", Rule: RuleSettle, Action: decision.Deny, Message: "m"}
	warn := decision.Violation{Policy: "p", Rule: RuleRevertWindow, Action: decision.Warn, Message: "m"}
	audit := decision.Violation{Policy: "p", Rule: RuleMinInterval, Action: decision.Audit, Message: "m"}
	t0 := time.Now()

	recordEvents(l, d, decision.Violations{settle, warn, audit}, t0)
	recordEvents(l, d, decision.Violations{settle}, t0.Add(5*time.Second)) // an operator retrying

	if got := len(rec.Events); got != 3 {
		t.Fatalf("recorded %d events, want 3 (the denial, the warning and the audit finding, once each)", got)
	}
	for _, want := range []string{"Warning RolloutDenied", "Warning RolloutWarning", "Normal RolloutAudit"} {
		if e := <-rec.Events; !strings.Contains(e, want) {
			t.Errorf("event %q, want %q", e, want)
		}
	}
}
