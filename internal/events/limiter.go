// Package events records Events for holdfast's decisions without flooding: callers
// retry refused requests every few seconds, so one Event per object, reason and
// interval is enough.
package events

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// Interval is the least time between two Events for one object and key.
const Interval = time.Minute

// Limiter records at most one Event per object and key per Interval.
type Limiter struct {
	Recorder events.EventRecorder

	mu   sync.Mutex
	last map[string]time.Time
}

// Warn records a Warning Event about obj unless one with the same key was recorded for
// it within the interval. A nil Limiter records nothing.
func (l *Limiter) Warn(obj runtime.Object, key string, now time.Time, reason, note string) {
	l.record(obj, key, now, corev1.EventTypeWarning, reason, note)
}

// Normal records a Normal Event about obj, as Warn does a Warning: for what a policy in
// Audit mode found, which holds nothing up.
func (l *Limiter) Normal(obj runtime.Object, key string, now time.Time, reason, note string) {
	l.record(obj, key, now, corev1.EventTypeNormal, reason, note)
}

func (l *Limiter) record(obj runtime.Object, key string, now time.Time, eventType, reason, note string) {
	if l == nil || obj == nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	id := string(m.GetUID()) + "/" + m.GetNamespace() + "/" + m.GetName() + "/" + key
	l.mu.Lock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if len(l.last) > 10000 {
		for k, t := range l.last {
			if now.Sub(t) >= Interval {
				delete(l.last, k)
			}
		}
	}
	if t, ok := l.last[id]; ok && now.Sub(t) < Interval {
		l.mu.Unlock()
		return
	}
	l.last[id] = now
	l.mu.Unlock()
	l.Recorder.Eventf(obj, nil, eventType, reason, "Admission", "%s", note)
}
