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

// Write replaces the records, as by (a replica) at at; owners are set when it creates the
// Lease. A conflict means another replica wrote first, AlreadyExists that one created it
// first, and NotFound that it was deleted since it was read: the caller decides again on a
// fresh read.
func (l *Ledger[R]) Write(ctx context.Context, c client.Client, records []R, by string, at time.Time, owners ...metav1.OwnerReference) error {
	raw, err := json.Marshal(records)
	if err != nil {
		return err
	}
	lease := l.lease.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[l.annotation] = string(raw)
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

// EvictionsPrefix starts the names of the groups' ledgers.
const EvictionsPrefix = "holdfast-evictions-"

// EvictionsKey is the ledger of the group of the workload with this UID.
func EvictionsKey(namespace string, group types.UID) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: EvictionsPrefix + string(group)}
}
