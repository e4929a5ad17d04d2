package budget

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/ledger"
)

// Sweep deletes the group ledgers that have admitted no eviction for longer than keep
// (Retention over every DisruptionPolicy): they hold nothing a decision counts, and their
// workloads may be gone; a group's next admitted eviction creates its ledger again. It
// returns how many it deleted. A ledger written since it was listed is kept: the delete is
// conditional on the version listed. Fleet ledgers go with their policies.
func (l *Ledgers) Sweep(ctx context.Context, keep time.Duration, now time.Time) (int, error) {
	var leases coordinationv1.LeaseList
	if err := l.Live.List(ctx, &leases, client.InNamespace(l.Namespace), client.MatchingLabels{ledger.ManagedByLabel: "holdfast"}); err != nil {
		return 0, fmt.Errorf("listing eviction ledgers: %w", err)
	}
	deleted := 0
	var errs []error
	for i := range leases.Items {
		lease := &leases.Items[i]
		if !strings.HasPrefix(lease.Name, GroupPrefix) || now.Sub(ledger.LastWrite(lease)) <= keep {
			continue
		}
		err := l.Live.Delete(ctx, lease, client.Preconditions{UID: &lease.UID, ResourceVersion: &lease.ResourceVersion})
		switch {
		case err == nil:
			deleted++
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Deleted by another sweep, or written since the list: kept.
		default:
			errs = append(errs, fmt.Errorf("deleting eviction ledger %s: %w", lease.Name, err))
		}
	}
	return deleted, errors.Join(errs...)
}
