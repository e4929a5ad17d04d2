package policyvalidation

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// create sends the CREATE of obj, a policy of kind, and wants it admitted (want "") or
// refused with 422 naming want, with a cause for the field want.
func create(t *testing.T, h *Handler, kind string, obj any, want string) {
	t.Helper()
	raw, _ := json.Marshal(obj)
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Name: "p", Kind: metav1.GroupVersionKind{Group: "holdfast.dev", Version: "v1alpha1", Kind: kind},
		Object: runtime.RawExtension{Raw: raw}}})
	if want == "" {
		if !resp.Allowed {
			t.Fatalf("refused: %v", resp.Result)
		}
		return
	}
	if resp.Allowed || resp.Result.Code != http.StatusUnprocessableEntity || !strings.Contains(resp.Result.Message, want) {
		t.Fatalf("got allowed=%t %v, want 422 naming %s", resp.Allowed, resp.Result, want)
	}
	err := &apierrors.StatusError{ErrStatus: *resp.Result}
	if !apierrors.IsInvalid(err) || !slices.ContainsFunc(resp.Result.Details.Causes, func(c metav1.StatusCause) bool { return c.Field == want }) {
		t.Fatalf("got %+v, want Invalid with a cause for %s", resp.Result, want)
	}
}

func TestPoliciesWithWindowsHoldfastCannotEvaluateAreRefused(t *testing.T) {
	h := &Handler{}
	window := func(schedule, tz string, d time.Duration) v1alpha1.Window {
		return v1alpha1.Window{Schedule: schedule, TimeZone: tz, Duration: metav1.Duration{Duration: d}, Action: v1alpha1.WindowDeny}
	}
	cases := map[string]struct {
		kind   string
		window v1alpha1.Window
		want   string // "" admits
	}{
		"a valid window":              {kind: "RolloutPolicy", window: window("0 9 * * 1-5", "Europe/Berlin", 8*time.Hour)},
		"an hour that does not exist": {kind: "RolloutPolicy", window: window("0 25 * * *", "", time.Hour), want: "spec.windows[0].schedule"},
		"an unknown zone":             {kind: "DisruptionPolicy", window: window("0 9 * * *", "Mars/Olympus", time.Hour), want: "spec.windows[0].timeZone"},
		"longer than its period":      {kind: "DisruptionPolicy", window: window("0 * * * *", "", 2*time.Hour), want: "spec.windows[0].duration"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var obj any = &v1alpha1.RolloutPolicy{Spec: v1alpha1.RolloutPolicySpec{Windows: []v1alpha1.Window{c.window}}}
			if c.kind == "DisruptionPolicy" {
				obj = &v1alpha1.DisruptionPolicy{Spec: v1alpha1.DisruptionPolicySpec{Windows: []v1alpha1.Window{c.window}}}
			}
			create(t, h, c.kind, obj, c.want)
		})
	}
}

