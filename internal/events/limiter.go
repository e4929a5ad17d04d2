// Package events records Events for holdfast's decisions without flooding: callers
// retry refused requests every few seconds, so one Event per object, reason and
// interval is enough.
package events

import (
	"sync"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Interval is the least time between two Events for one object and key.
const Interval = time.Minute

// capacity bounds the object+key pairs a Limiter remembers, and so its memory (some
// 2 MB): it is where the map it replaced began pruning, and filling it takes more than
// 160 Events a second for a whole Interval. Past it, the Limiter drops Events rather
// than repeat one.
const capacity = 10000

// Limiter records at most one Event per object and key per Interval.
type Limiter struct {
	Recorder events.EventRecorder

	mu sync.Mutex
	// last holds when an Event was last recorded per object and key, in the order they
	// were recorded: an entry moves to the front only when its Event is recorded.
	last *simplelru.LRU[string, time.Time]
}

// Warn records a Warning Event about obj unless one with the same key was recorded for
// it within the interval. A nil Limiter records nothing.
func (l *Limiter) Warn(obj runtime.Object, key string, now time.Time, reason, note string) {
	l.record(obj, nil, key, now, corev1.EventTypeWarning, reason, note)
}

// WarnRelated records, as Warn does, a Warning Event about obj that relates to another
// object: a node's Event about one of its pods. kube's recorder folds Events of one
// object, reason and related object into one series, keeping the first one's note: without
// the related pod, a node's Event for its second held pod would read as its first's.
func (l *Limiter) WarnRelated(obj, related runtime.Object, key string, now time.Time, reason, note string) {
	l.record(obj, related, key, now, corev1.EventTypeWarning, reason, note)
}

// Normal records a Normal Event about obj, as Warn does a Warning: for what a policy in
// Audit mode found, which holds nothing up.
func (l *Limiter) Normal(obj runtime.Object, key string, now time.Time, reason, note string) {
	l.record(obj, nil, key, now, corev1.EventTypeNormal, reason, note)
}

func (l *Limiter) record(obj, related runtime.Object, key string, now time.Time, eventType, reason, note string) {
	if l == nil || obj == nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	id := string(m.GetUID()) + "/" + m.GetNamespace() + "/" + m.GetName() + "/" + key
	if !l.allow(id, now) {
		return
	}
	l.Recorder.Eventf(obj, related, eventType, reason, "Admission", "%s", note)
}

// allow reports whether an Event for id may be recorded at now, and if so notes it.
func (l *Limiter) allow(id string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, _ = simplelru.NewLRU[string, time.Time](capacity, nil) // fails only for a size below 1
	}
	// Peek, not Get: a refused retry must not move its entry to the front, or the
	// least recent entry would no longer be the one recorded longest ago.
	if t, ok := l.last.Peek(id); ok {
		if now.Sub(t) < Interval {
			return false
		}
	} else if l.last.Len() >= capacity {
		// Forgetting a key recorded within the Interval could repeat its Event, so only
		// an expired oldest entry makes room. Concurrent callers' clocks may arrive
		// slightly out of order; then the oldest entry may not be the earliest, and an
		// Event that had room is dropped.
		if _, t, _ := l.last.GetOldest(); now.Sub(t) < Interval {
			return false
		}
		l.last.RemoveOldest()
	}
	l.last.Add(id, now)
	return true
}
