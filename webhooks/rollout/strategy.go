package rollout

import (
	"fmt"
	"math"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// RuleStrategy names the strategy lints.
const RuleStrategy = "strategy"

var (
	podSpecPath  = field.NewPath("spec", "template", "spec")
	notReadyKeys = []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable}
)

// checkStrategy lints a workload's rollout strategy and pod shape. On UPDATE a finding
// the old object had counts only where it got worse (I5): an unrelated edit of a workload
// that predates the policy is not held up, but no edit, scale included, may make its
// strategy less safe than it was.
func checkStrategy(in Input, rule *v1alpha1.StrategyRule) ([]finding, error) {
	if rule == nil {
		return nil, nil
	}
	w := in.New
	if in.Operation == admissionv1.Create && w.Kind == v1alpha1.KindDaemonSet && in.Nodes > w.Expected {
		// Its percentages resolve against the nodes it will run on, not the 0 pods it
		// has before the DaemonSet controller writes its status.
		c := *w
		c.Expected = in.Nodes
		w = &c
	}
	found, err := lintStrategy(w, rule)
	if err != nil || in.Old == nil || len(found) == 0 {
		return found, err
	}
	before, err := lintStrategy(in.Old, rule)
	if err != nil {
		return nil, fmt.Errorf("oldObject: %w", err)
	}
	had := map[string]int64{}
	for _, f := range before {
		had[f.key()] = f.severity
	}
	var out []finding
	for _, f := range found {
		if old, ok := had[f.key()]; !ok || f.severity > old {
			out = append(out, f)
		}
	}
	return out, nil
}

func (f finding) key() string {
	p := ""
	if f.field != nil {
		p = f.field.String()
	}
	return f.rule + "|" + p + "|" + f.lint
}

// Severities of the findings that have no measure: present or not.
const (
	absent  = int64(math.MaxInt64)
	forever = int64(math.MaxInt64 - 1)
)

// NeedsNodes is a DaemonSet CREATE that a selecting policy's strategy rule judges: its
// percentages resolve against the nodes it will run on (Input.Nodes).
func NeedsNodes(in Input) bool {
	if in.Operation != admissionv1.Create || in.New == nil || in.New.Kind != v1alpha1.KindDaemonSet {
		return false
	}
	return len(selecting(&in, func(r *v1alpha1.RolloutRules) bool { return r.Strategy != nil })) > 0
}

// unavailableDuringRollout is how many of a workload's pods its strategy takes down at
// once, as its controller resolves the strategy: Recreate takes them all; a Deployment
// rounds maxUnavailable down but takes one when maxSurge is 0 too; a StatefulSet rounds
// down and takes at least one; a DaemonSet rounds up.
func unavailableDuringRollout(w *workload.Workload) int32 {
	s := w.Strategy
	if !s.Rolling {
		return w.Expected
	}
	n := policy.Resolve(policy.MaxUnavailable, w.Kind, s.MaxUnavailable, w.Expected)
	switch w.Kind {
	case v1alpha1.KindDeployment:
		_, n = policy.Fenceposts(s.MaxSurge, s.MaxUnavailable, w.Expected)
	case v1alpha1.KindStatefulSet:
		n = max(n, 1)
	}
	return min(n, max(w.Expected, 1))
}

