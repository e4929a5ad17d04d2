// Package validation is what the API server, with holdfast's policy webhook, accepts of
// holdfast's policies, decided offline: fields the schema does not know (as strict field
// validation refuses them), the CRDs' structural schema, defaults and CEL rules evaluated
// with the API server's own libraries, then holdfast's own checks (values its types can
// hold, selectors it can evaluate, windows that parse). The policy webhook runs those checks, and
// `holdfast check` and `holdfast simulate` run the whole of it on the policies they read;
// an integration test holds it to the real API server, rule by rule.
package validation

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// ValidateRolloutPolicy is every error the API server, with holdfast's policy webhook,
// would refuse p with on create; none when it would store p. p is not changed.
func ValidateRolloutPolicy(p *v1alpha1.RolloutPolicy) field.ErrorList {
	return validateTyped(p, "RolloutPolicy")
}

// ValidateDisruptionPolicy is every error the API server, with holdfast's policy webhook,
// would refuse p with on create; none when it would store p. p is not changed.
func ValidateDisruptionPolicy(p *v1alpha1.DisruptionPolicy) field.ErrorList {
	return validateTyped(p, "DisruptionPolicy")
}

// validateTyped validates what a client sends for obj: its JSON.
func validateTyped(obj client.Object, kind string) field.ErrorList {
	raw, err := json.Marshal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	// Numbers decode as the API server decodes them: integers as int64.
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(raw, &u.Object); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	// A typed object often has no apiVersion and kind: the client sets them.
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(kind))
	return ValidateObject(u)
}

// ValidateObject is every error the API server, with holdfast's policy webhook, would
// refuse u with when it is created with strict field validation (as kubectl creates and
// applies): a field the schema does not know, an apiVersion or kind it does not serve, a
// value the schema or a CEL rule refuses, then what holdfast cannot evaluate. Like the API
// server it stops at the first stage that finds errors. It changes u as the API server
// does: unknown fields pruned, defaults applied, the status dropped.
func ValidateObject(u *unstructured.Unstructured) field.ErrorList {
	_, errs := Admit(u)
	return errs
}

// Admit is what the API server, with holdfast's policy webhook, would make of u on create:
// the policy it would store, defaulted and typed (a *v1alpha1.RolloutPolicy or a
// *v1alpha1.DisruptionPolicy), or the errors it would refuse u with (ValidateObject).
// The offline commands read policies through it, so that they evaluate what the cluster
// would.
func Admit(u *unstructured.Unstructured) (client.Object, field.ErrorList) {
	s, errs := servedFor(u)
	if len(errs) > 0 {
		return nil, errs
	}
	if errs := s.decode(u); len(errs) > 0 {
		return nil, errs
	}
	s.prepareForCreate(u)
	if errs := s.validate(context.Background(), u); len(errs) > 0 {
		return nil, errs
	}
	return evaluable(u)
}

// ValidateEvaluable is what holdfast's policy webhook checks of a policy the API server has
// admitted by its schema: that it decodes into holdfast's types (a number or duration the
// schema allows may not fit them), that holdfast can evaluate its selectors, and that its
// windows parse.
func ValidateEvaluable(u *unstructured.Unstructured) field.ErrorList {
	_, errs := evaluable(u)
	return errs
}

