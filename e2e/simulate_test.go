//go:build e2e

package e2e

import (
	"context"
	"math"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/simulate/sim"
)

// simulated runs the shipped scenario name (scenarios/<name>.yaml) through `holdfast
// simulate`, so that a test can hold the simulator to what the real control plane did,
// and returns the scenario for its objects.
func simulated(t *testing.T, name string) (*sim.Scenario, *sim.Result) {
	t.Helper()
	sc, err := sim.Load([]string{filepath.Join("..", "scenarios", name+".yaml")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sim.Run(sc)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Errors) > 0 || res.TimedOut || len(res.Unmet()) > 0 {
		t.Fatalf("simulating %s: errors %v, timed out %t, unmet expectations %v", name, res.Errors, res.TimedOut, res.Unmet())
	}
	return sc, res
}

// scenarioObject is a copy of the scenario's first object of T's type.
func scenarioObject[T client.Object](t *testing.T, sc *sim.Scenario) T {
	t.Helper()
	for _, o := range sc.Objects {
		if obj, ok := o.Object.(T); ok {
			return obj.DeepCopyObject().(T)
		}
	}
	var zero T
	t.Fatalf("scenario %s has no %T", sc.Name, zero)
	return zero
}

// kwokTimed gives the pods of tpl the scenario's timing on the kwok nodes: Ready
// spec.podStartup after they are scheduled (half in kwok's create stage, half in its ready
// stage, with no jitter), so that what the control plane does can be held to the
// simulation. Their termination follows their terminationGracePeriodSeconds.
func kwokTimed(sc *sim.Scenario, tpl *corev1.PodTemplateSpec) {
	half := (sc.Spec.PodStartup.Duration / 2).String()
	if tpl.Annotations == nil {
		tpl.Annotations = map[string]string{}
	}
	for _, stage := range []string{"pod-create", "pod-ready"} {
		tpl.Annotations[stage+".stage.kwok.x-k8s.io/delay"] = half
		tpl.Annotations[stage+".stage.kwok.x-k8s.io/jitter-delay"] = half
	}
}

// goneClock measures how long after start the pods are all gone (deleted, or replaced by
// a pod of another UID): how long a drain took for them, whatever else the shared nodes
// held. Stop returns the seconds.
type goneClock struct {
	done chan float64
}

func startGoneClock(ctx context.Context, c client.Client, pods []corev1.Pod) *goneClock {
	g := &goneClock{done: make(chan float64, 1)}
	start := time.Now()
	go func() {
		for ctx.Err() == nil {
			left := 0
			for _, p := range pods {
				cur := &corev1.Pod{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(&p), cur); err == nil && cur.UID == p.UID {
					left++
				}
			}
			if left == 0 {
				g.done <- time.Since(start).Seconds()
				return
			}
			time.Sleep(250 * time.Millisecond)
		}
		g.done <- -1
	}()
	return g
}

// Seconds waits for the pods to be gone and returns when they were.
func (g *goneClock) Seconds() float64 { return <-g.done }

// simulatedFigures is the figures of the scenario's only workload and drain.
func simulatedFigures(t *testing.T, res *sim.Result) (sim.WorkloadFigures, *sim.DrainFigures) {
	t.Helper()
	if len(res.Workloads) != 1 || len(res.Drains) > 1 {
		t.Fatalf("scenario %s: want one workload and at most one drain, have %d and %d", res.Scenario, len(res.Workloads), len(res.Drains))
	}
	var d *sim.DrainFigures
	if len(res.Drains) == 1 {
		d = res.Drains[0]
	}
	return res.Workloads[0], d
}

// withinFraction is a measured figure within frac of the real one.
func withinFraction(simulated, real, frac float64) bool {
	return math.Abs(simulated-real) <= frac*real
}
