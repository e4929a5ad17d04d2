package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Replacement judges the eviction or DELETE of pod as the rollout guard judges a start,
// when it is one: the pod's controller is an OnDelete StatefulSet or DaemonSet, or a
// StatefulSet a partition holds or whose partition is above the pod's ordinal, that a
// RolloutPolicy selects, kube replaces the pod from
// the workload's current template (newVersionedStatefulSetPod gives an OnDelete
// StatefulSet's ordinal its update revision, a partition's its current revision; the
// DaemonSet controller's syncNodes creates a node's missing pod from its template), and
// no live pod runs that template yet: the replacement is its first pod, with no request on
// the workload for the revision rules to judge. Judged: settle (the third template),
// minInterval, revertWindow and the windows, from the cache and the journal alone. Not the
// fleet limit (an OnDelete workload is not in flight, docs/fleet.md) nor the shared budget
// (the eviction guard's, as for any eviction): so nothing is recorded, and an eviction kube's
// PodDisruptionBudget then refuses holds no slot. starts is false when the request starts
// nothing: another owner, a template with pods, a pod kube will not re-create. The workload
// itself is read from the API server (Live) whenever a policy targets its kind (one GET):
// an edit staged a moment ago, a switch to OnDelete, a relabel into a selection or a
// re-create under its name is not in the cache yet, and the DELETE that follows it at once
// would be judged on the workload before. So is its namespace, best effort, when a policy
// would select the workload but for the namespace's labels the caller read from its cache
// (a relabel into the selection a moment ago).
func (h *Handler) Replacement(ctx context.Context, deadline budget.Deadline, pod *corev1.Pod, nsLabels map[string]string, user authenticationv1.UserInfo) (vs decision.Violations, starts bool, err error) {
	owner := metav1.GetControllerOfNoCopy(pod)
	if owner == nil {
		// A pod no controller owns, named as a StatefulSet's ordinal (one the StatefulSet
		// released when it was relabelled out of its selector, which keeps its name): kube
		// creates that ordinal once it is gone (CreateStatefulPod fails AlreadyExists until
		// then). The StatefulSet of its name, if any, is read below.
		owner = ordinalOwner(pod.Name)
	}
	// kube's controllers resolve their pods' controller by kind and UID, whatever the
	// reference's apiVersion says (resolveControllerRef).
	if owner == nil || (owner.Kind != string(v1alpha1.KindStatefulSet) && owner.Kind != string(v1alpha1.KindDaemonSet)) ||
		pod.DeletionTimestamp != nil {
		return nil, false, nil // a terminating pod is replaced whatever the eviction's answer
	}
	kind := v1alpha1.WorkloadKind(owner.Kind)
	var policies v1alpha1.RolloutPolicyList
	if err := informer.List(ctx, h.Reader, &policies); err != nil {
		return nil, false, fmt.Errorf("listing RolloutPolicies: %w", err)
	}
	if !slices.ContainsFunc(policies.Items, func(p v1alpha1.RolloutPolicy) bool {
		return !p.Spec.Suspend && slices.Contains(workload.Targeted(p.Spec.Targets), kind)
	}) {
		return nil, false, nil
	}
	obj, err := workload.New(kind)
	if err != nil {
		return nil, false, err
	}
	// The workload as the API server has it: an edit staged, a switch to OnDelete, a relabel
	// into a selection or a re-create under its name (the pod names the new one) a moment
	// ago is not in the cache yet, and the DELETE that follows at once would be judged on
	// the workload before. Without a live reader, the cache's.
	selects := func(o client.Object, nsLabels map[string]string) bool {
		return slices.ContainsFunc(policies.Items, func(p v1alpha1.RolloutPolicy) bool {
			selects, err := h.Matcher.Selects(p.Spec.Targets, kind, nsLabels, o.GetLabels())
			return !p.Spec.Suspend && err == nil && selects
		})
	}
	// A policy would select the workload but for its namespace's labels as the caller read
	// them, from a cache that may not show a relabel into the selection yet: the rollout
	// guard's own requests read the namespace live then (namespaceMayLag), and so does this.
	nsMayLag := func(o client.Object) bool {
		return h.Live != nil && slices.ContainsFunc(policies.Items, func(p v1alpha1.RolloutPolicy) bool {
			t := &p.Spec.Targets
			return !p.Spec.Suspend && slices.Contains(workload.Targeted(*t), kind) &&
				h.Matcher.OutsideByNamespaceOnly(t.NamespaceSelector, t.Selector, pod.Namespace, nsLabels, o.GetLabels())
		})
	}
	// The live reads share the request's bound inside the webhook's timeout (past it, "not
	// now").
	key := client.ObjectKey{Namespace: pod.Namespace, Name: owner.Name}
	lctx := ctx
	if h.Live != nil {
		var cancel context.CancelFunc
		lctx, cancel = deadline.Bound(ctx)
		defer cancel()
		found, err := h.readOwner(lctx, key, obj)
		if err != nil {
			// A workload the cache shows under the pod's owner UID that no policy selects,
			// even in a namespace relabelled a moment ago, passes on the cache's word, as it
			// did before every such pod's workload was read: a drain of pods no rule holds
			// does not wait on the API server.
			cached, cerr := workload.New(kind)
			if cerr == nil && informer.Get(ctx, h.Reader, key, cached) == nil && (owner.UID == "" || cached.GetUID() == owner.UID) &&
				!selects(cached, nsLabels) && !nsMayLag(cached) {
				return nil, false, nil
			}
			return nil, false, err
		}
		if !found {
			return nil, false, nil // gone: nothing replaces the pod
		}
	} else if err := informer.Get(ctx, h.Reader, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false, nil // gone: nothing replaces the pod
		}
		return nil, false, fmt.Errorf("reading the %s of pod %s/%s: %w", owner.Kind, pod.Namespace, pod.Name, err)
	}
	if (owner.UID != "" && obj.GetUID() != owner.UID) || obj.GetDeletionTimestamp() != nil || !holds(obj, pod.Name) {
		return nil, false, nil
	}
	if !selects(obj, nsLabels) {
		if !nsMayLag(obj) {
			return nil, false, nil
		}
		// Best effort, as there: a failed read leaves the cache's labels to decide.
		live, err := h.liveNamespaceLabels(ctx, deadline, pod.Namespace)
		if err != nil {
			logf.FromContext(ctx).V(1).Info("Reading the namespace's labels from the API server failed; judging on the cache's", "namespace", pod.Namespace, "error", err.Error())
			return nil, false, nil
		}
		if nsLabels = live; !selects(obj, nsLabels) {
			return nil, false, nil
		}
	}
	w, err := workload.From(obj)
	if err != nil {
		return nil, false, err
	}
	// An ordinal below a partition is made as a held set makes it, from the current
	// revision, however many ordinals above it roll.
	w.Rollout.Held = true
	if replaced, err := h.replaced(ctx, w, pod); err != nil || !replaced {
		return nil, false, err
	}
	in := Input{Operation: admissionv1.Update, Old: w, New: w, Replaces: pod.Name, User: user,
		Policies: policies.Items, Matcher: h.Matcher, Now: h.Clock.Now(), NamespaceLabels: nsLabels, Deadline: deadline}
	// Its history, where no synced watch holds it, is read from the API server within the
	// request's deadline too.
	if err := h.readWorkloadState(in.Deadline.Carry(ctx), &in); err != nil {
		return nil, false, err
	}
	if !startsStaged(in) && len(currentStarts(in)) == 0 {
		return nil, false, nil // the template it is made from has pods: the replacement starts nothing
	}
	d, err := Decide(in)
	if err != nil {
		return nil, false, err
	}
	if len(d.Violations) > 0 {
		logf.FromContext(ctx).Info("Rollout policy violated by a pod's replacement", "workload", w.String(), "pod", pod.Name,
			"action", d.Action().String(), "violations", d.Messages(decision.Audit))
	}
	return d.Violations, true, nil
}

