// Package floor is the webhook that keeps the floor a DisruptionPolicy generates: a
// PodDisruptionBudget, not holdfast's, that would cover the pods of a workload the policy
// generates a PDB for with a weaker budget than the policy's is refused (Enforce) or
// warned of (Warn). Such a PDB would otherwise make holdfast step back (kube answers 500
// to an eviction of a pod two PDBs cover, so holdfast never keeps a second one), leaving a
// weaker floor for when holdfast is down. A PDB at least as strict as the policy is
// admitted and the generated floor steps back; a DELETE is never sent here.
package floor

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// Path is where the webhook is served.
const Path = interception.FloorPath

// Rule names the check in messages and audit annotations.
const Rule = "pdbFloor"

// CauseType marks the status causes of its refusals.
const CauseType metav1.CauseType = "holdfast.dev/DisruptionPolicy"

// Handler judges PodDisruptionBudget CREATEs and UPDATEs.
type Handler struct {
	// Reader is the cache: namespaces, policies, workloads and pods.
	Reader client.Reader
	// Matcher evaluates selectors; nil compiles them anew.
	Matcher *policy.Matcher
	Clock   clock.PassiveClock
}

var _ admission.Handler = &Handler{}

// Handle implements admission.Handler. An UPDATE is refused only for what it makes weaker:
// a PDB stored weaker (while holdfast was down, or under Warn) can still be changed, and
// made stricter, without first meeting the policy.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	if req.Kind.Group != policyv1.GroupName || req.Kind.Kind != "PodDisruptionBudget" {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("unsupported kind %s: this webhook judges PodDisruptionBudgets", req.Kind))
	}
	candidate, err := decode(req.Object.Raw, req.Namespace)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the PodDisruptionBudget: %w", err))
	}
	var found []pdb.Weakening
	if candidate.Spec.Selector != nil { // else it covers no pod: nothing to read
		// One read of the namespace judges both the new PDB and, on an UPDATE, the stored one.
		floors, err := pdb.ReadFloors(ctx, h.Reader, h.Matcher, candidate.Namespace)
		if err != nil {
			return retry(err)
		}
		found = floors.Weakenings(h.Matcher, candidate)
		if len(found) > 0 && req.Operation == admissionv1.Update {
			old, err := decode(req.OldObject.Raw, req.Namespace)
			if err != nil {
				return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored PodDisruptionBudget: %w", err))
			}
			found = weakerThan(found, floors.Weakenings(h.Matcher, old))
		}
	}
	now := h.Clock.Now()
	var vs decision.Violations
	for _, f := range found {
		exempt, grant := policy.ExemptAt(f.Policy.Spec.Exemptions, req.UserInfo, now)
		msg := fmt.Sprintf("PodDisruptionBudget %s/%s would cover the pods of %s %s, whose floor DisruptionPolicy %s generates, and %s: "+
			"while holdfast is down it would be their only floor; make it at least as strict as the policy, select other pods, or leave the floor to holdfast",
			candidate.Namespace, name(candidate, req.Name), f.Workload.Kind, f.Workload.Name, f.Policy.Name, f.Weakness)
		switch {
		case exempt && grant == nil:
		case grant != nil:
			vs = append(vs, decision.Exempted(f.Policy.Name, grant, []string{Rule + ": " + msg}))
		default:
			vs = append(vs, decision.Violation{Policy: f.Policy.Name, Rule: Rule, Action: decision.ActionFor(f.Policy.Spec.Mode),
				Field: field.NewPath("spec"), Message: msg})
		}
	}
	vs.SortByPolicy()
	if vs.Action() != decision.Deny {
		return decision.Allowed(vs)
	}
	status := apierrors.NewGenericServerResponse(http.StatusForbidden, "", schema.GroupResource{}, "", vs.Denial(), 0, false)
	for _, v := range vs {
		status.ErrStatus.Details.Causes = append(status.ErrStatus.Details.Causes,
			metav1.StatusCause{Type: CauseType, Message: v.String(), Field: v.Field.String()})
	}
	return decision.Denied(status, vs)
}

// weakerThan keeps what found weakens beyond what the stored PDB already did: a floor it
// did not weaken, more pods let go at once, or unhealthy pods newly let go.
func weakerThan(found, was []pdb.Weakening) []pdb.Weakening {
	type key struct {
		policy string
		uid    types.UID
	}
	before := map[key]pdb.Weakening{}
	for _, w := range was {
		before[key{w.Policy.Name, w.Workload.UID}] = w
	}
	var out []pdb.Weakening
	for _, f := range found {
		b, ok := before[key{f.Policy.Name, f.Workload.UID}]
		if !ok || f.Allows > b.Allows || (f.AlwaysAllow && !b.AlwaysAllow) {
			out = append(out, f)
		}
	}
	return out
}

// decode reads a PodDisruptionBudget of the request's namespace.
func decode(raw []byte, namespace string) (*policyv1.PodDisruptionBudget, error) {
	p := &policyv1.PodDisruptionBudget{}
	if err := json.Unmarshal(raw, p); err != nil {
		return nil, err
	}
	p.Namespace = namespace
	return p, nil
}

// name is the PDB's name, the request's for a generated one not yet named.
func name(p *policyv1.PodDisruptionBudget, requested string) string {
	if p.Name != "" {
		return p.Name
	}
	if requested != "" {
		return requested
	}
	return p.GenerateName + "*"
}

// retry answers a read that failed (decision.Retry).
func retry(err error) admission.Response {
	return decision.Retry("what the PodDisruptionBudget would cover", err)
}
