package eviction

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
)

// Replacements judge the eviction or DELETE of a pod that kube replaces from a template no
// pod runs yet as the start of that template's rollout (the rollout guard's
// Handler.Replacement). They record nothing, and read the API server within the request's
// deadline.
type Replacements interface {
	Replacement(ctx context.Context, deadline budget.Deadline, pod *corev1.Pod, nsLabels map[string]string, user authenticationv1.UserInfo) (decision.Violations, bool, error)
}

// replacement is the rollout guard's judgement of the pod's replacement, as an eviction
// decision: held (ok) when the rollout guard refuses the start, answered as a deferral so
// that drains retry, counted, evented and held (maxHold) as one. Its other findings (Warn,
// Audit) are returned to join the eviction guard's answer.
func (h *Handler) replacement(ctx context.Context, deadline budget.Deadline, pod *corev1.Pod, nsLabels map[string]string, user authenticationv1.UserInfo) (held Decision, ok bool, found decision.Violations, err error) {
	if h.Replacements == nil {
		return held, false, nil, nil
	}
	vs, starts, err := h.Replacements.Replacement(ctx, deadline, pod, nsLabels, user)
	if err != nil || !starts {
		return held, false, nil, err
	}
	why := fmt.Sprintf("pod %s/%s is replaced from its workload's current pod template, which no pod runs yet: "+
		"the replacement would start that template's rollout; ", pod.Namespace, pod.Name)
	for i := range vs {
		vs[i].Message = why + vs[i].Message
	}
	if vs.Action() != decision.Deny {
		return held, false, vs, nil
	}
	held = Decision{Violations: vs, Guarded: true}
	for _, v := range vs {
		held.Applied.Add(v.Policy) // counted under the RolloutPolicies that hold it
	}
	return held, true, nil, nil
}