// TestPoliciesWithSelectorsHoldfastCannotEvaluateAreRefused: such a policy would object to
// every request its valid selectors do not rule out, cluster-wide without a namespace
// selector, and cannot be a webhook selector either.
func TestPoliciesWithSelectorsHoldfastCannotEvaluateAreRefused(t *testing.T) {
	h := &Handler{}
	for name, c := range map[string]struct {
		kind string
		sel  *metav1.LabelSelector
		want string
	}{
		"a label value with a space":   {kind: "RolloutPolicy", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kube apiserver"}}, want: "spec.targets.selector.matchLabels"},
		"an unknown operator":          {kind: "DisruptionPolicy", sel: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}, want: "spec.targets.selector.matchExpressions[0].operator"},
		"a valid selector is admitted": {kind: "RolloutPolicy", sel: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kube-apiserver"}}},
	} {
		t.Run(name, func(t *testing.T) {
			var obj any = &v1alpha1.RolloutPolicy{Spec: v1alpha1.RolloutPolicySpec{Targets: v1alpha1.WorkloadTargets{Selector: c.sel}}}
			if c.kind == "DisruptionPolicy" {
				obj = &v1alpha1.DisruptionPolicy{Spec: v1alpha1.DisruptionPolicySpec{Targets: v1alpha1.PodTargets{Selector: c.sel}}}
			}
			create(t, h, c.kind, obj, c.want)
		})
	}
}

// TestUpdatesAreRatchetedLikeTheSchema: a policy stored with a part holdfast cannot
// evaluate (while this webhook was down) can always be turned off or fixed elsewhere; an
// update that makes a part invalid, or changes an invalid part to another invalid value,
// is refused.
func TestUpdatesAreRatchetedLikeTheSchema(t *testing.T) {
	h := &Handler{}
	policy := func(key string, suspend bool) *v1alpha1.DisruptionPolicy {
		return &v1alpha1.DisruptionPolicy{Spec: v1alpha1.DisruptionPolicySpec{Suspend: suspend, Targets: v1alpha1.PodTargets{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: "x"}}}}}
	}
	labelled := func(key, value string, suspend bool) *v1alpha1.DisruptionPolicy {
		return &v1alpha1.DisruptionPolicy{Spec: v1alpha1.DisruptionPolicySpec{Suspend: suspend, Targets: v1alpha1.PodTargets{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}}}}
	}
	update := func(old, obj any) admission.Response {
		rawOld, _ := json.Marshal(old)
		raw, _ := json.Marshal(obj)
		return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "p", Kind: metav1.GroupVersionKind{Group: "holdfast.dev", Version: "v1alpha1", Kind: "DisruptionPolicy"},
			Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: rawOld}}})
	}
	const bad, worse = "-bad key", "also bad/"
	for name, c := range map[string]struct {
		old, obj any
		allowed  bool
	}{
		"suspending a stored invalid policy":          {old: policy(bad, false), obj: policy(bad, true), allowed: true},
		"resuming it unchanged (the schema ratchets)": {old: policy(bad, true), obj: policy(bad, false), allowed: true},
		"fixing it":                                 {old: policy(bad, false), obj: policy("tier", false), allowed: true},
		"breaking a valid policy":                   {old: policy("tier", false), obj: policy(bad, false)},
		"changing the invalid key to another":       {old: policy(bad, false), obj: policy(worse, true)},
		"a stored policy that is not a JSON object": {old: nil, obj: policy(bad, true)},
		"an invalid value moved to another key":     {old: labelled("app", "a b", false), obj: labelled("tier", "a b", false)},
		"an invalid value left as it was":           {old: labelled("app", "a b", false), obj: labelled("app", "a b", true), allowed: true},
	} {
		t.Run(name, func(t *testing.T) {
			resp := update(c.old, c.obj)
			if resp.Allowed != c.allowed {
				t.Fatalf("allowed=%t %v, want allowed=%t", resp.Allowed, resp.Result, c.allowed)
			}
			if !c.allowed && c.old != nil && resp.Result.Code != http.StatusUnprocessableEntity {
				t.Fatalf("refused with %v, want 422", resp.Result)
			}
			if c.old == nil && resp.Result.Code != http.StatusBadRequest {
				t.Fatalf("refused with %v, want 400 for the stored object", resp.Result)
			}
		})
	}
}

// TestEveryUndecodableValueIsRatchetedApart: a policy stored under an earlier schema with
// values holdfast's types cannot hold (a cooldown beyond 290 years) has each reported, not
// only the first: fixing one of two is admitted, and a window added beside them that does
// not parse is refused rather than hidden behind the stored decode error.
func TestEveryUndecodableValueIsRatchetedApart(t *testing.T) {
	h := &Handler{}
	const huge = "99999999999999h"
	policy := func(cooldown, minReady any, schedule string) map[string]any {
		spec := map[string]any{"targets": map[string]any{}, "cooldown": cooldown, "minReadySeconds": minReady}
		if schedule != "" {
			spec["windows"] = []any{map[string]any{"schedule": schedule, "duration": "1h", "action": "Deny"}}
		}
		return map[string]any{"apiVersion": "holdfast.dev/v1alpha1", "kind": "DisruptionPolicy", "metadata": map[string]any{"name": "p"}, "spec": spec}
	}
	update := func(old, obj any) admission.Response {
		rawOld, _ := json.Marshal(old)
		raw, _ := json.Marshal(obj)
		return h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Update, Name: "p", Kind: metav1.GroupVersionKind{Group: "holdfast.dev", Version: "v1alpha1", Kind: "DisruptionPolicy"},
			Object: runtime.RawExtension{Raw: raw}, OldObject: runtime.RawExtension{Raw: rawOld}}})
	}
	stored := policy(huge, int64(1)<<40, "")
	for name, c := range map[string]struct {
		obj  any
		want string // the field refused, "" when admitted
	}{
		"fixing the first of two":                  {obj: policy("1m", int64(1)<<40, "")},
		"fixing the second of two":                 {obj: policy(huge, int64(5), "")},
		"left as they were":                        {obj: policy(huge, int64(1)<<40, "")},
		"a window that does not parse beside them": {obj: policy(huge, int64(1)<<40, "0 25 * * *"), want: "spec.windows[0].schedule"},
		"the second changed to another bad value":  {obj: policy(huge, int64(1)<<41, ""), want: "spec.minReadySeconds"},
	} {
		t.Run(name, func(t *testing.T) {
			resp := update(stored, c.obj)
			if c.want == "" {
				if !resp.Allowed {
					t.Fatalf("refused: %v", resp.Result)
				}
				return
			}
			if resp.Allowed || resp.Result.Code != http.StatusUnprocessableEntity ||
				!slices.ContainsFunc(resp.Result.Details.Causes, func(cause metav1.StatusCause) bool { return cause.Field == c.want }) {
				t.Fatalf("got allowed=%t %v, want 422 naming %s", resp.Allowed, resp.Result, c.want)
			}
		})
	}
}
