package app

import (
	"context"
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// SelfTestName names the objects of `holdfast selftest`'s probes (the Deployment, the
// policy, the PodDisruptionBudget, the pod an eviction names). Every holdfast webhook
// refuses a dry-run request for an object of this name with SelfTestCause, whatever the
// policies say: the answer only holdfast gives, which tells the self-test that the API
// server called the entry its message names and that holdfast answered. A request that
// is not a dry run is decided as any other.
const SelfTestName = "holdfast-selftest"

// SelfTestCause is the cause type of the answer to a self-test probe.
const SelfTestCause metav1.CauseType = "holdfast.dev/SelfTest"

// answerSelfTest serves h at path, answering the self-test's dry-run probes itself. The
// answer is a refusal, so that nothing the probe names is created even where another
// webhook or the API server would have let a dry run through; a dry run persists nothing
// anyway.
func answerSelfTest(path string, h admission.Handler) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		if !IsSelfTestProbe(req) {
			return h.Handle(ctx, req)
		}
		return SelfTestAnswer(path, req)
	})
}

// IsSelfTestProbe reports whether req is a self-test probe: a dry run for an object named
// SelfTestName.
func IsSelfTestProbe(req admission.Request) bool {
	return req.DryRun != nil && *req.DryRun && req.Name == SelfTestName
}

// SelfTestAnswer is holdfast's answer at path to a self-test probe.
func SelfTestAnswer(path string, req admission.Request) admission.Response {
	resp := admission.Denied(fmt.Sprintf("holdfast self-test: %s answered the dry-run %s of %s %s", path,
		req.Operation, req.Kind.Kind, SelfTestName))
	resp.Result.Code = http.StatusForbidden
	resp.Result.Reason = metav1.StatusReasonForbidden
	resp.Result.Details = &metav1.StatusDetails{Name: SelfTestName, Causes: []metav1.StatusCause{{Type: SelfTestCause, Field: path}}}
	return resp
}
