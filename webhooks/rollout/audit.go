package rollout

import (
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Audit evaluates a workload as it stands against the policy's rules that need no request
// (argsMatchReplicas and the strategy lints), by the decision code the webhook runs for a
// CREATE of it: what the policy would refuse were the workload created now. The leader's
// background audit reports it (policy status, PolicyReports, Events).
func Audit(p *v1alpha1.RolloutPolicy, obj client.Object, nsLabels map[string]string, m *policy.Matcher, now time.Time) (decision.Violations, error) {
	w, err := workload.From(obj)
	if err != nil {
		return nil, err
	}
	audited := *p
	audited.Spec.Mode = v1alpha1.ModeEnforce
	// The revision rules, windows and exemptions are about requests: none is made here.
	audited.Spec.Windows, audited.Spec.Exemptions = nil, v1alpha1.Exemptions{}
	d, err := Decide(Input{Operation: admissionv1.Create, New: w, NamespaceLabels: nsLabels, Matcher: m, Now: now,
		Policies: []v1alpha1.RolloutPolicy{audited}})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w, err)
	}
	return d.Violations, nil
}
