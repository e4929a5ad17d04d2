package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/informer"
)

// LedgerSweeper deletes, on the leader, the group ledgers that have admitted no eviction
// for longer than records are kept (budget.Retention over every DisruptionPolicy).
type LedgerSweeper struct {
	Ledgers *budget.Ledgers
	// Policies lists the DisruptionPolicies, from the cache.
	Policies client.Reader
	// Every is how often it sweeps.
	Every time.Duration
	Clock clock.PassiveClock
	// Metrics counts the ledgers deleted; nil counts nothing.
	Metrics *SweeperMetrics
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
// deleted.
func (s *LedgerSweeper) Sweep(ctx context.Context) (int, error) {
	var policies v1alpha1.DisruptionPolicyList
	if err := informer.List(ctx, s.Policies, &policies); err != nil {
		return 0, fmt.Errorf("listing DisruptionPolicies for their cooldowns: %w", err)
	}
	n, err := s.Ledgers.Sweep(ctx, budget.Retention(policies.Items), s.Clock.Now())
	if s.Metrics != nil {
		s.Metrics.deleted.Add(float64(n))
	}
	return n, err
}

// SweeperMetrics count the ledgers the sweeper deletes.
type SweeperMetrics struct {
	deleted prometheus.Counter
}

// NewSweeperMetrics registers the sweeper's metrics with reg.
func NewSweeperMetrics(reg prometheus.Registerer) (*SweeperMetrics, error) {
	m := &SweeperMetrics{deleted: prometheus.NewCounter(prometheus.CounterOpts{
		Name: "holdfast_eviction_ledgers_deleted_total",
		Help: "Eviction ledgers (Leases) deleted after admitting no eviction for longer than their records are kept.",
	})}
	if err := reg.Register(m.deleted); err != nil {
		return nil, err
	}
	return m, nil
}
