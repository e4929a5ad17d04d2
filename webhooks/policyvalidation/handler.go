// Package policyvalidation is the webhook that validates holdfast's own policies where
// their schema cannot: values that do not fit holdfast's types, selectors holdfast cannot
// evaluate, a window's cron schedule, time zone and length (internal/validation decides).
// A policy the API server accepts is one holdfast can evaluate; one it cannot is refused
// with the field (422, a cause per field), never accepted and then ignored.
package policyvalidation

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/validation"
)

// Path is where the policies' webhook is served.
const Path = "/validate-policy"

// Handler validates RolloutPolicies and DisruptionPolicies.
type Handler struct{}

var _ admission.Handler = &Handler{}

// Handle implements admission.Handler. The API server calls it after its own schema,
// defaults and CEL rules have passed (on an update, with its ratcheting of unchanged
// fields), so it runs only holdfast's own checks: repeating the schema's here would refuse
// updates the API server ratchets.
func (h *Handler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	switch req.Kind.Kind {
	case "RolloutPolicy", "DisruptionPolicy":
	default:
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("unsupported kind %s: this webhook validates holdfast's policies", req.Kind))
	}
	// Numbers decode as the API server decodes them (integers as int64), so that what
	// holdfast's types cannot hold is found as it would be in the stored object.
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(req.Object.Raw, &u.Object); err != nil || u.Object == nil {
		if err == nil {
			err = fmt.Errorf("the object is %s, not a JSON object", req.Object.Raw)
		}
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err))
	}
	// The review's kind is the one the webhook was called for, whatever the object says.
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(req.Kind.Kind))
	name := u.GetName()
	if name == "" {
		name = req.Name
	}
	if errs := validation.ValidateEvaluable(u); len(errs) > 0 {
		status := apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(req.Kind.Kind).GroupKind(), name, errs).Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	return admission.Allowed("")
}
