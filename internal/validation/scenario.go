package validation

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// DecodeScenario reads a Scenario document (JSON, as the offline commands read every
// document) strictly: an unknown or misspelt field, a field given twice or a value of the
// wrong type is an error at its path, as the API server's strict field validation
// reports them; then the apiVersion (scenario.holdfast.dev/v1alpha1, or
// holdfast.dev/v1alpha1 from before the format had a group of its own) and
// ValidateScenario.
func DecodeScenario(raw []byte) (*scenariov1alpha1.Scenario, field.ErrorList) {
	sc := &scenariov1alpha1.Scenario{}
	strict, err := sigsjson.UnmarshalStrict(raw, sc)
	if err != nil {
		return nil, field.ErrorList{typeError(raw, err)}
	}
	var errs field.ErrorList
	for _, e := range strict {
		errs = append(errs, strictError(e))
	}
	if len(errs) > 0 {
		return nil, errs
	}
	if gv := sc.APIVersion; gv != scenariov1alpha1.GroupVersion.String() && gv != scenariov1alpha1.LegacyGroupVersion.String() {
		return nil, field.ErrorList{field.NotSupported(field.NewPath("apiVersion"), gv,
			[]string{scenariov1alpha1.GroupVersion.String(), scenariov1alpha1.LegacyGroupVersion.String()})}
	}
	if sc.Kind != scenariov1alpha1.Kind {
		return nil, field.ErrorList{field.NotSupported(field.NewPath("kind"), sc.Kind, []string{scenariov1alpha1.Kind})}
	}
	if errs := ValidateScenario(sc); len(errs) > 0 {
		return nil, errs
	}
	return sc, nil
}

// strictField is a strict-decoding error's field path in its message, as
// sigs.k8s.io/json writes it: unknown field "spec.timeline[0].apply.replica".
var strictField = regexp.MustCompile(`^(unknown|duplicate) field "(.*)"$`)

// strictError is an unknown or duplicate field as a field error at its path.
func strictError(err error) *field.Error {
	m := strictField.FindStringSubmatch(err.Error())
	if m == nil {
		return field.Invalid(nil, nil, err.Error())
	}
	if m[1] == "duplicate" {
		return field.Duplicate(parsePath(m[2]), nil)
	}
	return field.Forbidden(parsePath(m[2]), "unknown field")
}

// typeError is a value the format's types cannot hold, at its field. encoding/json's
// errors name no list index, and none at all for a value its type's own decoder refuses
// (a duration that does not parse): decoding again with encoding/json/v2 finds the path.
func typeError(raw []byte, err error) *field.Error {
	var obj map[string]any
	if jsonv2.Unmarshal(raw, &obj) == nil {
		if err2 := jsonv2.Unmarshal(raw, &scenariov1alpha1.Scenario{}); err2 != nil {
			if fe := decodeError(err2, obj); fe.Field != "<nil>" {
				var se *jsonv2.SemanticError
				if errors.As(err2, &se) && se.Err == nil && se.GoType != nil {
					fe.Detail = "want " + describe(se.GoType)
				}
				return fe
			}
		}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return field.Invalid(parsePath(te.Field), te.Value, "want "+describe(te.Type))
	}
	return field.Invalid(nil, nil, err.Error())
}

// describe is what a value of type t is written as.
func describe(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.String()
}

// parsePath reads a path as the JSON decoder writes it: names joined by dots, indexes in
// brackets.
func parsePath(p string) *field.Path {
	var at *field.Path
	for _, part := range strings.Split(p, ".") {
		name, rest, _ := strings.Cut(part, "[")
		at = childPath(at, name)
		for rest != "" {
			idx, after, _ := strings.Cut(rest, "]")
			i, err := strconv.Atoi(idx)
			if err != nil {
				break
			}
			at = at.Index(i)
			rest = strings.TrimPrefix(after, "[")
		}
	}
	return at
}

