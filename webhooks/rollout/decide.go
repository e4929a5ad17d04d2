// Package rollout is the rollout guard: a validating webhook on apps/v1 Deployments,
// StatefulSets and DaemonSets that rejects pod-template changes which would cause
// unstable multi-revision rollouts.
package rollout

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Rule names, as they appear in messages and metrics.
const (
	RuleSettle            = "settle"
	RuleMinInterval       = "minInterval"
	RuleRevertWindow      = "revertWindow"
	RuleArgsMatchReplicas = "argsMatchReplicas"
	// RuleTargets reports a policy whose selectors cannot be evaluated.
	RuleTargets = "targets"
	// RuleSelection reports an update that takes a workload out of a policy's selection.
	RuleSelection = "selection"
)

// Input is everything a rollout decision reads. It is gathered by the handler.
type Input struct {
	Operation admissionv1.Operation
	// Old is nil on CREATE.
	Old, New *workload.Workload
	// TemplateChanged is an UPDATE whose new pod template differs from the old one
	// (workload.SameTemplate): only that starts a rollout. The handler compares once.
	TemplateChanged bool
	NamespaceLabels map[string]string
	User            authenticationv1.UserInfo
	Policies        []v1alpha1.RolloutPolicy
	// Matcher evaluates the policies' targets; nil compiles their selectors anew.
	Matcher *policy.Matcher
	// History is the workload's revisions and pod activity, read when the template changed.
	History history.History
	Now     time.Time
}

// Decision is the outcome of evaluating every applicable policy.
type Decision struct {
	decision.Violations
}

// Decide evaluates every policy that applies to the request. It does no I/O. An error is
// a pod template that a rule had to read and that does not decode: the request is bad.
func Decide(in Input) (Decision, error) {
	scale, err := isScaleForAny(in)
	if err != nil {
		return Decision{}, err
	}
	var d Decision
	for i := range in.Policies {
		p := &in.Policies[i]
		if p.Spec.Suspend || policy.Exempt(p.Spec.Exemptions, in.User) {
			continue
		}
		selectsNew, selectedOld, err := selection(p, in)
		action := decision.ActionFor(p.Spec.Mode)
		if err != nil {
			// A policy we cannot evaluate must not silently allow what it may forbid.
			d.Violations = append(d.Violations, decision.Violation{Policy: p.Name, Rule: RuleTargets, Action: action,
				Message: fmt.Sprintf("the policy cannot be evaluated: %v; fix the policy or suspend it", err)})
			continue
		}
		if !selectsNew && !selectedOld {
			continue
		}
		found, err := check(in, &p.Spec.Rules, scale)
		if err != nil {
			return Decision{}, err
		}
		if selectedOld && !selectsNew && in.Operation == admissionv1.Update {
			// Otherwise a relabel, then a free change, walks around every rule.
			found = append(found, finding{rule: RuleSelection, field: field.NewPath("metadata", "labels"), message: fmt.Sprintf(
				"%s: the update takes the workload out of the policy's selection (its labels no longer match spec.targets); "+
					"a workload leaves a policy by a change to the policy, or through an exempt requester", in.New)})
		}
		for _, f := range found {
			d.Violations = append(d.Violations, decision.Violation{Policy: p.Name, Rule: f.rule,
				Action: action, Field: f.field, Message: f.message})
		}
	}
	d.Violations.SortByPolicy()
	return d, nil
}

// isScaleForAny reports an UPDATE whose only template difference is the argsMatchReplicas
// flags of the policies that select the workload, following spec.replicas (I4): whichever
// policy holds the flag and whichever holds the revision rules, and whoever is exempt from
// which.
func isScaleForAny(in Input) (bool, error) {
	if in.Operation != admissionv1.Update || in.Old == nil || !in.TemplateChanged {
		return false, nil
	}
	var flags []v1alpha1.ArgMatchesReplicas
	for i := range in.Policies {
		p := &in.Policies[i]
		if len(p.Spec.Rules.ArgsMatchReplicas) == 0 || p.Spec.Suspend {
			continue
		}
		if selectsNew, selectedOld, err := selection(p, in); err == nil && (selectsNew || selectedOld) {
			// One policy's flags are read in place; a second's are appended to a copy (the
			// full slice expression makes append copy, never write the cached policy).
			if r := p.Spec.Rules.ArgsMatchReplicas; flags == nil {
				flags = r
			} else {
				flags = append(flags[:len(flags):len(flags)], r...)
			}
		}
	}
	return isScale(in.Old, in.New, flags)
}

