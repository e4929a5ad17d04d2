package budget

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/ledger"
)

// The ledger of a group is a Lease named GroupPrefix + the workload's UID. Its
// EvictionsAnnotation lists the evictions holdfast admitted in the group; its
// RolloutStartAnnotation holds the last start of the workload's rollout that shares a
// DisruptionPolicy's budget, written into the same Lease so that a drain and a rollout
// admitted at once by two replicas conflict, and the second decides again.
const (
	GroupPrefix            = "holdfast-evictions-"
	EvictionsAnnotation    = "holdfast.dev/evictions"
	RolloutStartAnnotation = "holdfast.dev/rollout-start"
	// MinRetention is the least time a group's ledger keeps its records (Retention).
	MinRetention = time.Hour
	// maxEvictions bounds the records one ledger keeps.
	maxEvictions = 64
)

// Eviction is one eviction holdfast admitted in a group, as the group's ledger records it.
type Eviction struct {
	Pod string    `json:"pod"`
	UID types.UID `json:"uid"`
	At  time.Time `json:"at"`
	// By is the replica that admitted it, whose clock At is read on.
	By string `json:"by,omitempty"`
	// Via is how the pod was taken down: "" an eviction, ViaDelete a DELETE of the pod
	// (DisruptionPolicy guardDeletes). A release that does not know the field reads a
	// delete as an eviction, which counts alike.
	Via string `json:"via,omitempty"`
	// Released marks an eviction admitted because the pod's hold had lasted its policy's
	// maxHold (afterMaxHold Release). A release that does not know the field counts it as
	// any other, which it is for the budget and the cooldown.
	Released bool `json:"released,omitempty"`

	// Domains are the pod's topology domains when it was admitted down: its node's value of
	// each topologyBudget key of the policies that applied (DisruptionPolicy
	// topologyBudget), by key; "" for a node without the key or with it empty. Kept in the
	// record because the node may be gone by the time the domain is counted; a key missing
	// here was not read (Disrupted, NotRecorded). A release that does not know the field
	// ignores it.
	Domains map[string]string `json:"domains,omitempty"`
	// Serving is, by topologyBudget key, how many of the group's pods served (Ready, not
	// terminating) in the pod's domain of that key when it was admitted down, this one
	// included: the domain is whole again once as many are available there (Disrupted).
	// A release that does not know the field ignores it, and one that reads a record
	// without it matches a replacement created after the record instead.
	Serving map[string]int32 `json:"serving,omitempty"`
}

// ViaDelete marks a record of an admitted pod DELETE.
const ViaDelete = "delete"

// RolloutStart is a start of a workload's rollout that shares budgets, as its group's
// ledger records it.
type RolloutStart struct {
	Template      string    `json:"template"`
	At            time.Time `json:"at"`
	By            string    `json:"by,omitempty"`
	RolloutPolicy string    `json:"rolloutPolicy"`
	// Budgets are the DisruptionPolicies whose budgets it shares.
	Budgets []string `json:"budgets"`
}

// GroupKey is the ledger of the group of the workload with this UID.
func GroupKey(namespace string, group types.UID) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: GroupPrefix + string(group)}
}

// Group is one read of a group's ledger.
type Group struct {
	*ledger.Ledger[Eviction]
}

// ReadGroup reads the ledger of the group of the workload with this UID; a missing one is
// empty.
func (l *Ledgers) ReadGroup(ctx context.Context, group types.UID) (Group, error) {
	g, err := ledger.Read[Eviction](ctx, l.Live, GroupKey(l.Namespace, group), EvictionsAnnotation)
	return Group{g}, err
}

// RolloutStart is the group's last recorded start of a rollout that shares its budget;
// ok is false when there is none or it does not decode.
func (g Group) RolloutStart() (s RolloutStart, ok bool) {
	raw := g.Annotation(RolloutStartAnnotation)
	if raw == "" || json.Unmarshal([]byte(raw), &s) != nil {
		return RolloutStart{}, false
	}
	return s, true
}

// RecordEviction writes the group's records with rec, keeping those not older than keep
// before it (one per pod: its latest admitted eviction, and at most the newest 64). A
// conflict means another replica wrote first: the caller decides again on a fresh read.
func (g Group) RecordEviction(ctx context.Context, l *Ledgers, rec Eviction, keep time.Duration) error {
	return g.Write(ctx, l.Live, AppendEviction(g.Records, rec, keep), l.Identity, rec.At)
}

// AppendEviction is records with rec appended, without those older than keep before rec
// or of the same pod, and at most the newest maxEvictions.
func AppendEviction(records []Eviction, rec Eviction, keep time.Duration) []Eviction {
	out := slices.DeleteFunc(slices.Clone(records), func(r Eviction) bool { return rec.At.Sub(r.At) > keep || r.UID == rec.UID })
	out = append(out, rec)
	if len(out) > maxEvictions {
		out = out[len(out)-maxEvictions:]
	}
	return out
}

// RecordRolloutStart writes s into the group's ledger, keeping its evictions: an eviction
// admitted meanwhile makes the write conflict (and the start is decided again), and an
// eviction decided after it sees the start.
func (g Group) RecordRolloutStart(ctx context.Context, l *Ledgers, s RolloutStart) error {
	raw, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return g.WriteWith(ctx, l.Live, g.Records, map[string]string{RolloutStartAnnotation: string(raw)}, l.Identity, s.At)
}

// Retention is how long a group's ledger keeps its records: longer than any cooldown the
// policies set, and than any topologyBudget's replacementTimeout (a record disrupts its
// domain until then: dropped sooner, a domain whose pod is not replaced would free before
// its bound), with the margins a record may need, and never less than MinRetention.
func Retention(policies []v1alpha1.DisruptionPolicy) time.Duration {
	keep := MinRetention
	for i := range policies {
		if c := policies[i].Spec.Cooldown; c != nil {
			keep = max(keep, c.Duration+EvictionLapse+MaxClockSkew)
		}
		if tb := policies[i].Spec.TopologyBudget; tb != nil {
			_, _, bound := tb.Resolved()
			keep = max(keep, bound+MaxClockSkew)
		}
	}
	return keep
}