// ValidateScenario is every error of a Scenario's spec: one operation per timeline step,
// in time order, each naming what it needs, durations that are not negative, the last
// step before spec.until, node groups with names and counts, and expectations that can
// be measured.
func ValidateScenario(sc *scenariov1alpha1.Scenario) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	errs = append(errs, nonNegative(spec.Child("podStartup"), sc.Spec.PodStartup)...)
	errs = append(errs, nonNegative(spec.Child("podTermination"), sc.Spec.PodTermination)...)
	errs = append(errs, nonNegative(spec.Child("until"), sc.Spec.Until)...)
	prefixes := map[string]bool{}
	for i, g := range sc.Spec.Nodes {
		at := spec.Child("nodes").Index(i)
		if g.Prefix == "" {
			errs = append(errs, field.Required(at.Child("prefix"), "a group names its nodes prefix-0, prefix-1, …"))
		} else if prefixes[g.Prefix] {
			errs = append(errs, field.Duplicate(at.Child("prefix"), g.Prefix))
		}
		prefixes[g.Prefix] = true
		if g.Count <= 0 {
			errs = append(errs, field.Invalid(at.Child("count"), g.Count, "want a positive count"))
		}
	}
	var last metav1.Duration
	drains, applied := 0, map[scenariov1alpha1.WorkloadRef]bool{}
	for i, st := range sc.Spec.Timeline {
		at := spec.Child("timeline").Index(i)
		errs = append(errs, validateStep(st, at)...)
		if st.At.Duration >= 0 && st.At.Duration < last.Duration {
			errs = append(errs, field.Invalid(at.Child("at"), st.At.Duration.String(), fmt.Sprintf("comes before the previous step's %s: steps are in time order", last.Duration)))
		}
		last = st.At
		if st.Drain != nil {
			drains++
		}
		if st.Apply != nil {
			applied[st.Apply.Workload] = true
		}
	}
	if until := sc.Spec.Until; until != nil && until.Duration < last.Duration {
		errs = append(errs, field.Invalid(spec.Child("until"), until.Duration.String(), fmt.Sprintf("ends the scenario before its last step at %s", last.Duration)))
	} else if until == nil && last.Duration > scenariov1alpha1.DefaultUntil {
		errs = append(errs, field.Required(spec.Child("until"), fmt.Sprintf("the default %s ends the scenario before its last step at %s", scenariov1alpha1.DefaultUntil, last.Duration)))
	}
	if x := sc.Spec.Expect; x != nil {
		errs = append(errs, validateExpectations(x, drains, applied, spec.Child("expect"))...)
	}
	return errs
}

// validateStep is the errors of one timeline step.
func validateStep(st scenariov1alpha1.Step, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, nonNegative(at.Child("at"), &st.At)...)
	n := 0
	for _, set := range []bool{st.Apply != nil, st.Drain != nil, st.Cordon != nil, st.Uncordon != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		errs = append(errs, field.Invalid(at, fmt.Sprintf("%d operations", n), "want exactly one of apply, drain, cordon, uncordon"))
	}
	if a := st.Apply; a != nil {
		ap := at.Child("apply")
		errs = append(errs, validateWorkloadRef(a.Workload, ap.Child("workload"))...)
		if a.Template == nil && a.Replicas == nil {
			errs = append(errs, field.Required(ap, "set a template, replicas or both"))
		}
		if b := a.Backoff; b != nil && (b.Initial.Duration <= 0 || b.Max.Duration < b.Initial.Duration) {
			errs = append(errs, field.Invalid(ap.Child("backoff"), fmt.Sprintf("initial %s, max %s", b.Initial.Duration, b.Max.Duration), "want 0 < initial <= max"))
		}
		if a.Replicas != nil && *a.Replicas < 0 {
			errs = append(errs, field.Invalid(ap.Child("replicas"), *a.Replicas, "a count is never negative"))
		} else if a.Replicas != nil && slices.Contains(workload.Kinds(), a.Workload.Kind) && !workload.Scalable(a.Workload.Kind) {
			errs = append(errs, field.Forbidden(ap.Child("replicas"), fmt.Sprintf("a %s has no replicas", a.Workload.Kind)))
		}
		if tpl := a.Template; tpl != nil && len(tpl.Spec.Containers) == 0 {
			errs = append(errs, field.Required(ap.Child("template", "spec", "containers"), "a pod needs a container"))
		}
		if tpl := a.Template; tpl != nil && len(tpl.Labels) == 0 {
			errs = append(errs, field.Required(ap.Child("template", "metadata", "labels"), "a pod template needs labels for its workload's selector"))
		}
	}
	if d := st.Drain; d != nil {
		dp := at.Child("drain")
		errs = append(errs, validateNodes(d.Nodes, dp.Child("nodes"))...)
		if d.RetryAfter != nil && d.RetryAfter.Duration <= 0 {
			errs = append(errs, field.Invalid(dp.Child("retryAfter"), d.RetryAfter.Duration.String(), "want a positive wait"))
		}
		if d.ForceAfter != nil && d.ForceAfter.Duration <= 0 {
			errs = append(errs, field.Invalid(dp.Child("forceAfter"), d.ForceAfter.Duration.String(), "want a positive deadline"))
		}
		if d.ClientRetries != nil && *d.ClientRetries < 0 {
			errs = append(errs, field.Invalid(dp.Child("clientRetries"), *d.ClientRetries, "never negative"))
		}
	}
	if c := st.Cordon; c != nil {
		errs = append(errs, validateNodes(c.Nodes, at.Child("cordon", "nodes"))...)
	}
	if c := st.Uncordon; c != nil {
		errs = append(errs, validateNodes(c.Nodes, at.Child("uncordon", "nodes"))...)
	}
	return errs
}

