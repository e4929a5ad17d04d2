package rollout

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// recordEvents records an Event on the workload for each violation that denies or warns,
// at most one per workload, rule and minute.
func recordEvents(l *events.Limiter, obj runtime.Object, vs []Violation, now time.Time) {
	for _, v := range vs {
		switch v.Action {
		case policy.Deny:
			l.Warn(obj, v.Rule, now, "RolloutDenied", v.String())
		case policy.Warn:
			l.Warn(obj, v.Rule, now, "RolloutWarning", v.String())
		}
	}
}
