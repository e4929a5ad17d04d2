// Package policies validates holdfast's own policies where their schema cannot: a window's
// cron schedule, time zone and length. A policy the API server accepts is one holdfast
// can evaluate; one it cannot is refused with the field, never accepted and then ignored.
package policies

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// Path is where the policies' webhook is served.
const Path = "/validate-policy"

// Handler validates RolloutPolicies and DisruptionPolicies.
type Handler struct {
	Decoder admission.Decoder
}

var _ admission.Handler = &Handler{}

// Handle implements admission.Handler.
func (h *Handler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var windows []v1alpha1.Window
	var nsSel, sel *metav1.LabelSelector
	switch req.Kind.Kind {
	case "RolloutPolicy":
		p := &v1alpha1.RolloutPolicy{}
		if err := h.Decoder.DecodeRaw(req.Object, p); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the RolloutPolicy: %w", err))
		}
		windows, nsSel, sel = p.Spec.Windows, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector
	case "DisruptionPolicy":
		p := &v1alpha1.DisruptionPolicy{}
		if err := h.Decoder.DecodeRaw(req.Object, p); err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the DisruptionPolicy: %w", err))
		}
		windows, nsSel, sel = p.Spec.Windows, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector
	default:
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("unsupported kind %s: this webhook validates holdfast's policies", req.Kind))
	}
	// A selector holdfast cannot evaluate would make the policy object to everything its
	// valid selectors do not rule out, and cannot be a webhook selector either.
	for _, f := range []struct {
		name string
		sel  *metav1.LabelSelector
	}{{"spec.targets.namespaceSelector", nsSel}, {"spec.targets.selector", sel}} {
		if f.sel == nil {
			continue
		}
		errs := metavalidation.ValidateLabelSelector(f.sel, metavalidation.LabelSelectorValidationOptions{}, field.NewPath(f.name))
		if _, err := metav1.LabelSelectorAsSelector(f.sel); err != nil && len(errs) == 0 {
			errs = append(errs, field.Invalid(field.NewPath(f.name), f.sel, err.Error()))
		}
		if len(errs) > 0 {
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
				Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
				Message: fmt.Sprintf("%s %s is invalid: %v", req.Kind.Kind, req.Name, errs.ToAggregate())}}}
		}
	}
	if _, err := policy.ParseWindows(windows); err != nil {
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Message: fmt.Sprintf("%s %s is invalid: %v", req.Kind.Kind, req.Name, err)}}}
	}
	return admission.Allowed("")
}

// +kubebuilder:webhook:path=/validate-policy,mutating=false,failurePolicy=ignore,sideEffects=None,groups=holdfast.dev,resources=rolloutpolicies;disruptionpolicies,verbs=create;update,versions=v1alpha1,name=validation.holdfast.dev,admissionReviewVersions=v1,timeoutSeconds=3,matchPolicy=Equivalent