func validateNodes(nodes []string, at *field.Path) field.ErrorList {
	if len(nodes) == 0 {
		return field.ErrorList{field.Required(at, "name at least one node")}
	}
	return nil
}

func validateWorkloadRef(r scenariov1alpha1.WorkloadRef, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	if !slices.Contains(workload.Kinds(), r.Kind) {
		var kinds []string
		for _, k := range workload.Kinds() {
			kinds = append(kinds, string(k))
		}
		errs = append(errs, field.NotSupported(at.Child("kind"), r.Kind, kinds))
	}
	if r.Namespace == "" {
		errs = append(errs, field.Required(at.Child("namespace"), ""))
	}
	if r.Name == "" {
		errs = append(errs, field.Required(at.Child("name"), ""))
	}
	return errs
}

// validateExpectations is the errors of spec.expect: limits that are not negative, a
// drained expectation only with a drain to measure, a convergedWithin only with an
// operator, and one entry per workload.
func validateExpectations(x *scenariov1alpha1.Expectations, drains int, applied map[scenariov1alpha1.WorkloadRef]bool, at *field.Path) field.ErrorList {
	errs := validateLimits(x.Limits, at)
	if x.Drained != nil && drains == 0 {
		errs = append(errs, field.Invalid(at.Child("drained"), *x.Drained, "the timeline has no drain to measure"))
	}
	if x.MaxForced != nil && drains == 0 {
		errs = append(errs, field.Invalid(at.Child("maxForced"), *x.MaxForced, "the timeline has no drain to measure"))
	}
	for name, v := range map[string]*int32{"maxForced": x.MaxForced, "minReleased": x.MinReleased} {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(at.Child(name), *v, "a count is never negative"))
		}
	}
	if x.ConvergedWithin != nil && len(applied) == 0 {
		errs = append(errs, field.Invalid(at.Child("convergedWithin"), x.ConvergedWithin.Duration.String(), "the timeline has no apply: no operator to converge"))
	}
	seen := map[scenariov1alpha1.WorkloadRef]bool{}
	for i, w := range x.Workloads {
		wp := at.Child("workloads").Index(i)
		errs = append(errs, validateWorkloadRef(w.Workload, wp.Child("workload"))...)
		if seen[w.Workload] {
			errs = append(errs, field.Duplicate(wp.Child("workload"), w.Workload.String()))
		}
		seen[w.Workload] = true
		errs = append(errs, validateLimits(w.Limits, wp)...)
		if w.Limits == (scenariov1alpha1.Limits{}) {
			errs = append(errs, field.Required(wp, "set at least one limit"))
		}
		if w.ConvergedWithin != nil && !applied[w.Workload] {
			errs = append(errs, field.Invalid(wp.Child("convergedWithin"), w.ConvergedWithin.Duration.String(), "no apply of the timeline drives this workload"))
		}
	}
	return errs
}

func validateLimits(l scenariov1alpha1.Limits, at *field.Path) field.ErrorList {
	var errs field.ErrorList
	counts := []struct {
		name string
		n    *int32
	}{{"maxTemplatesWithLivePods", l.MaxTemplatesWithLivePods}, {"maxRevisions", l.MaxRevisions}, {"maxUnavailable", l.MaxUnavailable}, {"minReady", l.MinReady}}
	for _, c := range counts {
		if c.n != nil && *c.n < 0 {
			errs = append(errs, field.Invalid(at.Child(c.name), *c.n, "never negative"))
		}
	}
	errs = append(errs, nonNegative(at.Child("minEvictionGap"), l.MinEvictionGap)...)
	errs = append(errs, nonNegative(at.Child("convergedWithin"), l.ConvergedWithin)...)
	return errs
}

func nonNegative(at *field.Path, d *metav1.Duration) field.ErrorList {
	if d != nil && d.Duration < 0 {
		return field.ErrorList{field.Invalid(at, d.Duration.String(), "never negative")}
	}
	return nil
}
