package rollout

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
)

// recordEvents records an Event on the workload for each violation: a Warning for one that
// denies or warns, a Normal one for an Audit finding; at most one per workload, rule and
// minute.
func recordEvents(l *events.Limiter, obj runtime.Object, vs decision.Violations, now time.Time) {
	for _, v := range vs {
		switch v.Action {
		case decision.Deny:
			l.Warn(obj, v.Rule, now, "RolloutDenied", v.String())
		case decision.Warn:
			l.Warn(obj, v.Rule, now, "RolloutWarning", v.String())
		case decision.Audit:
			l.Normal(obj, v.Rule, now, "RolloutAudit", v.String())
		}
	}
}
