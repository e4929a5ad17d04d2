// Package policyvalidation is the webhook that validates holdfast's own policies where
// their schema cannot: a window's cron schedule, time zone and length. A policy the API
// server accepts is one holdfast can evaluate; one it cannot is refused with the field,
// never accepted and then ignored.
package policyvalidation

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
	var obj client.Object
	switch req.Kind.Kind {
	case "RolloutPolicy":
		obj = &v1alpha1.RolloutPolicy{}
	case "DisruptionPolicy":
		obj = &v1alpha1.DisruptionPolicy{}
	default:
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("unsupported kind %s: this webhook validates holdfast's policies", req.Kind))
	}
	if err := h.Decoder.DecodeRaw(req.Object, obj); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err))
	}
	obj.SetName(req.Name)
	if err := Validate(obj); err != nil {
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Message: err.Error()}}}
	}
	return admission.Allowed("")
}

// Validate is what this webhook checks of a RolloutPolicy or DisruptionPolicy: that
// holdfast can evaluate its selectors and windows. The error ("<Kind> <name> is invalid:
// …") names the field; `holdfast simulate` checks its scenarios' policies with it.
func Validate(obj client.Object) error {
	var windows []v1alpha1.Window
	var nsSel, sel *metav1.LabelSelector
	var kind string
	switch p := obj.(type) {
	case *v1alpha1.RolloutPolicy:
		kind, windows, nsSel, sel = "RolloutPolicy", p.Spec.Windows, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector
	case *v1alpha1.DisruptionPolicy:
		kind, windows, nsSel, sel = "DisruptionPolicy", p.Spec.Windows, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector
	default:
		return fmt.Errorf("a %T is not a holdfast policy", obj)
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
			return fmt.Errorf("%s %s is invalid: %v", kind, obj.GetName(), errs.ToAggregate())
		}
	}
	if _, err := policy.ParseWindows(windows); err != nil {
		return fmt.Errorf("%s %s is invalid: %v", kind, obj.GetName(), err)
	}
	return nil
}
