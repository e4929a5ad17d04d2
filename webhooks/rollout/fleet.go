package rollout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/ledger"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// RuleConcurrency reports a start held by a policy's fleet-wide limit.
const RuleConcurrency = "concurrency"

// The fleet limit (rules.concurrency) counts the selected workloads whose rollouts are
// unfinished, from their revision journals, and the starts holdfast admitted that no
// journal shows yet: every replica records each start it admits under such a policy in
// the policy's ledger (a Lease in holdfast's namespace, written with optimistic
// concurrency, owned by the policy), so that two replicas never both admit the start that
// only one slot is left for, before the leader has journaled either.
const (
	startsAnnotation = "holdfast.dev/starts"
	// StartLapse is how long an admitted start counts without its journal showing it.
	StartLapse = ledger.StartLapse
	// LedgerTimeout bounds the fleet and budget ledgers' reads and writes of one request,
	// well inside the webhook's timeout: a start that cannot be recorded in time is refused
	// (a holdfast error is a refusal), never let through unrecorded by a timed-out call.
	LedgerTimeout = 2 * time.Second
	// maxNamed is how many workloads in flight a message or a status names.
	maxNamed = 5
)

// Start is an admitted start of a rollout, as the policy's ledger records it.
type Start struct {
	Workload string    `json:"workload"` // kind namespace/name
	Template string    `json:"template"` // the fingerprint that starts rolling out
	At       time.Time `json:"at"`
	By       string    `json:"by,omitempty"`
}

// Fleet is what a policy with a concurrency rule sees of the other workloads it selects.
type Fleet struct {
	// Selected counts the workloads the policy selects, this one included.
	Selected int
	// InFlight names the others whose rollouts are unfinished, stalled ones marked.
	InFlight []string
	// Starts are the policy's ledger, as read.
	Starts []Start
}

// maxInFlight is the policy's limit for its selected workloads: a percentage rounds up,
// and the limit is at least 1.
func maxInFlight(r *v1alpha1.ConcurrencyRule, selected int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(&r.MaxInFlight, selected, true)
	if err != nil {
		return 1
	}
	return max(n, 1)
}

// checkConcurrency holds a start while maxInFlight others are in flight.
func checkConcurrency(in Input, p *v1alpha1.RolloutPolicy) []finding {
	r := p.Spec.Rules.Concurrency
	f := in.Fleets[p.Name]
	limit := maxInFlight(r, f.Selected)
	if len(f.InFlight) < limit {
		return nil
	}
	named := f.InFlight[:min(len(f.InFlight), maxNamed)]
	more := ""
	if len(f.InFlight) > maxNamed {
		more = fmt.Sprintf(" and %d more", len(f.InFlight)-maxNamed)
	}
	return []finding{{rule: RuleConcurrency, field: templatePath, message: fmt.Sprintf(
		"%s: %d of the %d workloads the policy selects are rolling out (%s%s), and at most %s may at once; "+
			"retry in 30s, after one finishes; a rollback to the revision still serving, or the fix of a stalled rollout, is never held",
		in.New, len(f.InFlight), f.Selected, strings.Join(named, ", "), more, r.MaxInFlight.String())}}
}

// InFlight lists the workloads among selected whose rollouts are unfinished as their
// journals recorded them (journal.Unfinished), and those starts record that no journal
// shows yet, leaving out self; sorted.
func InFlight(p *v1alpha1.RolloutPolicy, selected []workload.Ref, journals *journal.Store, starts []Start, self string, now time.Time) []string {
	seen := map[string]bool{self: true}
	var out []string
	for _, name := range journals.Unfinished(selected, journal.StallAfter(p.Spec.Rules.Settle), now) {
		if !seen[strings.TrimSuffix(name, journal.StalledMark)] {
			seen[strings.TrimSuffix(name, journal.StalledMark)] = true
			out = append(out, name)
		}
	}
	for _, s := range starts {
		if seen[s.Workload] || now.Sub(s.At) >= StartLapse+ledger.MaxClockSkew {
			continue
		}
		ref, ok := parseRef(s.Workload)
		if !ok {
			continue
		}
		if cur := journals.Get(ref.Kind, ref.Namespace, ref.Name).Current(); cur != nil && cur.Template == s.Template {
			continue // the journal shows it: counted above, or finished
		}
		seen[s.Workload] = true
		out = append(out, s.Workload)
	}
	slices.Sort(out)
	return out
}

func parseRef(s string) (workload.Ref, bool) {
	kind, rest, ok := strings.Cut(s, " ")
	if !ok {
		return workload.Ref{}, false
	}
	ns, name, ok := strings.Cut(rest, "/")
	return workload.Ref{Kind: v1alpha1.WorkloadKind(kind), Namespace: ns, Name: name}, ok
}

// startsKey is the Lease holding a policy's admitted starts.
func startsKey(namespace, policyName string) client.ObjectKey {
	sum := sha256.Sum256([]byte(policyName))
	return client.ObjectKey{Namespace: namespace, Name: "holdfast-starts-" + hex.EncodeToString(sum[:])[:16]}
}

// readStarts reads a policy's ledger of admitted starts from the API server.
func readStarts(ctx context.Context, r client.Reader, namespace, policyName string) (*ledger.Ledger[Start], error) {
	return ledger.Read[Start](ctx, r, startsKey(namespace, policyName), startsAnnotation)
}

// withStart is the ledger's starts that have not lapsed, without the workload's earlier
// ones, and s.
func withStart(starts []Start, s Start) []Start {
	out := slices.DeleteFunc(slices.Clone(starts), func(o Start) bool { return o.Workload == s.Workload || s.At.Sub(o.At) >= StartLapse })
	return append(out, s)
}

// ownedBy makes a policy's ledger go with the policy.
func ownedBy(p *v1alpha1.RolloutPolicy) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RolloutPolicy", Name: p.Name, UID: p.UID}
}