// readOwner reads a pod's workload from the API server into obj (the caller bounds ctx);
// found is false when there is none of the name.
func (h *Handler) readOwner(ctx context.Context, key client.ObjectKey, obj client.Object) (found bool, err error) {
	if err := h.Live.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("reading the workload %s/%s from the API server: %w", key.Namespace, key.Name, err)
	}
	return true, nil
}

// replaced is whether kube's controller creates a pod in place of pod: a StatefulSet's
// ordinal within its range (an ordinal a scale down condemned is not re-created,
// stateful_set_control.go), a DaemonSet's pod on a node that is there and that the
// template still runs on (nodeShouldRunDaemonPod: its selector and affinity, and the
// NoSchedule and NoExecute taints neither its tolerations nor those kube adds to every
// daemon pod tolerate; the cluster autoscaler's ToBeDeleted makes no new pod, a cordon or
// memory pressure does).
func (h *Handler) replaced(ctx context.Context, w *workload.Workload, pod *corev1.Pod) (bool, error) {
	if w.Kind == v1alpha1.KindStatefulSet {
		return w.KeepsOrdinal(pod.Name), nil
	}
	if pod.Spec.NodeName == "" {
		return true, nil
	}
	var node corev1.Node
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, &node); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if node.DeletionTimestamp != nil {
		return false, nil
	}
	spec, err := w.Template.Spec()
	if err != nil {
		return false, err
	}
	return workload.DaemonRunsOn(&spec.Spec, &node), nil
}

// ordinalOwner is the StatefulSet a pod's name makes it an ordinal of (<name>-<ordinal>),
// without a UID: kube names the pods it creates so, and creates none of a name a pod
// holds.
func ordinalOwner(pod string) *metav1.OwnerReference {
	i := strings.LastIndexByte(pod, '-')
	if i <= 0 {
		return nil
	}
	if n := pod[i+1:]; n == "" || strings.Trim(n, "0123456789") != "" {
		return nil
	}
	return &metav1.OwnerReference{Kind: string(v1alpha1.KindStatefulSet), Name: pod[:i]}
}

// holds is onDelete, or a StatefulSet that makes pod's ordinal from its current revision
// (newVersionedStatefulSetPod): one whose partition is at or above its replicas, or above
// the ordinal (a canary's ordinals below the partition). That revision may be one no pod
// runs (a set created over another revision's pods, an edit staged over it, a canary whose
// ordinals above the partition have all moved on: currentStarts).
func holds(obj client.Object, pod string) bool {
	if s, ok := obj.(*appsv1.StatefulSet); ok && s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		r := s.Spec.UpdateStrategy.RollingUpdate
		if r == nil || r.Partition == nil || *r.Partition <= 0 {
			return false
		}
		if *r.Partition >= ptr.Deref(s.Spec.Replicas, 1) {
			return true
		}
		start := int32(0)
		if s.Spec.Ordinals != nil {
			start = s.Spec.Ordinals.Start
		}
		i, ok := workload.Ordinal(s.Name, pod)
		return ok && i < int(start)+int(*r.Partition)
	}
	return onDelete(obj)
}

// onDelete is a StatefulSet or DaemonSet that replaces its pods only when they are deleted,
// read from the typed object: the eviction of a pod no policy selects does not pay for
// workload.From, which reads it as Rollout.OnDelete.
func onDelete(obj client.Object) bool {
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		return o.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType
	case *appsv1.DaemonSet:
		return o.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType
	}
	return false
}
