package decision

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

func TestViolationsCombine(t *testing.T) {
	vs := Violations{
		{Policy: "a", Rule: "r1", Action: Audit, Message: "m1", Wait: time.Hour},
		{Policy: "w", Rule: "r2", Action: Warn, Message: "m2"},
		{Policy: "d", Rule: "r3", Action: Deny, Message: "m3", Wait: 5 * time.Second},
		{Policy: "d", Rule: "r4", Action: Deny, Message: "m4", Wait: 9 * time.Second},
	}
	if vs.Action() != Deny || Violations(nil).Action() != Allow {
		t.Errorf("the strictest action wins; none is Allow")
	}
	if vs.Wait() != 9*time.Second {
		t.Errorf("Wait = %v, want the longest enforced wait, not an audited one", vs.Wait())
	}
	if vs.Never() {
		t.Error("no violation is a never")
	}
	vs[0].Never = true
	if vs.Never() {
		t.Error("an audited never does not refuse")
	}
	vs[3].Never = true
	if !vs.Never() {
		t.Error("an enforced never refuses")
	}
	if got := vs.Denial(); got != "[d/r3] m3; [d/r4] m4" {
		t.Errorf("Denial = %q", got)
	}
}

func TestResponsesReportEveryViolation(t *testing.T) {
	vs := Violations{
		{Policy: "a", Rule: "settle", Action: Audit, Message: "m1"},
		{Policy: "b", Rule: "settle", Action: Audit, Message: "m2"},
		{Policy: "w", Rule: "minInterval", Action: Warn, Message: "m3"},
	}
	resp := Allowed(vs)
	if !resp.Allowed || len(resp.Warnings) != 1 || resp.Warnings[0] != "[w/minInterval] m3" {
		t.Errorf("allowed = %+v", resp)
	}
	if got := resp.AuditAnnotations["settle"]; got != "[a/settle] m1; [b/settle] m2" {
		t.Errorf("audit annotation = %q, want both, joined", got)
	}
	if resp := Allowed(nil); resp.Warnings != nil || resp.AuditAnnotations != nil {
		t.Errorf("nothing to report: %+v", resp)
	}

	denied := Denied(apierrors.NewTooManyRequests("later", 3), vs)
	if denied.Allowed || denied.Result.Code != http.StatusTooManyRequests || denied.Result.Message != "later" ||
		denied.Result.Details.RetryAfterSeconds != 3 || len(denied.Warnings) != 1 || len(denied.AuditAnnotations) != 1 {
		t.Errorf("denied = %+v", denied)
	}
}

func TestSortByPolicyKeepsEachPolicysOrder(t *testing.T) {
	vs := Violations{{Policy: "b", Rule: "r2"}, {Policy: "a", Rule: "r9"}, {Policy: "b", Rule: "r1"}, {Policy: "a", Rule: "r3"}}
	vs.SortByPolicy()
	var got []string
	for _, v := range vs {
		got = append(got, v.Policy+"/"+v.Rule)
	}
	if strings.Join(got, " ") != "a/r9 a/r3 b/r2 b/r1" {
		t.Errorf("order %v, want by policy, each policy's rules as found", got)
	}
}

// TestRetryIsA503: a failed read is answered 503 with what could not be read and the cause,
// never an allow and never a 500.
func TestRetryIsA503(t *testing.T) {
	resp := Retry("the workloads", errors.New("cache not synced"))
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusServiceUnavailable {
		t.Fatalf("response = %+v, want a 503 refusal", resp.Result)
	}
	for _, want := range []string{"could not read the workloads", "cache not synced", "retry"} {
		if !strings.Contains(resp.Result.Message, want) {
			t.Errorf("message %q lacks %q", resp.Result.Message, want)
		}
	}
}
