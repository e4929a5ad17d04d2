package eviction

import (
	"context"
	"fmt"
	"math"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/decision"
)

// Replacements judge the eviction or DELETE of a pod that kube replaces from a template no
// pod runs yet as the start of that template's rollout (the rollout guard's Handler.Replacement).
type Replacements interface {
	Replacement(ctx context.Context, pod *corev1.Pod, user authenticationv1.UserInfo, record bool) (decision.Violations, bool, error)
}

// replacement asks the rollout guard about the pod's replacement before the eviction is
// decided, recording nothing. refused is its answer when the rollout guard holds the start;
// else then is applied to the eviction guard's answer: an admitted eviction (not a dry run)
// is asked about again, recording the start in the fleet ledgers, and the rollout guard's
// warnings join the answer.
func (h *Handler) replacement(ctx context.Context, pod *corev1.Pod, user authenticationv1.UserInfo, dryRun bool) (then func(admission.Response) admission.Response, refused *admission.Response) {
	pass := func(resp admission.Response) admission.Response { return resp }
	if h.Replacements == nil {
		return pass, nil
	}
	d, starts, err := h.Replacements.Replacement(ctx, pod, user, false)
	switch {
	case err != nil:
		resp := h.fail(fmt.Errorf("judging the replacement of pod %s/%s: %w", pod.Namespace, pod.Name, err))
		return pass, &resp
	case !starts:
		return pass, nil
	case d.Action() == decision.Deny:
		resp := refuseReplacement(d, pod)
		return pass, &resp
	}
	return func(resp admission.Response) admission.Response {
		if !resp.Allowed {
			return resp
		}
		if !dryRun {
			if d, _, err = h.Replacements.Replacement(ctx, pod, user, true); err != nil {
				return h.fail(fmt.Errorf("recording the replacement of pod %s/%s: %w", pod.Namespace, pod.Name, err))
			}
			if d.Action() == decision.Deny {
				return refuseReplacement(d, pod) // another start took the fleet's slot meanwhile
			}
		}
		resp.Warnings = append(resp.Warnings, decision.Allowed(d).Warnings...)
		return resp
	}, nil
}

// refuseReplacement answers 429, as a deferral is, so that drains retry: the start may be
// admitted later (minInterval, a window's end, a fleet slot), or after its operator rolls the
// template out or back.
func refuseReplacement(d decision.Violations, pod *corev1.Pod) admission.Response {
	msg := fmt.Sprintf("holdfast: pod %s/%s is replaced from its workload's current pod template, which no pod runs yet: "+
		"the replacement would start that template's rollout, which its RolloutPolicy holds: %s", pod.Namespace, pod.Name, d.Denial())
	secs := int(math.Ceil(MaxRetryAfter.Seconds()))
	err := apierrors.NewTooManyRequests(msg, secs)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: msg}}
	return decision.Denied(err, d)
}
