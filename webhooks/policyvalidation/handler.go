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
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
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
// updates the API server ratchets. It ratchets its own checks as the API server does: an
// update is refused only for what it makes invalid, never for what the stored policy
// already had (stored while this webhook was down, or before a check existed), so the off
// switch (`suspend: true`) and every fix of another field are always admitted. A DELETE
// is never sent here.
func (h *Handler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	switch req.Kind.Kind {
	case "RolloutPolicy", "DisruptionPolicy":
	default:
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("unsupported kind %s: this webhook validates holdfast's policies", req.Kind))
	}
	u, err := decode(req.Object.Raw, req.Kind.Kind)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", req.Kind.Kind, err))
	}
	name := u.GetName()
	if name == "" {
		name = req.Name
	}
	errs := validation.ValidateEvaluable(u)
	if len(errs) > 0 && req.Operation == admissionv1.Update {
		old, err := decode(req.OldObject.Raw, req.Kind.Kind)
		if err != nil {
			return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored %s: %w", req.Kind.Kind, err))
		}
		errs = ratchet(errs, validation.ValidateEvaluable(old), old.Object, u.Object)
	}
	if len(errs) > 0 {
		status := apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(req.Kind.Kind).GroupKind(), name, errs).Status()
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
	}
	return admission.Allowed("")
}

// decode reads a policy as the API server decodes it (integers as int64), so that what
// holdfast's types cannot hold is found as it would be in the stored object. Its kind is
// the one the webhook was called for, whatever the object says.
func decode(raw []byte, kind string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
		return nil, err
	}
	if u.Object == nil {
		return nil, fmt.Errorf("the object is %s, not a JSON object", raw)
	}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	return u, nil
}

// ratchet keeps the errors of an update that the stored policy did not have, as the API
// server ratchets: an error is dropped only when the stored policy has the same error and
// the value at its field is unchanged (so an invalid value moved to another key, or
// another invalid value at the same place, is refused).
func ratchet(errs, stored field.ErrorList, old, obj map[string]any) field.ErrorList {
	var out field.ErrorList
	for _, e := range errs {
		had := slices.ContainsFunc(stored, func(s *field.Error) bool {
			return s.Type == e.Type && s.Field == e.Field && s.Detail == e.Detail && equality.Semantic.DeepEqual(s.BadValue, e.BadValue)
		})
		before, okBefore := valueAt(old, e.Field)
		after, okAfter := valueAt(obj, e.Field)
		if !had || okBefore != okAfter || !equality.Semantic.DeepEqual(before, after) {
			out = append(out, e)
		}
	}
	return out
}

// valueAt is the value at a field path as field.Path writes it ("spec.windows[0].schedule",
// "spec.targets.selector.matchLabels"), false when there is none.
func valueAt(obj map[string]any, path string) (any, bool) {
	var cur any = obj
	for _, part := range strings.Split(path, ".") {
		name, rest, _ := strings.Cut(part, "[")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[name]; !ok {
			return nil, false
		}
		for rest != "" {
			idx, tail, _ := strings.Cut(rest, "]")
			rest = strings.TrimPrefix(tail, "[")
			switch v := cur.(type) {
			case []any:
				i, err := strconv.Atoi(idx)
				if err != nil || i < 0 || i >= len(v) {
					return nil, false
				}
				cur = v[i]
			case map[string]any:
				if cur, ok = v[idx]; !ok {
					return nil, false
				}
			default:
				return nil, false
			}
		}
	}
	return cur, true
}