// selection is whether a policy selects the new object and the old one (none on CREATE).
// A policy applies when it selects either, so relabelling a workload cannot carry a change
// past it, and an UPDATE that takes the workload out of its selection is refused. An error
// means the policy's selectors are invalid.
func selection(p *v1alpha1.RolloutPolicy, in Input) (selectsNew, selectedOld bool, err error) {
	if selectsNew, err = in.Matcher.Selects(p.Spec.Targets, in.New.Kind, in.NamespaceLabels, in.New.Labels); err != nil || in.Old == nil {
		return selectsNew, false, err
	}
	selectedOld, err = in.Matcher.Selects(p.Spec.Targets, in.Old.Kind, in.NamespaceLabels, in.Old.Labels)
	return selectsNew, selectedOld, err
}

type finding struct {
	rule    string
	field   *field.Path
	message string
	// lint tells strategy findings at the same field apart.
	lint string
	// severity is how far a strategy finding is from its rule, larger is worse.
	severity int64
}

var (
	templatePath   = field.NewPath("spec", "template")
	containersPath = templatePath.Child("spec", "containers")
)

// check applies one policy's rules to the request. scale is a change whose only template
// difference is argsMatchReplicas flags following spec.replicas (I4): it starts no
// revision, so no revision rule applies to it.
func check(in Input, rules *v1alpha1.RolloutRules, scale bool) ([]finding, error) {
	out, err := checkArgsMatchReplicas(in.New, rules.ArgsMatchReplicas)
	if err != nil {
		return nil, err
	}
	lints, err := checkStrategy(in, rules.Strategy)
	if err != nil {
		return nil, err
	}
	out = append(out, lints...)
	if in.Operation != admissionv1.Update || in.Old == nil || !in.TemplateChanged {
		return out, nil // Only a new pod template starts a rollout.
	}
	rev := in.History.Find(in.New.Template)
	newest := in.History.Newest()
	rollback := isRollback(in, rev)
	stalled := isStalled(in, rules.Settle)

	if rules.Settle != nil && !scale && in.Old.Rollout.InProgress {
		r := in.Old.Rollout
		escaped := in.New.Rollout.Paused || in.New.Rollout.OnDelete || r.DeadlineExceeded || stalled || rollback
		if !escaped {
			out = append(out, finding{rule: RuleSettle, field: templatePath, message: fmt.Sprintf(
				"%s is still rolling out its current revision (%s); wait until the rollout completes, "+
					"or roll back to the revision that is still serving", in.New, r.Progress)})
		}
	}
	if rules.MinInterval != nil && !scale && !rollback && newest != nil {
		since := in.Now.Sub(in.History.Current(newest))
		if wait := rules.MinInterval.Duration - since; wait > 0 {
			out = append(out, finding{rule: RuleMinInterval, field: templatePath, message: fmt.Sprintf(
				"%s got its current revision %s ago, less than the minimum interval of %s between revisions; retry after %s",
				in.New, round(since), rules.MinInterval.Duration, round(wait))})
		}
	}
	if rules.RevertWindow != nil && !scale && rev != nil && !workload.SameTemplate(rev.Template, in.Old.Template) && !rollback && !stalled {
		if succ := in.History.Successor(rev); succ != nil {
			since := in.Now.Sub(in.History.Current(succ))
			if wait := rules.RevertWindow.Duration - since; wait > 0 {
				out = append(out, finding{rule: RuleRevertWindow, field: templatePath, message: fmt.Sprintf(
					"%s: the new pod template equals revision %d, which revision %d replaced %s ago; "+
						"going back within %s is flapping; keep the current revision, or retry after %s",
					in.New, rev.Number, succ.Number, round(since), rules.RevertWindow.Duration, round(wait))})
			}
		}
	}
	return out, nil
}

// isRollback is a return to a revision still serving while the current one rolls out:
// cancelling an unfinished rollout is the cheapest move, so no rule stands in its way.
// The current revision is the old object's template, which may not have reached the
// cache yet; so a rollback target is any other known revision with serving pods.
func isRollback(in Input, rev *history.Revision) bool {
	return in.Old.Rollout.InProgress && rev != nil && rev.Serving > 0 && !workload.SameTemplate(rev.Template, in.Old.Template)
}

// isStalled is a rollout kube declared stalled, or one none of whose pods was created or
// changed readiness for stallAfter (StatefulSets and DaemonSets have no deadline).
func isStalled(in Input, settle *v1alpha1.SettleRule) bool {
	if !in.Old.Rollout.InProgress {
		return false
	}
	if in.Old.Rollout.DeadlineExceeded {
		return true
	}
	after := defaultStallAfter
	if settle != nil && settle.StallAfter != nil {
		after = settle.StallAfter.Duration
	}
	last := in.History.LastActivity
	if n := in.History.Newest(); n != nil && in.History.Current(n).After(last) {
		last = in.History.Current(n)
	}
	return !last.IsZero() && in.Now.Sub(last) >= after
}

