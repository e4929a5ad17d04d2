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

// wantTarget fails the test when the collector's target is not want; when says when.
func wantTarget(t *testing.T, want int, when string) {
	t.Helper()
	if got := gcPercent(); got != want {
		t.Fatalf("%s the target is %d, want %d", when, got, want)
	}
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
	wantTarget(t, syncGCPercent, "while syncing")
	done := make(chan struct{})
	go func() { _ = phase.Start(context.Background()); close(done) }()
	select {
	case <-done:
		t.Fatal("the phase ended before the replica synced")
	case <-time.After(300 * time.Millisecond):
	}
	synced.Store(true)
	<-done
	wantTarget(t, before, "after the sync")
}

func TestOverlappingPhasesRestoreTheTargetOnce(t *testing.T) {
	t.Setenv("GOGC", "")
	before := gcPercent()
	defer debug.SetGCPercent(before)
	endCaches := collectHard()
	endControllers := collectHard()
	endCaches()
	endCaches() // an end called twice counts once
	wantTarget(t, syncGCPercent, "one phase still runs")
	endControllers()
	wantTarget(t, before, "both phases ended")
}

func TestTheOperatorsGOGCIsLeftAlone(t *testing.T) {
	t.Setenv("GOGC", "200")
	before := gcPercent()
	defer debug.SetGCPercent(before)
	phase := &syncPhase{name: "caches", log: logr.Discard(), ready: func() error { return nil }}
	phase.begin()
	wantTarget(t, before, "with the operator's GOGC")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := phase.Start(ctx); err != nil {
		t.Error(err)
	}
	wantTarget(t, before, "after the phase, with the operator's GOGC")
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
