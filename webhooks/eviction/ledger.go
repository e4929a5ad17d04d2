package eviction

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/cache"
	hfledger "github.com/holdfast-dev/holdfast/internal/ledger"
)

// The ledger of a group is a coordination Lease in holdfast's namespace whose annotation
// lists the evictions holdfast admitted. Every replica reads it from the API server and
// writes it with optimistic concurrency, so two replicas never both admit an eviction
// when only one fits, even before their informers have seen the first.
const (
	recordsAnnotation = hfledger.EvictionsAnnotation
	// minRetention is the least time records are kept (Retention): a ledger without a
	// record this recent, or as recent as the longest cooldown needs, is deleted
	// (LedgerSweeper).
	minRetention = time.Hour
	maxRecords   = 64
)

func leaseName(group types.UID) string { return hfledger.EvictionsKey("", group).Name }

// ledger is one read of a group's Lease.
type ledger = hfledger.Ledger[Record]

func readLedger(ctx context.Context, r client.Reader, namespace string, group types.UID) (*ledger, error) {
	l, err := hfledger.Read[Record](ctx, r, client.ObjectKey{Namespace: namespace, Name: leaseName(group)}, recordsAnnotation)
	if err != nil {
		return nil, fmt.Errorf("the eviction ledger of group %s: %w", group, err)
	}
	return l, nil
}

// appendRecord is records with rec appended, without those older than keep before rec or
// of the same pod (one record per pod: its latest admitted eviction), and at most the
// newest maxRecords.
func appendRecord(records []Record, rec Record, keep time.Duration) []Record {
	out := slices.DeleteFunc(slices.Clone(records), func(r Record) bool { return rec.At.Sub(r.At) > keep || r.UID == rec.UID })
	out = append(out, rec)
	if len(out) > maxRecords {
		out = out[len(out)-maxRecords:]
	}
	return out
}

// LedgerSweeper deletes the ledgers of groups that have admitted no eviction for longer
// than records are kept (Retention over every DisruptionPolicy): they hold nothing a
// decision counts, and their workloads may be gone. A group's next admitted eviction
// creates its ledger again. It runs on the leader.
type LedgerSweeper struct {
	// Reader lists the Leases from the API server: holdfast does not cache them.
	Reader client.Reader
	// Policies lists the DisruptionPolicies, from the cache.
	Policies client.Reader
	Writer   client.Writer
	// Namespace is holdfast's own, where the ledgers live.
	Namespace string
	// Every is how often it sweeps.
	Every time.Duration
	Clock clock.PassiveClock
	// Metrics counts the ledgers deleted; nil counts nothing.
	Metrics *Metrics
}

var _ manager.LeaderElectionRunnable = &LedgerSweeper{}

// NeedLeaderElection implements manager.LeaderElectionRunnable.
func (s *LedgerSweeper) NeedLeaderElection() bool { return true }

// Start implements manager.Runnable: it sweeps at once, then every s.Every.
func (s *LedgerSweeper) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("ledger-sweeper")
	t := time.NewTicker(s.Every)
	defer t.Stop()
	for {
		n, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			log.Error(err, "Sweeping idle eviction ledgers", "deleted", n)
		} else if n > 0 {
			log.V(1).Info("Deleted idle eviction ledgers", "deleted", n)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Sweep deletes the ledgers idle for longer than records are kept, and returns how many it
// deleted. A ledger written since it was listed is kept: the delete is conditional on the
// version listed.
func (s *LedgerSweeper) Sweep(ctx context.Context) (int, error) {
	var policies v1alpha1.DisruptionPolicyList
	if err := cache.List(ctx, s.Policies, &policies); err != nil {
		return 0, fmt.Errorf("listing DisruptionPolicies for their cooldowns: %w", err)
	}
	keep := Retention(policies.Items)
	var leases coordinationv1.LeaseList
	if err := s.Reader.List(ctx, &leases, client.InNamespace(s.Namespace), client.MatchingLabels{hfledger.ManagedByLabel: "holdfast"}); err != nil {
		return 0, fmt.Errorf("listing eviction ledgers: %w", err)
	}
	deleted := 0
	var errs []error
	for i := range leases.Items {
		l := &leases.Items[i]
		if !strings.HasPrefix(l.Name, leaseName("")) || s.Clock.Since(hfledger.LastWrite(l)) <= keep {
			continue
		}
		err := s.Writer.Delete(ctx, l, client.Preconditions{UID: &l.UID, ResourceVersion: &l.ResourceVersion})
		switch {
		case err == nil:
			deleted++
			s.Metrics.ledgerDeleted()
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			// Deleted by another sweep, or written since the list: kept.
		default:
			errs = append(errs, fmt.Errorf("deleting eviction ledger %s: %w", l.Name, err))
		}
	}
	return deleted, errors.Join(errs...)
}
