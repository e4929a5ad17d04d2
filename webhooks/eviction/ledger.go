package eviction

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The ledger of a group is a coordination Lease in holdfast's namespace whose annotation
// lists the evictions holdfast admitted. Every replica reads it from the API server and
// writes it with optimistic concurrency, so two replicas never both admit an eviction
// when only one fits, even before their informers have seen the first.
const (
	recordsAnnotation = "holdfast.dev/evictions"
	managedByLabel    = "app.kubernetes.io/managed-by"
	// keepRecords is how long records are kept: longer than any sensible cooldown.
	keepRecords = time.Hour
	maxRecords  = 64
)

func leaseName(group types.UID) string { return "holdfast-evictions-" + string(group) }

// ledger is one read of a group's Lease.
type ledger struct {
	lease   *coordinationv1.Lease
	records []Record
	exists  bool
}

func readLedger(ctx context.Context, r client.Reader, namespace string, group types.UID) (*ledger, error) {
	l := &ledger{lease: &coordinationv1.Lease{}}
	err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: leaseName(group)}, l.lease)
	if client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("reading the eviction ledger of group %s: %w", group, err)
	}
	if err != nil {
		l.lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: leaseName(group),
			Labels: map[string]string{managedByLabel: "holdfast"}}}
		return l, nil
	}
	l.exists = true
	if raw := l.lease.Annotations[recordsAnnotation]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &l.records); err != nil {
			// A corrupt ledger must not admit more than fits: treat it as a conflict to surface.
			return nil, fmt.Errorf("decoding the eviction ledger %s/%s: %w", namespace, l.lease.Name, err)
		}
	}
	return l, nil
}

// admit appends a record and writes the ledger; a conflict means another replica wrote
// first, and the caller decides again on a fresh read.
func (l *ledger) admit(ctx context.Context, c client.Client, rec Record, holder string) error {
	records := append(slices.Clone(l.records), rec)
	records = slices.DeleteFunc(records, func(r Record) bool { return rec.At.Sub(r.At) > keepRecords })
	if len(records) > maxRecords {
		records = records[len(records)-maxRecords:]
	}
	raw, err := json.Marshal(records)
	if err != nil {
		return err
	}
	lease := l.lease.DeepCopy()
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[recordsAnnotation] = string(raw)
	now := metav1.NewMicroTime(rec.At)
	lease.Spec.HolderIdentity = &holder
	lease.Spec.RenewTime = &now
	if l.exists {
		return c.Update(ctx, lease) // carries resourceVersion: optimistic concurrency
	}
	return c.Create(ctx, lease)
}