// lintStrategy lints one workload; an error is a pod template that does not decode. Each
// finding's severity measures how far the workload is from the rule, so that checkStrategy
// can tell a finding that got worse from one that stayed.
func lintStrategy(w *workload.Workload, r *v1alpha1.StrategyRule) ([]finding, error) {
	var out []finding
	add := func(lint string, severity int64, path *field.Path, format string, args ...any) {
		out = append(out, finding{rule: RuleStrategy, lint: lint, severity: severity, field: path,
			message: fmt.Sprintf("%s: ", w) + fmt.Sprintf(format, args...)})
	}
	s := w.Strategy
	strategyPath := field.NewPath("spec", "strategy")
	if w.Kind != v1alpha1.KindDeployment {
		strategyPath = field.NewPath("spec", "updateStrategy")
	}

	// OnDelete StatefulSets and DaemonSets replace no pod on their own.
	if r.MaxUnavailable != nil && (s.Rolling || w.Kind == v1alpha1.KindDeployment) {
		limit := policy.Resolve(policy.MaxUnavailable, w.Kind, r.MaxUnavailable, w.Expected)
		if got := unavailableDuringRollout(w); got > limit {
			if !s.Rolling {
				add("maxUnavailable", int64(got), strategyPath.Child("type"),
					"the Recreate strategy takes all %d pods down at once, more than the %d allowed (%s); use RollingUpdate with maxUnavailable: %d",
					got, limit, r.MaxUnavailable.String(), limit)
			} else {
				add("maxUnavailable", int64(got), strategyPath.Child("rollingUpdate", "maxUnavailable"),
					"maxUnavailable %s lets %d of %d pods go at once, more than the %d allowed (%s); set maxUnavailable: %d",
					s.MaxUnavailable.String(), got, w.Expected, limit, r.MaxUnavailable.String(), limit)
			}
		}
	}
	if r.MinReadySeconds != nil && s.MinReadySeconds < *r.MinReadySeconds {
		add("minReadySeconds", -int64(s.MinReadySeconds), field.NewPath("spec", "minReadySeconds"),
			"minReadySeconds is %d; set it to at least %d so that each new pod proves itself before the next is replaced",
			s.MinReadySeconds, *r.MinReadySeconds)
	}
	if r.DaemonSetSurge && w.Kind == v1alpha1.KindDaemonSet {
		surge := policy.Resolve(policy.MaxSurge, w.Kind, s.MaxSurge, max(w.Expected, 1))
		if !s.Rolling || surge < 1 || policy.Resolve(policy.MaxUnavailable, w.Kind, s.MaxUnavailable, w.Expected) != 0 {
			add("daemonSetSurge", 0, strategyPath.Child("rollingUpdate"),
				"the DaemonSet must roll with maxSurge of at least 1 and maxUnavailable 0, so that each node's new agent runs before the old one stops")
		}
	}
	template, err := w.Template.Spec()
	if err != nil {
		return nil, err
	}
	pod := &template.Spec
	containers := podSpecPath.Child("containers")
	for i := range pod.Containers {
		c := &pod.Containers[i]
		if r.ReadinessProbe && c.ReadinessProbe == nil {
			add("readinessProbe", 0, containers.Index(i).Child("readinessProbe"),
				"container %q has no readiness probe; without one a pod counts as ready the moment it starts", c.Name)
		}
		if r.PreStop && (c.Lifecycle == nil || c.Lifecycle.PreStop == nil) {
			add("preStop", 0, containers.Index(i).Child("lifecycle", "preStop"),
				"container %q has no preStop hook to drain its connections before SIGTERM", c.Name)
		}
	}
	if r.MinTerminationGracePeriodSeconds != nil {
		got := int64(corev1.DefaultTerminationGracePeriodSeconds)
		if pod.TerminationGracePeriodSeconds != nil {
			got = *pod.TerminationGracePeriodSeconds
		}
		if got < *r.MinTerminationGracePeriodSeconds {
			add("terminationGracePeriodSeconds", -got, podSpecPath.Child("terminationGracePeriodSeconds"),
				"terminationGracePeriodSeconds is %d; set it to at least %d", got, *r.MinTerminationGracePeriodSeconds)
		}
	}
	if key := r.AntiAffinityTopologyKey; key != "" && !hasRequiredAntiAffinity(template, key) {
		add("antiAffinity", 0, podSpecPath.Child("affinity", "podAntiAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
			"no required pod anti-affinity on %s selects the workload's own pods; two of them could share a failure domain", key)
	}
	if limit := r.MaxNoExecuteTolerationSeconds; limit != nil && w.Kind == v1alpha1.KindDeployment {
		for _, key := range notReadyKeys {
			secs, ok := noExecuteToleration(pod.Tolerations, key)
			switch {
			case !ok:
				add("tolerations/"+key, absent, podSpecPath.Child("tolerations"),
					"no NoExecute toleration for %s; add one with tolerationSeconds of at most %d", key, *limit)
			case secs == nil:
				add("tolerations/"+key, forever, podSpecPath.Child("tolerations"),
					"the NoExecute toleration for %s has no tolerationSeconds, so pods stay on a dead node forever; bound it to at most %d", key, *limit)
			case *secs > *limit:
				add("tolerations/"+key, *secs, podSpecPath.Child("tolerations"),
					"the NoExecute toleration for %s lasts %ds; bound it to at most %d", key, *secs, *limit)
			}
		}
	}
	return out, nil
}

// hasRequiredAntiAffinity reports a required anti-affinity term on key whose selector
// matches the template's own pod labels.
func hasRequiredAntiAffinity(t *corev1.PodTemplateSpec, key string) bool {
	a := t.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if term.TopologyKey != key || term.LabelSelector == nil {
			continue
		}
		// The request's own selector, compiled once: there is nothing to keep it for.
		if sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector); err == nil && sel.Matches(labels.Set(t.Labels)) {
			return true
		}
	}
	return false
}

// noExecuteToleration finds the toleration of a NoExecute taint key; secs is nil for "forever".
func noExecuteToleration(ts []corev1.Toleration, key string) (secs *int64, ok bool) {
	for _, t := range ts {
		keyMatches := t.Key == key || (t.Key == "" && t.Operator == corev1.TolerationOpExists)
		if keyMatches && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
			return t.TolerationSeconds, true
		}
	}
	return nil, false
}
