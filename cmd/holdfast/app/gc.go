package app

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// syncGCPercent is the collector's target (GOGC) while a replica reads the cluster at
// start. Its informers decode every workload in the cluster in a few seconds, most of it
// garbage at once (managed fields, templates the cache packs): with Go's default of 100 the
// heap grows to twice what it holds before a collection, and a replica's peak resident
// memory, when it would be OOM-killed, is then about twice what it holds settled.
const syncGCPercent = 25

// syncGCLimit bounds how long a replica collects at syncGCPercent: a scope that never
// syncs must not keep the collector at four times its usual pace.
const syncGCLimit = 5 * time.Minute

// collectHardWhileSyncing sets the collector's target to syncGCPercent until ready
// answers nil (the informers and the pod scope have synced), then sets it back and returns
// the memory the sync left free to the system. It returns the runnable that waits; a
// GOGC the operator set is left alone.
func collectHardWhileSyncing(ready func() error, log logr.Logger) func(context.Context) error {
	if os.Getenv("GOGC") != "" {
		return func(context.Context) error { return nil }
	}
	prev := debug.SetGCPercent(syncGCPercent)
	return func(ctx context.Context) error {
		began := time.Now()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		// Ready for a second on end: the controllers start on the synced informers and
		// only then fill their queues.
		var since time.Time
		for time.Since(began) < syncGCLimit {
			if ready() != nil {
				since = time.Time{}
			} else if since.IsZero() {
				since = time.Now()
			} else if time.Since(since) >= time.Second {
				break
			}
			select {
			case <-ctx.Done():
				debug.SetGCPercent(prev)
				return nil
			case <-tick.C:
			}
		}
		debug.SetGCPercent(prev)
		debug.FreeOSMemory()
		log.V(1).Info("Synced; the collector is back at its usual pace", "after", time.Since(began).Round(time.Millisecond))
		return nil
	}
}

// webhookRunnable runs start on every replica, leader or not, as the webhooks' work does.
type webhookRunnable func(context.Context) error

func (r webhookRunnable) Start(ctx context.Context) error { return r(ctx) }

// NeedLeaderElection is false: every replica syncs its own cache.
func (webhookRunnable) NeedLeaderElection() bool { return false }

// queuesDrained answers nil once no controller has a request waiting (workqueue_depth):
// the reconciles every workload gets when a replica starts are part of its sync.
func queuesDrained(g prometheus.Gatherer) error {
	families, err := g.Gather()
	if err != nil {
		return err
	}
	for _, f := range families {
		if f.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range f.GetMetric() {
			if v := m.GetGauge().GetValue(); v > 0 {
				return fmt.Errorf("%v requests wait in a controller's queue", v)
			}
		}
	}
	return nil
}
