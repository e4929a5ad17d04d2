// Package budget is the protocol the two guards share through Leases in holdfast's
// namespace: what the eviction guard records of the evictions it admitted in a group (the
// pods of one workload), what the rollout guard records of the starts it admitted (per
// policy with a fleet limit, and in the group's ledger when a rollout shares the group's
// disruption budget), how long each record counts, how far apart the replicas' clocks may
// be, how long one request may spend on the ledgers, and which idle ledgers the leader
// deletes. Every replica reads the ledgers from the API server and writes them with
// optimistic concurrency (internal/ledger), so that two replicas never both admit what
// only one may, even before their informers have seen the first.
//
// The names, annotation keys and JSON of the records are an API: replicas of two releases
// share them during a rolling upgrade (golden files in testdata/ pin them).
package budget

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/informer"
)

// RuleSharedBudget names, in both guards' findings, a rollout held for its workload's
// evictions, or an eviction held for its workload's rollout, under a RolloutPolicy whose
// rules.sharedBudget names the DisruptionPolicy.
const RuleSharedBudget = "sharedBudget"

// MaxClockSkew is how far apart the clocks of holdfast's replicas, and of the nodes that
// stamp pods' readiness, may be while every budget and cooldown still holds. A record
// carries the clock of the replica that wrote it; another replica reads it as up to
// MaxClockSkew older than it looks: it lapses that much later and holds a cooldown that
// much longer. Clocks that differ by more can admit up to the difference early.
const MaxClockSkew = 5 * time.Second

// EvictionLapse is how long an admitted eviction counts against its group before the pod
// is seen terminating or gone. kube's own PDB check may still refuse an eviction holdfast
// admitted; such a record lapses instead of holding the group.
const EvictionLapse = 30 * time.Second

// StartLapse is how long an admitted start of a rollout counts without its revision
// journal showing it: long enough to cover a leader failover, during which journals do not
// follow; a start the API server refused after holdfast admitted it frees what it held then.
const StartLapse = 2 * time.Minute

// DefaultTimeout is Ledgers.Timeout's default, below the webhooks' default timeout of 3 s.
const DefaultTimeout = 2 * time.Second

// Ledgers is where a replica reads and writes the budget ledgers.
type Ledgers struct {
	// Live reads from and writes to the API server, never a cache: a ledger read from a
	// cache could miss what another replica admitted a moment ago.
	Live client.Client
	// Namespace is holdfast's own, where the ledgers live.
	Namespace string
	// Identity names this replica in the records it writes, whose clock they are read on.
	Identity string
	// Timeout bounds the ledger reads and writes of one request, so that holdfast answers
	// before the API server's webhook timeout (a late answer fails open under
	// failurePolicy Ignore); 0 means DefaultTimeout. Both guards take this one setting.
	Timeout time.Duration
}

// Bound is ctx bounded by the ledgers' timeout. Nil Ledgers bound it by DefaultTimeout.
func (l *Ledgers) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if l == nil || l.Timeout <= 0 {
		return context.WithTimeout(ctx, DefaultTimeout)
	}
	return context.WithTimeout(ctx, l.Timeout)
}

// Deadline is the one bound all of a request's reads and writes of the API server share:
// the ledgers' timeout from when the request arrived. A bound per read, each from its own
// start, adds up past the webhook's timeout, where the API server gives up on holdfast and
// the request fails open under failurePolicy Ignore. A value taken per request: a request
// that reads only the caches allocates nothing for it.
type Deadline struct{ at time.Time }

// Deadline is the bound of a request arriving now, on the wall clock (which a context's
// deadline is read on, whatever clock the decisions read).
func (l *Ledgers) Deadline() Deadline {
	timeout := DefaultTimeout
	if l != nil && l.Timeout > 0 {
		timeout = l.Timeout
	}
	return Deadline{at: time.Now().Add(timeout)}
}

// Carry is ctx carrying d for the reads a cache passes on to the API server
// (informer.WithLiveDeadline): they end by it, while reads the caches answer cost nothing
// for it. The zero Deadline carries DefaultTimeout from now, as Bound has it.
func (d *Deadline) Carry(ctx context.Context) context.Context {
	if d.at.IsZero() {
		at := time.Now().Add(DefaultTimeout) // as Bound has the zero Deadline; d stays zero
		return informer.WithLiveDeadline(ctx, &at)
	}
	return informer.WithLiveDeadline(ctx, &d.at)
}

// Bound is ctx bounded by d; the zero Deadline bounds it by DefaultTimeout from now.
func (d Deadline) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if d.at.IsZero() {
		return context.WithTimeout(ctx, DefaultTimeout)
	}
	return context.WithDeadline(ctx, d.at)
}

// Self is the replica's identity; "" for nil Ledgers.
func (l *Ledgers) Self() string {
	if l == nil {
		return ""
	}
	return l.Identity
}

// Margin is how much older than it looks a record written by replica by may be, read on
// this replica's clock: none for its own records, MaxClockSkew for any other's.
func Margin(self, by string) time.Duration {
	if by != "" && by == self {
		return 0
	}
	return MaxClockSkew
}
