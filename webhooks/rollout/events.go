package rollout

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/holdfast-dev/holdfast/internal/policy"
)

// eventInterval is the least time between two Events for one workload and rule:
// operators retry a refused change every few seconds.
const eventInterval = time.Minute

// EventLimiter records Events on workloads for denials and warnings, at most one per
// workload, rule and minute.
type EventLimiter struct {
	Recorder events.EventRecorder

	mu   sync.Mutex
	last map[string]time.Time
}

// Record records an Event for each violation that is not audit-only and not recorded
// for the same workload and rule within the last minute.
func (l *EventLimiter) Record(obj runtime.Object, vs []Violation, now time.Time) {
	if l == nil || obj == nil {
		return
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	if len(l.last) > 10000 {
		for k, t := range l.last {
			if now.Sub(t) >= eventInterval {
				delete(l.last, k)
			}
		}
	}
	for _, v := range vs {
		if v.Action < policy.Warn {
			continue
		}
		key := fmt.Sprintf("%s/%s/%s/%s", m.GetUID(), m.GetNamespace(), m.GetName(), v.Rule)
		if t, ok := l.last[key]; ok && now.Sub(t) < eventInterval {
			continue
		}
		l.last[key] = now
		reason := "RolloutDenied"
		if v.Action == policy.Warn {
			reason = "RolloutWarning"
		}
		l.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Admission", "%s", v.String())
	}
}