// defaultStallAfter matches the CRD's default for settle.stallAfter.
const defaultStallAfter = 10 * time.Minute

// isScale reports a change whose only template difference is argsMatchReplicas flags,
// following a replicas change: munge the flags' old values into a copy of the new
// template, then compare.
func isScale(old, new *workload.Workload, rules []v1alpha1.ArgMatchesReplicas) (bool, error) {
	if len(rules) == 0 || old.Replicas == nil || new.Replicas == nil || *old.Replicas == *new.Replicas {
		return false, nil
	}
	oldSpec, err := old.Template.Spec()
	if err != nil {
		return false, fmt.Errorf("oldObject: %w", err)
	}
	newSpec, err := new.Template.Spec()
	if err != nil {
		return false, fmt.Errorf("object: %w", err)
	}
	munged := newSpec.DeepCopy()
	for _, r := range rules {
		i, j := containerIndex(munged.Spec.Containers, r.Container), containerIndex(oldSpec.Spec.Containers, r.Container)
		if i < 0 || j < 0 {
			continue
		}
		v, at, ok := flagValue(oldSpec.Spec.Containers[j].Command, oldSpec.Spec.Containers[j].Args, r.Flag)
		if !ok {
			continue
		}
		_, mat, ok := flagValue(munged.Spec.Containers[i].Command, munged.Spec.Containers[i].Args, r.Flag)
		if !ok || mat != at {
			continue
		}
		c := &munged.Spec.Containers[i]
		argv := c.Args
		if at.name == "command" {
			argv = c.Command
		}
		if strings.HasPrefix(argv[at.index], r.Flag+"=") {
			argv[at.index] = r.Flag + "=" + v
		} else {
			argv[at.index] = v
		}
	}
	return workload.SameSpec(oldSpec, munged), nil
}

func round(d time.Duration) time.Duration {
	if d > time.Second {
		return d.Round(time.Second)
	}
	return d.Round(time.Millisecond)
}

// checkArgsMatchReplicas finds the named container flags whose value differs from spec.replicas.
func checkArgsMatchReplicas(w *workload.Workload, rules []v1alpha1.ArgMatchesReplicas) ([]finding, error) {
	if w == nil || w.Replicas == nil || len(rules) == 0 {
		return nil, nil // DaemonSets have no replica count to match.
	}
	replicas := *w.Replicas
	var out []finding
	for _, r := range rules {
		c, ok, err := w.Template.CommandLine(r.Container)
		if err != nil {
			return nil, fmt.Errorf("object: %w", err)
		}
		if !ok {
			continue // The rule guards workloads that run this container.
		}
		i := c.Index
		value, path, found := flagValue(c.Command, c.Args, r.Flag)
		switch {
		case !found:
			out = append(out, finding{rule: RuleArgsMatchReplicas, field: containersPath.Index(i), message: fmt.Sprintf(
				"%s: container %q has no %s flag, which must equal spec.replicas (%d); add %s=%d",
				w, r.Container, r.Flag, replicas, r.Flag, replicas)})
		case value != strconv.Itoa(int(replicas)):
			out = append(out, finding{rule: RuleArgsMatchReplicas, field: containersPath.Index(i).Child(path.name).Index(path.index), message: fmt.Sprintf(
				"%s: container %q has %s=%s but spec.replicas is %d; change replicas and %s together, to %s=%d",
				w, r.Container, r.Flag, value, replicas, r.Flag, r.Flag, replicas)})
		}
	}
	return out, nil
}

func containerIndex(cs []corev1.Container, name string) int {
	for i := range cs {
		if cs[i].Name == name {
			return i
		}
	}
	return -1
}

type argPath struct {
	name  string // "command" or "args"
	index int
}

// flagValue reads a flag from a container's command line, accepting "--flag=v" and
// "--flag v". As with most flag parsers, the last occurrence wins.
func flagValue(command, args []string, flag string) (value string, at argPath, found bool) {
	for _, part := range []struct {
		name string
		argv []string
	}{{"command", command}, {"args", args}} {
		for i, a := range part.argv {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				value, at, found = v, argPath{part.name, i}, true
			} else if a == flag && i+1 < len(part.argv) {
				value, at, found = part.argv[i+1], argPath{part.name, i + 1}, true
			}
		}
	}
	return value, at, found
}
