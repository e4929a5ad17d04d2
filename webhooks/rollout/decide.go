// Package rollout is the rollout guard: a validating webhook on apps/v1 Deployments,
// StatefulSets and DaemonSets that rejects pod-template changes which would cause
// unstable multi-revision rollouts.
package rollout

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Rule names, as they appear in messages and metrics.
const (
	RuleArgsMatchReplicas = "argsMatchReplicas"
	// RuleTargets reports a policy whose selectors cannot be evaluated.
	RuleTargets = "targets"
)

// Input is everything a rollout decision reads. It is gathered by the handler.
type Input struct {
	Operation admissionv1.Operation
	// Old is nil on CREATE.
	Old, New        *workload.Workload
	NamespaceLabels map[string]string
	User            authenticationv1.UserInfo
	Policies        []v1alpha1.RolloutPolicy
}

// Violation is one rule of one policy that the request breaks.
type Violation struct {
	Policy  string
	Rule    string
	Action  policy.Action
	Field   *field.Path
	Message string
}

// String renders the violation as holdfast reports it: [policy/rule] what happened; what to do.
func (v Violation) String() string {
	return fmt.Sprintf("[%s/%s] %s", v.Policy, v.Rule, v.Message)
}

// Decision is the outcome of evaluating every applicable policy.
type Decision struct {
	Violations []Violation
}

// Action is the strictest action among the violations; Allow when there are none.
func (d Decision) Action() policy.Action {
	a := policy.Allow
	for _, v := range d.Violations {
		a = max(a, v.Action)
	}
	return a
}

// Decide evaluates every policy that applies to the request. It does no I/O.
func Decide(in Input) Decision {
	var d Decision
	for i := range in.Policies {
		p := &in.Policies[i]
		if p.Spec.Suspend || policy.Exempt(p.Spec.Exemptions, in.User) {
			continue
		}
		applies, err := selectsEither(p, in)
		action := policy.ActionFor(p.Spec.Mode)
		if err != nil {
			// A policy we cannot evaluate must not silently allow what it may forbid.
			d.Violations = append(d.Violations, Violation{Policy: p.Name, Rule: RuleTargets, Action: action,
				Message: fmt.Sprintf("the policy cannot be evaluated: %v; fix the policy or suspend it", err)})
			continue
		}
		if !applies {
			continue
		}
		for _, f := range checkArgsMatchReplicas(in.New, p.Spec.Rules.ArgsMatchReplicas) {
			d.Violations = append(d.Violations, Violation{Policy: p.Name, Rule: RuleArgsMatchReplicas,
				Action: action, Field: f.field, Message: f.message})
		}
	}
	return d
}

// selectsEither applies a policy when it selects the old or the new object, so
// relabelling a workload cannot carry a change past the policy.
func selectsEither(p *v1alpha1.RolloutPolicy, in Input) (bool, error) {
	for _, w := range []*workload.Workload{in.New, in.Old} {
		if w == nil {
			continue
		}
		ok, err := policy.Selects(p.Spec.Targets, w.Kind, in.NamespaceLabels, w.Labels)
		if err != nil || ok {
			return ok, err
		}
	}
	return false, nil
}

type finding struct {
	field   *field.Path
	message string
}

// checkArgsMatchReplicas finds the named container flags whose value differs from spec.replicas.
func checkArgsMatchReplicas(w *workload.Workload, rules []v1alpha1.ArgMatchesReplicas) []finding {
	if w == nil || w.Replicas == nil || len(rules) == 0 {
		return nil // DaemonSets have no replica count to match.
	}
	replicas := *w.Replicas
	var out []finding
	containers := field.NewPath("spec", "template", "spec", "containers")
	for _, r := range rules {
		i := containerIndex(w.Template.Spec.Containers, r.Container)
		if i < 0 {
			continue // The rule guards workloads that run this container.
		}
		c := &w.Template.Spec.Containers[i]
		value, path, found := flagValue(c, r.Flag)
		switch {
		case !found:
			out = append(out, finding{containers.Index(i), fmt.Sprintf(
				"%s: container %q has no %s flag, which must equal spec.replicas (%d); add %s=%d",
				w, r.Container, r.Flag, replicas, r.Flag, replicas)})
		case value != strconv.Itoa(int(replicas)):
			out = append(out, finding{containers.Index(i).Child(path.name).Index(path.index), fmt.Sprintf(
				"%s: container %q has %s=%s but spec.replicas is %d; change replicas and %s together, to %s=%d",
				w, r.Container, r.Flag, value, replicas, r.Flag, r.Flag, replicas)})
		}
	}
	return out
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
func flagValue(c *corev1.Container, flag string) (value string, at argPath, found bool) {
	for _, part := range []struct {
		name string
		argv []string
	}{{"command", c.Command}, {"args", c.Args}} {
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