// evaluable decodes u into its type and checks what holdfast evaluates.
func evaluable(u *unstructured.Unstructured) (client.Object, field.ErrorList) {
	var newObj func() client.Object
	switch u.GetKind() {
	case "RolloutPolicy":
		newObj = func() client.Object { return &v1alpha1.RolloutPolicy{} }
	case "DisruptionPolicy":
		newObj = func() client.Object { return &v1alpha1.DisruptionPolicy{} }
	default:
		return nil, field.ErrorList{field.NotSupported(field.NewPath("kind"), u.GetKind(), []string{"RolloutPolicy", "DisruptionPolicy"})}
	}
	obj, errs := decodeAll(u.Object, newObj)
	var windows []v1alpha1.Window
	var nsSel, sel *metav1.LabelSelector
	switch p := obj.(type) {
	case *v1alpha1.RolloutPolicy:
		windows, nsSel, sel = p.Spec.Windows, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector
	case *v1alpha1.DisruptionPolicy:
		windows, nsSel, sel = p.Spec.Windows, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector
	}
	targets := field.NewPath("spec", "targets")
	var checked field.ErrorList
	if p, ok := obj.(*v1alpha1.DisruptionPolicy); ok {
		checked = append(checked, validatePercent(p.Spec.MaxUnavailable, field.NewPath("spec", "maxUnavailable"))...)
	}
	checked = append(checked, validateSelector(nsSel, targets.Child("namespaceSelector"))...)
	checked = append(checked, validateSelector(sel, targets.Child("selector"))...)
	checked = append(checked, policy.ValidateWindows(windows)...)
	for _, e := range checked {
		// A value that did not decode was read as its zero value: its field's error is
		// the decode error, not what the checks make of the zero.
		if !slices.ContainsFunc(errs, func(d *field.Error) bool { return within(e.Field, d.Field) }) {
			errs = append(errs, e)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return obj, nil
}

// validatePercent refuses a percentage over 100%: the generated PodDisruptionBudget carries
// the policy's budget, and kube refuses such a PDB (ValidatePodDisruptionBudgetSpec), so
// the policy would keep no floor and its generator retry for ever.
func validatePercent(v *intstr.IntOrString, at *field.Path) field.ErrorList {
	if v == nil || v.Type != intstr.String {
		return nil
	}
	n, err := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
	if err != nil || n <= 100 {
		return nil // the schema's pattern judges the form
	}
	return field.ErrorList{field.Invalid(at, v.StrVal, "must be a percentage between 0% and 100%")}
}

// maxDecodeErrors bounds the errors decodeAll reports of one policy.
const maxDecodeErrors = 32

// decodeAll decodes doc into a new object and reports every value holdfast's types cannot
// hold, not only the first the decoder meets: each is read as null (its zero value) and
// the decode runs again. So the webhook's ratchet sees each error a stored policy has (a
// fix of one of two is admitted), and the checks after decoding still run on the rest (an
// invalid window added beside a stored undecodable value is refused). doc is not changed.
func decodeAll(doc map[string]any, newObj func() client.Object) (client.Object, field.ErrorList) {
	var errs field.ErrorList
	copied := false
	for range maxDecodeErrors {
		raw, err := json.Marshal(doc)
		if err != nil {
			return newObj(), append(errs, field.InternalError(nil, err))
		}
		obj := newObj() // a failed decode leaves parts set
		if err = jsonv2.Unmarshal(raw, obj); err == nil {
			return obj, errs
		}
		errs = append(errs, decodeError(err, doc))
		if !copied {
			// A copy to change, decoded as the API server decodes (integers as int64).
			doc, copied = map[string]any{}, true
			if err := utiljson.Unmarshal(raw, &doc); err != nil {
				return newObj(), append(errs, field.InternalError(nil, err))
			}
		}
		if !nullAt(doc, err) {
			return newObj(), errs
		}
	}
	return newObj(), errs
}

// nullAt replaces the value at the decode error's JSON pointer by null; false when there
// is none to replace (an error of the whole object).
func nullAt(doc map[string]any, err error) bool {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return false
	}
	var parent any = doc
	var last string
	first := true
	for tok := range se.JSONPointer.Tokens() {
		if !first {
			parent = childOf(parent, last)
		}
		last, first = tok, false
	}
	if first {
		return false
	}
	switch v := parent.(type) {
	case map[string]any:
		value, ok := v[last]
		if !ok {
			return false
		}
		if value == nil {
			delete(v, last) // null does not decode into every type (metav1.Duration); absent does
			return true
		}
		v[last] = nil
	case []any:
		i, err := strconv.Atoi(last)
		if err != nil || i < 0 || i >= len(v) || v[i] == nil {
			return false
		}
		v[i] = nil
	default:
		return false
	}
	return true
}

// childOf is the value under tok in a JSON object or array, nil when there is none.
func childOf(v any, tok string) any {
	switch v := v.(type) {
	case map[string]any:
		return v[tok]
	case []any:
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(v) {
			return v[i]
		}
	}
	return nil
}

// within is whether field path p is at or under path under, as field.Path writes them.
func within(p, under string) bool {
	return p == under || strings.HasPrefix(p, under+".") || strings.HasPrefix(p, under+"[")
}

// validateSelector refuses a selector holdfast cannot evaluate: such a policy would object
// to everything its valid selectors do not rule out, and its selector cannot be a webhook
// selector either.
func validateSelector(sel *metav1.LabelSelector, at *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	errs := metavalidation.ValidateLabelSelector(sel, metavalidation.LabelSelectorValidationOptions{}, at)
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil && len(errs) == 0 {
		// The conversion is what the Matcher runs: it is the last word.
		errs = append(errs, field.Invalid(at, sel, err.Error()))
	}
	return errs
}

// decodeError is the error of a value holdfast's types cannot hold, at its field in obj.
func decodeError(err error, obj map[string]any) *field.Error {
	var se *jsonv2.SemanticError
	if !errors.As(err, &se) {
		return field.Invalid(nil, nil, err.Error())
	}
	var at *field.Path
	var value any = obj
	for tok := range se.JSONPointer.Tokens() {
		switch v := value.(type) {
		case map[string]any:
			at, value = childPath(at, tok), v[tok]
		case []any:
			i, _ := strconv.Atoi(tok)
			at, value = at.Index(i), nil
			if i >= 0 && i < len(v) {
				value = v[i]
			}
		default:
			at, value = childPath(at, tok), nil
		}
	}
	detail := "does not fit holdfast's types"
	if se.Err != nil {
		detail = se.Err.Error()
	}
	return field.Invalid(at, value, detail)
}
