// Package ledger keeps records of what holdfast admitted in coordination Leases in its
// namespace: one annotation holds the records as a JSON list. Every replica reads a ledger
// from the API server and writes it with optimistic concurrency, so that two replicas
// never both admit what only one may, even before their informers have seen the first.
// The eviction guard keeps one per group (its admitted evictions), the rollout guard one
// per policy with a fleet limit (its admitted starts).
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ManagedByLabel marks holdfast's ledgers.
const ManagedByLabel = "app.kubernetes.io/managed-by"

// Ledger is one read of a Lease's records.
type Ledger[R any] struct {
	lease      *coordinationv1.Lease
	annotation string
	// Records are the records as read.
	Records []R
	exists  bool
}

// Read reads the ledger at key, whose records are in annotation; a missing Lease is an
// empty ledger that Write creates. A ledger whose records do not decode is an error: a
// corrupt ledger must not admit more than fits.
func Read[R any](ctx context.Context, r client.Reader, key client.ObjectKey, annotation string) (*Ledger[R], error) {
	l := &Ledger[R]{lease: &coordinationv1.Lease{}, annotation: annotation}
	err := r.Get(ctx, key, l.lease)
	if client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading the ledger %s: %w", key, err)
	}
	if err != nil {
		l.lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{ManagedByLabel: "holdfast"}}}
		return l, nil
	}
	l.exists = true
	if raw := l.lease.Annotations[annotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &l.Records); err != nil {
			return nil, fmt.Errorf("decoding the ledger %s: %w", key, err)
		}
	}
	return l, nil
}

// Annotation is another annotation of the ledger's Lease, as read.
func (l *Ledger[R]) Annotation(key string) string {
	return l.lease.Annotations[key]
}

// Write replaces the records, as by (a replica) at at; owners are set when it creates the
// Lease. A conflict means another replica wrote first, AlreadyExists that one created it
// first, and NotFound that it was deleted since it was read: the caller decides again on a
// fresh read.
func (l *Ledger[R]) Write(ctx context.Context, c client.Client, records []R, by string, at time.Time, owners ...metav1.OwnerReference) error {
	return l.WriteWith(ctx, c, records, nil, by, at, owners...)
}

// WriteWith is Write that also sets other annotations of the Lease, in the same write.
func (l *Ledger[R]) WriteWith(ctx context.Context, c client.Client, records []R, annotations map[string]string, by string, at time.Time, owners ...metav1.OwnerReference) error {
	raw, err := json.Marshal(records)
	if err != nil {
		return err
	}
	lease := l.lease.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[l.annotation] = string(raw)
	for k, v := range annotations {
		lease.Annotations[k] = v
	}
	now := metav1.NewMicroTime(at)
	lease.Spec.HolderIdentity = &by
	lease.Spec.RenewTime = &now
	if l.exists {
		return c.Update(ctx, lease) // carries resourceVersion: optimistic concurrency
	}
	lease.OwnerReferences = owners
	return c.Create(ctx, lease)
}

// LastWrite is when a ledger was last written: its renew time, or its creation.
func LastWrite(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	return l.CreationTimestamp.Time
}

// Eviction is one eviction holdfast admitted in a group (the pods of one workload), as the
// group's ledger records it.
type Eviction struct {
	Pod string    `json:"pod"`
	UID types.UID `json:"uid"`
	At  time.Time `json:"at"`
	// By is the replica that admitted it, whose clock At is read on.
	By string `json:"by,omitempty"`
}

// EvictionsAnnotation holds a group's ledger's records.
const EvictionsAnnotation = "holdfast.dev/evictions"

// EvictionLapse is how long an admitted eviction counts against its group before the pod
// is seen terminating or gone. kube's own PDB check may still refuse an eviction holdfast
// admitted; such a record lapses instead of holding the group.
const EvictionLapse = 30 * time.Second

// MaxClockSkew is how far apart the clocks of holdfast's replicas (and of the nodes that
// stamp readiness) may be: a record another replica wrote may be that much older than it
// looks on this one's clock.
const MaxClockSkew = 5 * time.Second

// EvictionsPrefix starts the names of the groups' ledgers.
const EvictionsPrefix = "holdfast-evictions-"

// EvictionsKey is the ledger of the group of the workload with this UID.
func EvictionsKey(namespace string, group types.UID) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: EvictionsPrefix + string(group)}
}

// RolloutStartAnnotation holds, on a group's ledger, the last start of the workload's
// rollout admitted under a RolloutPolicy that shares DisruptionPolicies' budgets: the
// rollout guard writes it into the same Lease the eviction guard writes, so that a drain
// and a rollout admitted at once by two replicas conflict, and the second decides again.
const RolloutStartAnnotation = "holdfast.dev/rollout-start"

// StartLapse is how long an admitted start of a rollout counts without its revision
// journal showing it: long enough to cover a leader failover, during which journals do not
// follow; a start the API server refused after holdfast admitted it frees what it held then.
const StartLapse = 2 * time.Minute

// RolloutStart is a start of a workload's rollout that shares budgets.
type RolloutStart struct {
	Template      string    `json:"template"`
	At            time.Time `json:"at"`
	By            string    `json:"by,omitempty"`
	RolloutPolicy string    `json:"rolloutPolicy"`
	// Budgets are the DisruptionPolicies whose budgets it shares.
	Budgets []string `json:"budgets"`
}

// ReadRolloutStart decodes a group ledger's rollout start; ok is false when there is none
// or it does not decode.
func ReadRolloutStart(raw string) (RolloutStart, bool) {
	var s RolloutStart
	if raw == "" || json.Unmarshal([]byte(raw), &s) != nil {
		return RolloutStart{}, false
	}
	return s, true
}
