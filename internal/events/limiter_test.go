package events

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8sevents "k8s.io/client-go/tools/events"
)

func TestLimiterOnePerObjectKeyAndMinute(t *testing.T) {
	rec := k8sevents.NewFakeRecorder(10)
	l := &Limiter{Recorder: rec}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kas", UID: "u1"}}
	t0 := time.Now()

	l.Warn(d, "settle", t0, "RolloutDenied", "m")
	l.Warn(d, "settle", t0.Add(5*time.Second), "RolloutDenied", "m") // an operator retrying
	l.Warn(d, "settle", t0.Add(61*time.Second), "RolloutDenied", "m")
	l.Warn(d, "minInterval", t0.Add(5*time.Second), "RolloutDenied", "m")
	other := d.DeepCopy()
	other.UID, other.Name = "u2", "other"
	l.Warn(other, "settle", t0.Add(5*time.Second), "RolloutDenied", "m")

	if got := len(rec.Events); got != 4 {
		t.Fatalf("recorded %d events, want 4 (first, after a minute, another key, another object)", got)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning RolloutDenied") {
		t.Errorf("event %q, want a Warning with reason RolloutDenied", e)
	}

	var none *Limiter
	none.Warn(d, "settle", t0, "RolloutDenied", "m") // a nil Limiter records nothing, and does not panic
}

// countingRecorder is an events.EventRecorder that counts Events, and fails t when one
// note (the tests send the key as note) is recorded twice within Interval of *now.
type countingRecorder struct {
	t    *testing.T
	now  *time.Time
	last map[string]time.Time
	n    int
}

func (r *countingRecorder) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	key := fmt.Sprintf(note, args...)
	if t, ok := r.last[key]; ok && r.now.Sub(t) < Interval {
		r.t.Errorf("key %s recorded at %v and again %v later", key, t, r.now.Sub(t))
	}
	r.last[key] = *r.now
	r.n++
}

func TestLimiterAtCapacityDropsRatherThanRepeats(t *testing.T) {
	var now time.Time
	rec := &countingRecorder{t: t, now: &now, last: map[string]time.Time{}}
	l := &Limiter{Recorder: rec}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kas", UID: "u1"}}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const keys, step = 2 * capacity, 2 * time.Millisecond // 20,000 keys in 40 s
	rnd := rand.New(rand.NewPCG(1, 2))

	for i := range keys {
		now = t0.Add(time.Duration(i) * step)
		k := fmt.Sprint("k", i)
		l.Warn(d, k, now, "RolloutDenied", k)
		k = fmt.Sprint("k", rnd.IntN(i+1)) // an earlier key retrying within the minute
		l.Warn(d, k, now, "RolloutDenied", k)
	}
	if rec.n != capacity {
		t.Fatalf("recorded %d events for %d keys in %v, want %d: the first keys, up to capacity", rec.n, keys, keys*step, capacity)
	}
	checkRecorded(t, rec, "k", keys)

	// An Interval after the first, each new key finds the oldest entry expired, until
	// the table holds only the new keys.
	for i := range keys {
		now = t0.Add(Interval + time.Duration(i)*step)
		k := fmt.Sprint("late", i)
		l.Warn(d, k, now, "RolloutDenied", k)
	}
	if rec.n != 2*capacity {
		t.Fatalf("recorded %d events, want %d: %d new keys once the first expired, then none", rec.n, 2*capacity, capacity)
	}
	checkRecorded(t, rec, "late", keys)
}

// checkRecorded fails t unless, of the keys prefix0 to prefix<n-1>, those below capacity
// were recorded and the others were not.
func checkRecorded(t *testing.T, rec *countingRecorder, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, ok := rec.last[fmt.Sprint(prefix, i)]; ok != (i < capacity) {
			t.Fatalf("key %s%d recorded: %v, want %v (the table holds %d keys)", prefix, i, ok, i < capacity, capacity)
		}
	}
}

// tally is an events.EventRecorder that only counts.
type tally int

func (c *tally) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) { *c++ }

// BenchmarkLimiter is an operator storm, each object retried once every objects
// milliseconds: 1,000 objects, so most calls are refused and one in 60 is recorded;
// then twice capacity, so the table stays full and most new keys are dropped.
func BenchmarkLimiter(b *testing.B) {
	for _, objects := range []int{1000, 2 * capacity} {
		b.Run(fmt.Sprint("objects=", objects), func(b *testing.B) {
			ds := make([]*appsv1.Deployment, objects)
			for i := range ds {
				ds[i] = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("d", i), UID: types.UID(fmt.Sprint("u", i))}}
			}
			var rec tally
			l := &Limiter{Recorder: &rec}
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				now = now.Add(time.Millisecond)
				l.Warn(ds[i%objects], "settle", now, "RolloutDenied", "m")
				i++
			}
		})
	}
}
