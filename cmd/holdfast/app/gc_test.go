package app

import (
	"context"
	"errors"
	"runtime/debug"
	"sync/atomic"
	"testing"

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
	wait := collectHardWhileSyncing(func() error {
		if !synced.Load() {
			return errors.New("not yet")
		}
		return nil
	}, logr.Discard())
	if got := gcPercent(); got != syncGCPercent {
		t.Fatalf("while syncing the target is %d, want %d", got, syncGCPercent)
	}
	done := make(chan struct{})
	go func() { _ = wait(context.Background()); close(done) }()
	select {
	case <-done:
		t.Fatal("it stopped before the replica synced")
	default:
	}
	synced.Store(true)
	<-done
	if got := gcPercent(); got != before {
		t.Errorf("after the sync the target is %d, want %d back", got, before)
	}
}

func TestTheOperatorsGOGCIsLeftAlone(t *testing.T) {
	t.Setenv("GOGC", "200")
	before := gcPercent()
	defer debug.SetGCPercent(before)
	wait := collectHardWhileSyncing(func() error { return errors.New("never") }, logr.Discard())
	if got := gcPercent(); got != before {
		t.Errorf("the target is %d, want the operator's %d untouched", got, before)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := wait(ctx); err != nil {
		t.Error(err)
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
