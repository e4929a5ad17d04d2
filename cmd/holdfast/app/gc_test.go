package app

import (
	"context"
	"errors"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestTheCollectorWorksHarderUntilSynced(t *testing.T) {
	t.Setenv("GOGC", "")
	before := gcPercent()
	defer debug.SetGCPercent(before)
	var synced atomic.Bool
	phase := &syncPhase{name: "caches", log: logr.Discard(), ready: func() error {
		if !synced.Load() {
			return errors.New("not yet")
		}
		return nil
	}}
	phase.begin()
	if got := gcPercent(); got != syncGCPercent {
		t.Fatalf("while syncing the target is %d, want %d", got, syncGCPercent)
	}
	done := make(chan struct{})
	go func() { _ = phase.Start(context.Background()); close(done) }()
	select {
	case <-done:
		t.Fatal("the phase ended before the replica synced")
	case <-time.After(300 * time.Millisecond):
	}
	synced.Store(true)
	<-done
	if got := gcPercent(); got != before {
		t.Errorf("after the sync the target is %d, want %d back", got, before)
	}
}

func TestOverlappingPhasesRestoreTheTargetOnce(t *testing.T) {
	t.Setenv("GOGC", "")
	before := gcPercent()
	defer debug.SetGCPercent(before)
	endCaches := collectHard()
	endControllers := collectHard()
	endCaches()
	endCaches() // an end called twice counts once
	if got := gcPercent(); got != syncGCPercent {
		t.Fatalf("one phase still runs, yet the target is %d, want %d", got, syncGCPercent)
	}
	endControllers()
	if got := gcPercent(); got != before {
		t.Errorf("both phases ended, yet the target is %d, want %d back", got, before)
	}
}

func TestTheOperatorsGOGCIsLeftAlone(t *testing.T) {
	t.Setenv("GOGC", "200")
	before := gcPercent()
	defer debug.SetGCPercent(before)
	phase := &syncPhase{name: "caches", log: logr.Discard(), ready: func() error { return nil }}
	phase.begin()
	if got := gcPercent(); got != before {
		t.Errorf("the target is %d, want the operator's %d untouched", got, before)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := phase.Start(ctx); err != nil {
		t.Error(err)
	}
	if got := gcPercent(); got != before {
		t.Errorf("the target is %d after the phase, want the operator's %d", got, before)
	}
}

func TestQueuesDrained(t *testing.T) {
	reg := prometheus.NewRegistry()
	depth := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "workqueue_depth"}, []string{"name"})
	reg.MustRegister(depth)
	depth.WithLabelValues("journal-deployment").Set(0)
	depth.WithLabelValues("pdb-deployment").Set(3)
	if queuesDrained(reg) == nil {
		t.Error("3 requests wait, yet the queues read as drained")
	}
	depth.WithLabelValues("pdb-deployment").Set(0)
	if err := queuesDrained(reg); err != nil {
		t.Errorf("every queue is empty: %v", err)
	}
}
