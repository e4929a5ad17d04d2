package app

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// syncGCPercent is the collector's target (GOGC) while a replica reads the cluster: its
// informers decode every workload in a few seconds, and its controllers then reconcile
// each once, most of it garbage at once (managed fields, templates the cache packs, the
// copies a reconcile reads). At Go's default of 100 the heap grows to twice what it holds
// before a collection, and a replica's peak resident memory, when it would be OOM-killed,
// was then twice what it holds settled and more.
const syncGCPercent = 25

// syncGCLimit bounds how long a replica collects at syncGCPercent: a cache that never
// syncs, or queues that a busy fleet never empties, must not keep the collector at four
// times its usual pace for good.
const syncGCLimit = 5 * time.Minute

// syncGC counts the phases collecting at syncGCPercent: the first sets it, the last to
// end sets back what was there before, so that two overlapping phases (the webhooks'
// caches, then the controllers when this replica takes the lease) neither restore early
// nor take syncGCPercent for the operator's target.
var syncGC struct {
	sync.Mutex
	phases int
	prev   int
}

// collectHard starts a phase at syncGCPercent and returns its end, which may be called
// more than once; the phase ends by itself after syncGCLimit, whether or not anything
// calls it (a manager that never starts). A GOGC the operator set is left alone.
func collectHard() (end func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	syncGC.Lock()
	if syncGC.phases == 0 {
		syncGC.prev = debug.SetGCPercent(syncGCPercent)
	}
	syncGC.phases++
	syncGC.Unlock()
	var once sync.Once
	end = func() {
		once.Do(func() {
			syncGC.Lock()
			defer syncGC.Unlock()
			if syncGC.phases--; syncGC.phases == 0 {
				debug.SetGCPercent(syncGC.prev)
			}
		})
	}
	time.AfterFunc(syncGCLimit, end)
	return end
}

// syncPhase is a phase of a replica's sync that collects at syncGCPercent, from begin
// (or its Start, when nothing began it) until ready has answered nil for a second on end:
// the work it waits for may only start once it is first ready (the controllers fill their
// queues from informers that have synced).
type syncPhase struct {
	name  string
	ready func() error
	log   logr.Logger
	end   func()
}

// begin starts the phase now: before the manager starts, for the informers' first lists.
func (p *syncPhase) begin() { p.end = collectHard() }

// Start waits for the phase to end, and ends it.
func (p *syncPhase) Start(ctx context.Context) error {
	if p.end == nil {
		p.begin()
	}
	defer p.end()
	began := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var since time.Time
	for {
		switch {
		case p.ready() != nil:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= time.Second:
			p.log.V(1).Info("The collector is back at its usual pace", "phase", p.name, "after", time.Since(began).Round(time.Millisecond))
			return nil
		}
		if time.Since(began) >= syncGCLimit {
			p.log.Info("The collector is back at its usual pace before the phase ended", "phase", p.name, "limit", syncGCLimit)
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// queuesDrained answers nil once no controller has a request waiting (workqueue_depth):
// the reconciles every workload gets when the controllers start are part of the sync.
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

// cachePhase is the phase of the webhooks' caches: every replica syncs its own.
type cachePhase struct{ *syncPhase }

// NeedLeaderElection is false: every replica, leader or not, syncs its caches.
func (cachePhase) NeedLeaderElection() bool { return false }
