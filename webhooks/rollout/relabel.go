package rollout

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// templateGenerationLabel is the DaemonSet template generation kube's DaemonSet
// controller labels its pods with (extensions.DaemonSetTemplateGenerationKey).
const templateGenerationLabel = "pod-template-generation"

// PodRelabelPath is where HandlePodRelabel is served.
const PodRelabelPath = interception.PodRelabelPath

// HandlePodRelabel judges a pod UPDATE (or pods/status UPDATE, which may change labels
// too) whose new labels or controller reference take the pod out of its StatefulSet's or
// DaemonSet's claim, or that changes the revision labels kube counts its templates' pods
// by (controller-revision-hash, pod-template-generation). A released pod is replaced by
// kube's controller (ClaimPods, controller_ref_manager.go) from the current template: at
// once for a DaemonSet's node, once the released pod is gone for a StatefulSet's ordinal,
// whose name it keeps. On an OnDelete workload whose template no pod runs yet (or a
// StatefulSet a partition holds, whose current revision no pod runs), that is the
// template's first pod, a start with no eviction or DELETE of a pod the workload controls;
// a pod that says it runs that template makes the next replacement read as none. Both are
// judged as Replacement judges a start, so that a relabel is no way around what an
// eviction would be refused. A relabel that keeps the pod claimed and its revision labels,
// or of any other pod, is admitted. A read that fails answers "retry", never "allow".
func (h *Handler) HandlePodRelabel(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	deadline := h.Ledgers.Deadline() // the live reads below share it
	var pod, old corev1.Pod
	if bad, ok := decodeRelabel(req, "Pod", &pod, &old); !ok {
		return bad
	}
	owner := metav1.GetControllerOfNoCopy(&old)
	if owner == nil || (owner.Kind != string(v1alpha1.KindStatefulSet) && owner.Kind != string(v1alpha1.KindDaemonSet)) {
		return admission.Allowed("")
	}
	obj, err := workload.New(v1alpha1.WorkloadKind(owner.Kind))
	if err != nil {
		return admission.Allowed("")
	}
	// Whether the relabel keeps the pod claimed is read from the cache: a workload's selector
	// never changes. One the cache does not show, or shows under another UID (created again
	// under its name a moment ago: the pod names the new one), is read from the API server.
	key := client.ObjectKey{Namespace: old.Namespace, Name: owner.Name}
	if err := informer.Get(ctx, h.Reader, key, obj); err != nil && !apierrors.IsNotFound(err) {
		return decision.Retry("the pod's workload", err)
	} else if err != nil || obj.GetUID() != owner.UID {
		if h.Live == nil {
			return admission.Allowed("") // gone: nothing replaces the pod
		}
		lctx, cancel := deadline.Bound(ctx)
		found, err := h.readOwner(lctx, key, obj)
		cancel()
		if err != nil {
			return decision.Retry("the pod's workload", err)
		}
		if !found {
			return admission.Allowed("") // gone: nothing replaces the pod
		}
	}
	m, ok := workload.MetaOf(obj)
	if !ok || obj.GetUID() != owner.UID {
		return admission.Allowed("")
	}
	// kube's controller keeps a pod it controls whose labels its selector matches, and adopts
	// one without a controller that matches; it leaves one another controller owns
	// (ClaimObject, controller_ref_manager.go). An invalid selector claims nothing.
	sel, err := metav1.LabelSelectorAsSelector(m.Selector)
	now := metav1.GetControllerOfNoCopy(&pod)
	kept := err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels)) && (now == nil || now.UID == owner.UID)
	// The revision labels are how kube and holdfast count a template's pods.
	relabelled := old.Labels[appsv1.ControllerRevisionHashLabelKey] != pod.Labels[appsv1.ControllerRevisionHashLabelKey] ||
		old.Labels[templateGenerationLabel] != pod.Labels[templateGenerationLabel]
	if kept && !relabelled {
		return admission.Allowed("")
	}
	nsLabels, err := policy.NamespaceLabels(ctx, h.Reader, req.Namespace)
	if err != nil {
		return decision.Retry("the pod's namespace", err)
	}
	vs, starts, err := h.Replacement(ctx, deadline, &old, nsLabels, req.UserInfo)
	if err != nil {
		return decision.Retry("the pod's workload", err)
	}
	if !starts {
		return admission.Allowed("")
	}
	why := fmt.Sprintf("relabelling pod %s/%s releases it from its %s (its labels or controller reference no longer claim it), and kube replaces it from the current pod template, "+
		"which no pod runs yet: the change would start that template's rollout (keep the labels the selector matches and the controller reference); ", old.Namespace, old.Name, owner.Kind)
	if kept {
		why = fmt.Sprintf("relabelling pod %s/%s changes the revision its labels name, by which kube counts the pods of each of its %s's templates, while the current one, which no pod runs yet, "+
			"is staged: the change would count the pod as that template's and let its rollout start unjudged (leave the revision labels to kube); ", old.Namespace, old.Name, owner.Kind)
	}
	for i := range vs {
		vs[i].Message = why + vs[i].Message
	}
	return Respond(Decision{Violations: vs})
}
