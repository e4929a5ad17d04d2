// Package decision is the vocabulary both of holdfast's guards decide in and answer with:
// a violation of one policy's rule, the action its mode calls for, and how a set of
// violations becomes an admission response (denied with an apierrors status, or allowed
// with warnings and audit annotations).
package decision

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Violation is one rule of one policy that a request breaks.
type Violation struct {
	Policy string
	Rule   string
	Action Action
	// Field is where in the object the rule objects, when it objects to a field.
	Field   *field.Path
	Message string
	// Never is a refusal no wait will cure (an eviction budget of zero): 403, not 429.
	Never bool
	// Wait is how long until the request may pass, as far as holdfast can tell.
	Wait time.Duration
}

// String renders the violation as holdfast reports it: [policy/rule] what happened; what to do.
func (v Violation) String() string {
	return fmt.Sprintf("[%s/%s] %s", v.Policy, v.Rule, v.Message)
}

// Violations are what every applicable policy found.
type Violations []Violation

// Action is the strictest action among the violations; Allow when there are none.
func (vs Violations) Action() Action {
	a := Allow
	for _, v := range vs {
		a = max(a, v.Action)
	}
	return a
}

// Never reports an enforced violation that no wait will cure.
func (vs Violations) Never() bool {
	for _, v := range vs {
		if v.Action == Deny && v.Never {
			return true
		}
	}
	return false
}

// Wait is the longest wait among enforced violations.
func (vs Violations) Wait() time.Duration {
	var w time.Duration
	for _, v := range vs {
		if v.Action == Deny {
			w = max(w, v.Wait)
		}
	}
	return w
}

// SortByPolicy orders the violations by policy name, keeping each policy's in the order
// its rules found them: the cache lists policies in no set order, and an answer must not
// change with it.
func (vs Violations) SortByPolicy() {
	slices.SortStableFunc(vs, func(a, b Violation) int { return strings.Compare(a.Policy, b.Policy) })
}

// Messages renders the violations at or above the given action.
func (vs Violations) Messages(atLeast Action) []string {
	var out []string
	for _, v := range vs {
		if v.Action >= atLeast {
			out = append(out, v.String())
		}
	}
	return out
}

// Denial is the message of an enforced refusal: every enforced violation, joined.
func (vs Violations) Denial() string {
	return strings.Join(vs.Messages(Deny), "; ")
}

// Allowed admits the request, with the violations of Warn policies as warnings and those
// of Audit policies as audit annotations.
func Allowed(vs Violations) admission.Response {
	return withReports(admission.Allowed(""), vs)
}

// Denied refuses the request with err's status (code, reason, message, causes), and
// reports the violations of Warn and Audit policies as Allowed does.
func Denied(err *apierrors.StatusError, vs Violations) admission.Response {
	status := err.Status()
	resp := admission.ValidationResponse(false, status.Message)
	resp.Result = &status
	return withReports(resp, vs)
}

// Retry answers a request holdfast could not judge because a read of what (say, "what the
// PodDisruptionBudget would cover") failed: 503, so the client retries; never an allow of
// what a policy may forbid, and never a 500, which would read as a fault of the request.
func Retry(what string, err error) admission.Response {
	return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf("holdfast could not read %s (%w); retry in a few seconds", what, err))
}

// withReports adds the violations of Warn policies as warnings and those of Audit
// policies as audit annotations, one per rule, joined with "; ".
func withReports(resp admission.Response, vs Violations) admission.Response {
	for _, v := range vs {
		switch v.Action {
		case Warn:
			resp.Warnings = append(resp.Warnings, v.String())
		case Audit:
			if resp.AuditAnnotations == nil {
				resp.AuditAnnotations = map[string]string{}
			}
			if prev, ok := resp.AuditAnnotations[v.Rule]; ok {
				resp.AuditAnnotations[v.Rule] = prev + "; " + v.String()
			} else {
				resp.AuditAnnotations[v.Rule] = v.String()
			}
		}
	}
	return resp
}

// RuleExemption is the rule of the audit record a temporary exemption leaves.
const RuleExemption = "exemption"

// Exempted is the record of a request a temporary exemption let through: what the policy
// would have refused (each "rule: message") and who allowed it, as an Audit finding.
func Exempted(policyName string, grant *v1alpha1.TemporaryExemption, refused []string) Violation {
	return Violation{Policy: policyName, Rule: RuleExemption, Action: Audit, Message: fmt.Sprintf(
		"let through by the temporary exemption %q (expires %s): %s",
		grant.Reason, grant.Expires.UTC().Format(time.RFC3339), strings.Join(refused, "; "))}
}
