package budget

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/ledger"
)

// The fleet ledger of a RolloutPolicy with a fleet limit (rules.concurrency) is a Lease
// named StartsPrefix + a hash of the policy's name, owned by the policy, whose
// StartsAnnotation lists the starts of rollouts the policy's replicas admitted: two
// replicas never both admit the start that only one slot is left for, before the leader
// has journaled either.
const (
	StartsPrefix     = "holdfast-starts-"
	StartsAnnotation = "holdfast.dev/starts"
)

// Start is an admitted start of a rollout, as a fleet ledger records it.
type Start struct {
	Workload string    `json:"workload"` // kind namespace/name
	Template string    `json:"template"` // the fingerprint that starts rolling out
	At       time.Time `json:"at"`
	By       string    `json:"by,omitempty"`
	// UID and Generation are the admitted object's (the API server sets both before
	// admission); empty in a start a release before it wrote.
	UID        types.UID `json:"uid,omitempty"`
	Generation int64     `json:"generation,omitempty"`
	// Lowered is a StatefulSet's partition lowered below ordinals on another revision: it
	// restarts a rollout its journal recorded as finished (false in a start a release
	// before it wrote).
	Lowered bool `json:"lowered,omitempty"`
	// Shape is the started template's fingerprint with the argsMatchReplicas flags of the
	// policies that selected it blanked (workload.Template.Shape), when they set any: a
	// journal whose current revision has that shape shows the start, though a
	// flag-following scale since changed its fingerprint. Empty in a start a release
	// before it wrote.
	Shape string `json:"shape,omitempty"`
}

// Fleet is one read of a policy's fleet ledger.
type Fleet struct {
	*ledger.Ledger[Start]
	policy *v1alpha1.RolloutPolicy
}

// Copy is a copy of the read to write with on its own: a write updates the ledger it was
// made with (ledger.Ledger.Write).
func (f Fleet) Copy() Fleet { return Fleet{f.Ledger.Copy(), f.policy} }

// StartsKey is the fleet ledger of the policy named.
func StartsKey(namespace, policyName string) client.ObjectKey {
	sum := sha256.Sum256([]byte(policyName))
	return client.ObjectKey{Namespace: namespace, Name: StartsPrefix + hex.EncodeToString(sum[:])[:16]}
}

// ReadFleet reads the policy's fleet ledger; a missing one is empty.
func (l *Ledgers) ReadFleet(ctx context.Context, p *v1alpha1.RolloutPolicy) (Fleet, error) {
	f, err := ledger.Read[Start](ctx, l.Live, StartsKey(l.Namespace, p.Name), StartsAnnotation)
	return Fleet{f, p}, err
}

// RecordStart writes s into the fleet ledger, without the starts that have lapsed by then
// or are the workload's earlier ones; a ledger it creates goes with its policy.
func (f Fleet) RecordStart(ctx context.Context, l *Ledgers, s Start) error {
	owner := metav1.OwnerReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "RolloutPolicy", Name: f.policy.Name, UID: f.policy.UID}
	return f.Write(ctx, l.Live, WithStart(f.Records, s), l.Identity, s.At, owner)
}

// WithStart is starts without those that have lapsed by s or are of s's workload, and s.
func WithStart(starts []Start, s Start) []Start {
	out := slices.DeleteFunc(slices.Clone(starts), func(o Start) bool { return o.Workload == s.Workload || s.At.Sub(o.At) >= StartLapse })
	return append(out, s)
}
