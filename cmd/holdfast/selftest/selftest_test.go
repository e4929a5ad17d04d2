package selftest

import (
	"errors"
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
)

func TestLabelsForSatisfyTheSelector(t *testing.T) {
	for name, tc := range map[string]struct {
		sel *metav1.LabelSelector
		ok  bool
	}{
		"nil":        {nil, true},
		"labels":     {&metav1.LabelSelector{MatchLabels: map[string]string{"app": "kiam"}}, true},
		"in":         {&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}, true},
		"exists":     {&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}, true},
		"not in":     {&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}}, true},
		"no probe":   {&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: probeLabel, Operator: metav1.LabelSelectorOpDoesNotExist}}}, true},
		"impossible": {&metav1.LabelSelector{MatchLabels: map[string]string{"tier": "a"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a"}}}}, false},
	} {
		t.Run(name, func(t *testing.T) {
			got, ok := labelsFor(tc.sel)
			if ok != tc.ok {
				t.Fatalf("labelsFor = %v, %v; want ok %v", got, ok, tc.ok)
			}
			if !ok {
				return
			}
			sel, err := selectorOf(tc.sel)
			if err != nil || !sel.Matches(labels.Set(got)) {
				t.Errorf("labels %v do not satisfy %v (%v)", got, tc.sel, err)
			}
		})
	}
}

func TestWorkloadResource(t *testing.T) {
	rule := func(op admissionregistrationv1.OperationType, res ...string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{op}, Rule: admissionregistrationv1.Rule{Resources: res}}
	}
	for _, tc := range []struct {
		rules []admissionregistrationv1.RuleWithOperations
		want  string
	}{
		{[]admissionregistrationv1.RuleWithOperations{rule(admissionregistrationv1.Create, "daemonsets", "deployments")}, "deployments"},
		{[]admissionregistrationv1.RuleWithOperations{rule(admissionregistrationv1.Create, "statefulsets")}, "statefulsets"},
		{[]admissionregistrationv1.RuleWithOperations{rule(admissionregistrationv1.Update, "deployments/scale")}, ""},
	} {
		if got := workloadResource(tc.rules); got != tc.want {
			t.Errorf("workloadResource(%v) = %q, want %q", tc.rules, got, tc.want)
		}
	}
}

func TestPathOf(t *testing.T) {
	for _, tc := range []struct {
		cc   admissionregistrationv1.WebhookClientConfig
		want string
	}{
		{admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Path: ptr.To("/validate-pdb")}}, "/validate-pdb"},
		{admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443//validate-policy")}, "/validate-policy"},
	} {
		if got := pathOf(tc.cc); got != tc.want {
			t.Errorf("pathOf = %q, want %q", got, tc.want)
		}
	}
}

func probeRequest(dryRun bool, name string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{DryRun: ptr.To(dryRun), Name: name,
		Operation: admissionv1.Create, Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Eviction"}}}
}

// Only a dry run for an object of the probe's name is a probe: real requests for such an
// object are decided as any other.
func TestIsSelfTestProbe(t *testing.T) {
	if !app.IsSelfTestProbe(probeRequest(true, app.SelfTestName)) {
		t.Error("a dry run for holdfast-selftest is a probe")
	}
	if app.IsSelfTestProbe(probeRequest(false, app.SelfTestName)) || app.IsSelfTestProbe(probeRequest(true, "web-0")) {
		t.Error("a request that is not a dry run, or for another object, is not a probe")
	}
}

// The API server's refusal carries the webhook's status; only holdfast's self-test answer
// naming the entry is OK.
func TestJudge(t *testing.T) {
	answer := func(entry string) error {
		st := *app.SelfTestAnswer("/validate-eviction", probeRequest(true, app.SelfTestName)).Result
		st.Message = `admission webhook "` + entry + `" denied the request: ` + st.Message
		return &apierrors.StatusError{ErrStatus: st}
	}
	for name, tc := range map[string]struct {
		err  error
		want Status
	}{
		"admitted":      {nil, Fail},
		"pod not found": {apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, app.SelfTestName), Fail},
		"unreachable":   {apierrors.NewInternalError(errors.New(`failed calling webhook "a.eviction.holdfast.dev": connection refused`)), Fail},
		"kube's 429":    {apierrors.NewTooManyRequests("Cannot evict pod", 10), Fail},
		"answered":      {answer("a.eviction.holdfast.dev"), OK},
		"another entry": {answer("b.eviction.holdfast.dev"), Skip},
	} {
		if got, reason := judge("a.eviction.holdfast.dev", tc.err); got != tc.want {
			t.Errorf("%s: judge = %s (%s), want %s", name, got, reason, tc.want)
		}
	}
	if st := app.SelfTestAnswer("/x", probeRequest(true, app.SelfTestName)).Result; st.Code != http.StatusForbidden {
		t.Errorf("the answer's code is %d, want 403", st.Code)
	}
}

func TestFailed(t *testing.T) {
	if n := Failed([]Result{{Status: OK}, {Status: Fail}, {Status: Skip}, {Status: Fail}}); n != 2 {
		t.Errorf("Failed = %d, want 2", n)
	}
}
