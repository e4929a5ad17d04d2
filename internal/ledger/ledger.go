// Package ledger keeps records in coordination Leases: one annotation holds the records
// as a JSON list. A ledger is read from the API server and written with optimistic
// concurrency, so that two writers never both add to what they read, even before their
// informers have seen the other's write. What the records are and mean is the caller's
// (internal/budget).
package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// labels and annotations are set on the Lease by the next write (Mark).
	labels, annotations map[string]string
}

// Read reads the ledger at key, whose records are in annotation; a missing Lease is an
// empty ledger that Write creates. A ledger whose records do not decode is an error: a
// corrupt ledger must not admit more than fits.
func Read[R any](ctx context.Context, r client.Reader, key client.ObjectKey, annotation string) (*Ledger[R], error) {
	lease := &coordinationv1.Lease{}
	err := r.Get(ctx, key, lease)
	if client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading the ledger %s: %w", key, err)
	}
	if err != nil {
		return &Ledger[R]{annotation: annotation, lease: &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{ManagedByLabel: "holdfast"}}}}, nil
	}
	return Decode[R](lease, annotation)
}

// Decode is the ledger of a Lease read from the API server otherwise than by Read (a
// List), whose records are in annotation; records that do not decode are an error, as
// Read's. The Lease is the ledger's from then on: it is not to be changed.
func Decode[R any](lease *coordinationv1.Lease, annotation string) (*Ledger[R], error) {
	l := &Ledger[R]{lease: lease, annotation: annotation, exists: true}
	if raw := lease.Annotations[annotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &l.Records); err != nil {
			return nil, fmt.Errorf("decoding the ledger %s/%s: %w", lease.Namespace, lease.Name, err)
		}
	}
	return l, nil
}

// Mark has the next write set these labels and annotations on the Lease too (with those it
// has): what names the ledger to those who list it, which a Lease an earlier release
// created may lack.
func (l *Ledger[R]) Mark(labels, annotations map[string]string) {
	l.labels, l.annotations = labels, annotations
}

// Copy is a copy of the read that a write does not change. Records and the Lease are
// shared: neither is changed in place.
func (l *Ledger[R]) Copy() *Ledger[R] {
	c := *l
	return &c
}

// Exists is whether the ledger's Lease exists (was read, or written since).
func (l *Ledger[R]) Exists() bool { return l.exists }

// Label is a label of the ledger's Lease, as read.
func (l *Ledger[R]) Label(key string) string { return l.lease.Labels[key] }

// Annotation is another annotation of the ledger's Lease, as read.
func (l *Ledger[R]) Annotation(key string) string {
	return l.lease.Annotations[key]
}

// Write replaces the records, as by (a replica) at at; owners are set when it creates the
// Lease. Once written, l holds what was written. A conflict means another replica wrote
// first, AlreadyExists that one created it first, and NotFound that it was deleted since it
// was read: the caller decides again on a fresh read.
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
	maps.Copy(lease.Annotations, l.annotations)
	maps.Copy(lease.Annotations, annotations)
	if len(l.labels) > 0 {
		if lease.Labels == nil {
			lease.Labels = map[string]string{}
		}
		maps.Copy(lease.Labels, l.labels)
	}
	now := metav1.NewMicroTime(at)
	lease.Spec.HolderIdentity = &by
	lease.Spec.RenewTime = &now
	if l.exists {
		err = c.Update(ctx, lease) // carries resourceVersion: optimistic concurrency
	} else {
		lease.OwnerReferences = owners
		err = c.Create(ctx, lease)
	}
	if err == nil {
		// The ledger is now what was written: a writer that holds on to it writes next
		// with the new resourceVersion.
		l.lease, l.exists, l.Records = lease, true, records
	}
	return err
}

// LastWrite is when a ledger was last written: its renew time, or its creation.
func LastWrite(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	return l.CreationTimestamp.Time
}
