package rollout

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Replacement judges the eviction or DELETE of pod as the rollout guard judges a start,
// when it is one: the pod's controller is an OnDelete StatefulSet or DaemonSet selected by
// a RolloutPolicy, and kube replaces the pod from the workload's current template
// (newVersionedStatefulSetPod gives an OnDelete StatefulSet's ordinal its update revision;
// the DaemonSet controller's syncNodes creates a node's missing pod from its template),
// which no live pod runs yet: the replacement is that template's first pod, with no request
// on the workload for the revision rules to judge (settle, minInterval, revertWindow, the
// windows, the fleet limit; the shared budget is the eviction guard's to keep, as for any
// eviction). ok is false when the request starts nothing. record says whether an admitted
// start is recorded in the fleet ledgers: the eviction guard asks first without, and again
// with, once it has admitted the eviction itself.
func (h *Handler) Replacement(ctx context.Context, pod *corev1.Pod, user authenticationv1.UserInfo, record bool) (decision.Violations, bool, error) {
	d, ok, err := h.replacement(ctx, pod, user, record)
	return d.Violations, ok, err
}

func (h *Handler) replacement(ctx context.Context, pod *corev1.Pod, user authenticationv1.UserInfo, record bool) (d Decision, ok bool, err error) {
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil || owner.APIVersion != "apps/v1" || (owner.Kind != string(v1alpha1.KindStatefulSet) && owner.Kind != string(v1alpha1.KindDaemonSet)) {
		return d, false, nil
	}
	var policies v1alpha1.RolloutPolicyList
	if err := informer.List(ctx, h.Reader, &policies); err != nil {
		return d, false, fmt.Errorf("listing RolloutPolicies: %w", err)
	}
	if len(policies.Items) == 0 {
		return d, false, nil
	}
	obj, err := workload.New(v1alpha1.WorkloadKind(owner.Kind))
	if err != nil {
		return d, false, err
	}
	if err := h.Reader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return d, false, nil // gone: nothing replaces the pod
		}
		return d, false, fmt.Errorf("reading the %s of pod %s/%s: %w", owner.Kind, pod.Namespace, pod.Name, err)
	}
	if obj.GetUID() != owner.UID || obj.GetDeletionTimestamp() != nil {
		return d, false, nil
	}
	w, err := workload.From(obj)
	if err != nil {
		return d, false, err
	}
	if !w.Rollout.OnDelete {
		return d, false, nil
	}
	in := Input{Operation: admissionv1.Update, Old: w, New: w, Replaces: pod.Name, User: user,
		Policies: policies.Items, Matcher: h.Matcher, Now: h.Clock.Now()}
	if in.NamespaceLabels, err = policy.NamespaceLabels(ctx, h.Reader, pod.Namespace); err != nil {
		return d, false, err
	}
	if !startsStagedByRequest(in) {
		return d, false, nil
	}
	if err := h.readWorkloadState(ctx, &in); err != nil {
		return d, false, err
	}
	if !startsStaged(in) {
		return d, false, nil // its template has pods: the replacement starts nothing
	}
	if d, err = h.decideAndRecord(ctx, &in, !record); err != nil {
		return d, false, err
	}
	if len(d.Violations) > 0 {
		logf.FromContext(ctx).Info("Rollout policy violated by a pod's replacement", "workload", w.String(), "pod", pod.Name,
			"action", d.Action().String(), "record", record, "violations", d.Messages(decision.Audit))
		if record || d.Action() == decision.Deny {
			recordEvents(h.Events, obj, d.Violations, in.Now)
		}
	}
	return d, true, nil
}

// startsStagedByRequest is what the request alone says of a replacement: the workload is
// held and a policy selects it. startsStaged, which reads its history, says the rest.
func startsStagedByRequest(in Input) bool {
	if !growsHeld(in) {
		return false
	}
	for i := range in.Policies {
		if Applies(&in.Policies[i], in) {
			return true
		}
	}
	return false
}
