// Package rollout is the rollout guard: a validating webhook on apps/v1 Deployments,
// StatefulSets and DaemonSets that rejects pod-template changes which would cause
// unstable multi-revision rollouts.
package rollout

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/holdfast-dev/holdfast/internal/budget"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Rule names, as they appear in messages and metrics.
const (
	RuleSettle            = "settle"
	RuleMinInterval       = "minInterval"
	RuleRevertWindow      = "revertWindow"
	RuleArgsMatchReplicas = "argsMatchReplicas"
	// RuleSelection reports an update that takes a workload out of a policy's selection.
	RuleSelection = "selection"
	// RuleWindow reports a rollout held by the policy's windows.
	RuleWindow = "window"
	// RuleExemption records an admission a temporary exemption let through.
	RuleExemption = decision.RuleExemption
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
	// Journal is the workload's revision journal, nil when there is none (or it is
	// invalid: read as absent); History is its revisions and pod activity in the cluster.
	// Both are read when the request may start a rollout (startsNow).
	Journal *journal.Journal
	History history.History
	// Fleets are, by policy name, what each policy with a concurrency rule sees of the
	// other workloads it selects; read when the request may start a rollout.
	Fleets map[string]Fleet
	// Evictions are, by policy name, what each policy with a sharedBudget reads of the
	// workload's evictions; read on an UPDATE that may start a rollout.
	Evictions map[string]budget.Evictions
	// Replaces names a pod of an OnDelete StatefulSet or DaemonSet whose eviction or DELETE
	// is asked, which kube replaces from the workload's current template: when no live pod
	// runs that template yet, the eviction starts its rollout (growsHeld, startsStaged).
	// Operation is then UPDATE, and Old and New are the workload as the cache holds it
	// (Handler.Replacement).
	Replaces string
	// Nodes is, on a DaemonSet CREATE that a strategy rule judges (NeedsNodes), how many
	// nodes its node selector matches (workload.NodesFor): what its percentages resolve
	// against, since the API server clears the status a CREATE carries.
	Nodes int32
	Now   time.Time
	// Deadline bounds what the handler reads and writes of the API server for the
	// request, all of it together; the zero Deadline bounds each such read by
	// budget.DefaultTimeout from the read (holdfast check, tests).
	Deadline budget.Deadline
}

// Decision is the outcome of evaluating every applicable policy.
type Decision struct {
	decision.Violations
	// Starts is a request that makes a template start rolling out (or a CREATE, whose
	// rollout counts as one): admitted, it is recorded in the fleet ledgers.
	Starts bool
	// Writers name who wrote the refused request and the template it changes; the
	// handler sets them on a refusal, Decide never does.
	Writers *Writers
	// Applied names the policies that selected the workload (before or after the change)
	// and applied to the request, in the order of Input.Policies: the metrics count the
	// request once under each.
	Applied decision.Applied
}

// Decide evaluates every policy that applies to the request. It does no I/O. An error is
// a pod template that a rule had to read and that does not decode: the request is bad.
func Decide(in Input) (Decision, error) { return decideWithout(in, nil) }

// checks names the checks Decide runs, each a mutant of the mutation test removes in turn
// (model_test.go): the explorer must catch every one by an outcome in the cluster.
var checks = []string{RuleArgsMatchReplicas, RuleStrategy, checkStaged, checkScale, RuleSettle, RuleMinInterval,
	RuleRevertWindow, checkThird, RuleWindow, RuleConcurrency, checkCap, checkPerNamespace, checkSlotLifetime,
	budget.RuleSharedBudget, RuleSelection, checkEnteredChangeName, RuleExemption}

// The checks of I7 (templates.go), named apart from the rules they report under.
const (
	checkStaged = "settle/stagedEdit"
	checkScale  = "settle/scaleDuringRollout"
	checkThird  = "settle/thirdTemplate"
)

// skipper names the checks a mutant of the mutation test removes; nil removes none.
type skipper func(check string) bool

func (s skipper) runs(check string) bool { return s == nil || !s(check) }

// decideWithout is Decide without the checks skip names.
func decideWithout(in Input, skip skipper) (Decision, error) {
	d, err := decideRequest(in, skip)
	if err != nil {
		return d, err
	}
	starts := currentStarts(in)
	if len(starts) == 0 {
		return d, nil
	}
	// The new ordinals, or the replaced pod, start a template the request does not name:
	// each is judged as that start by the rules that judge one, beside the request's own
	// verdict (a settle finding once per policy). Not by the fleet limit nor the shared
	// budget (a held workload is not in flight, as a replacement is not).
	only := func(c string) bool { return !skip.runs(c) || !slices.Contains(startChecks, c) }
	for _, t := range starts {
		c, err := decideRequest(startOf(in, t), only)
		if err != nil {
			return Decision{}, err
		}
		for _, v := range c.Violations {
			if v.Rule == RuleSettle && slices.ContainsFunc(d.Violations, func(o decision.Violation) bool { return o.Policy == v.Policy && o.Rule == RuleSettle }) {
				continue
			}
			if in.Replaces == "" {
				// A replacement's refusal says so already (the eviction guard's, the relabel's).
				v.Message = fmt.Sprintf("kube makes the new ordinals of %s (below its partition) from its current revision%s, "+
					"which no pod runs yet, so the change starts that template: %s", in.New, revisionNamed(in.Old.Rollout.CurrentRevision), v.Message)
			}
			d.Violations = append(d.Violations, v)
		}
	}
	d.Violations.SortByPolicy()
	return d, nil
}

// startChecks are the checks that judge a start of a template (the rest read the request's
// own object, or hold what is in flight).
var startChecks = []string{RuleSettle, RuleMinInterval, RuleRevertWindow, checkThird, RuleWindow, RuleExemption}

// revisionNamed is " <name>" for a revision the status names, "" for none.
func revisionNamed(revision string) string {
	if revision == "" {
		return ""
	}
	return " " + revision
}

// decideRequest is decideWithout for the request as it is.
func decideRequest(in Input, skip skipper) (Decision, error) {
	var rs revisionState
	if edits := in.Operation == admissionv1.Update && in.TemplateChanged; edits || MayStart(in) || growsHeld(in) {
		flags := flagsOf(in)
		scale := false
		if edits {
			var err error
			if scale, err = isScale(in.Old, in.New, flags); err != nil {
				return Decision{}, err
			}
		}
		switch {
		case MayStart(in):
			rs = revisionsOf(in, flags, scale && !liftsHold(in))
			rs.scale = scale
		case startsStaged(in):
			// Held, yet kube creates the first pods of its template now: a start, whatever
			// its flags (a scale that makes them is no scale of a template with pods).
			rs = revisionsOf(in, flags, false)
		default:
			// A held workload's scale is judged too (I7): kube creates its template's pods
			// once the hold lifts, or at once for a StatefulSet's ordinals above a partition.
			rs = revisionState{flags: flags, scale: scale}
		}
	}
	// Lifting a hold off an unfinished rollout restarts it: the fleet limit and the shared
	// budget count it as a start (else pause, let another start, resume walks past both).
	// So does lowering a partition below ordinals on another revision.
	resumes := in.Operation == admissionv1.Update && MayStart(in) && rs.current != nil &&
		((in.Old.Rollout.Held && rs.current.Finished == nil) || lowersPartition(in))
	// So does a CREATE that does not hold what the deleted workload of its name held, over
	// pods of another template it adopts.
	resumes = resumes || (in.Operation == admissionv1.Create && MayStart(in) && rs.current != nil && rs.current.Finished == nil &&
		rs.timeline.Held && !in.New.Rollout.Held && adoptsOthers(in))
	rs.resumes = resumes
	rs.firstPods = !rs.start && rs.current != nil && rs.current.Template == rs.target && rs.current.Finished == nil &&
		rs.current.Available == 0 && (resumes || startsStaged(in)) && firstPodsOf(in, rs.current)
	// A CREATE starts what it adopts: a workload of fresh pods has never served, and holds
	// no slot of a fleet limit nor spends a shared budget (rules.concurrency).
	d := Decision{Starts: rs.start || resumes || (MayStart(in) && in.Operation == admissionv1.Create && len(liveRevisions(in.History)) > 0)}
	for i := range in.Policies {
		p := &in.Policies[i]
		exempt, grant := policy.ExemptAt(p.Spec.Exemptions, in.User, in.Now)
		if !skip.runs(RuleExemption) {
			exempt, grant = false, nil
		}
		if p.Spec.Suspend || (exempt && grant == nil) {
			continue
		}
		// A selector that cannot be evaluated (stored while the policy webhook was down)
		// selects nothing: one broken policy must not refuse every workload change in the
		// cluster. Its status is Ready=False and alerts (HoldfastPolicyNotInForce).
		selectsNew, selectedOld, _ := selection(p, in)
		action := decision.ActionFor(p.Spec.Mode)
		if !selectsNew && !selectedOld {
			continue
		}
		d.Applied.Add(p.Name)
		found, err := check(in, &p.Spec.Rules, &rs, skip)
		if err != nil {
			return Decision{}, err
		}
		if skip.runs(RuleWindow) {
			found = append(found, checkWindows(in, &p.Spec, &rs, resumes)...)
		}
		// A pod's replacement (Replaces) is held by neither: an OnDelete workload is not in
		// flight, and its eviction is the eviction guard's to judge under the shared budget.
		if (p.Spec.Rules.Concurrency != nil || p.Spec.Rules.SharedBudget != nil) && (rs.start || resumes) && !rs.cancel && startsNow(in) && in.Replaces == "" {
			// Neither holds a rollback or the fix of a stalled rollout.
			if stalled, _ := rs.stalled(in, p.Spec.Rules.Settle); !stalled {
				if p.Spec.Rules.Concurrency != nil && skip.runs(RuleConcurrency) {
					found = append(found, checkConcurrency(in, p, skip)...)
				}
				if p.Spec.Rules.SharedBudget != nil && skip.runs(budget.RuleSharedBudget) {
					found = append(found, checkSharedBudget(in, p)...)
				}
			}
		}
		if selectsNew && !selectedOld && in.Operation == admissionv1.Update && skip.runs(RuleSelection) {
			found = append(found, checkEntering(in)...)
			if skip.runs(checkEnteredChangeName) {
				found = append(found, checkEnteredChange(in, &p.Spec)...)
			}
		}
		if selectedOld && !selectsNew && in.Operation == admissionv1.Update && skip.runs(RuleSelection) {
			// Otherwise a relabel, then a free change, walks around every rule.
			found = append(found, finding{rule: RuleSelection, field: field.NewPath("metadata", "labels"), message: fmt.Sprintf(
				"%s: the update takes the workload out of the policy's selection (its labels no longer match spec.targets); "+
					"a workload leaves a policy by a change to the policy, or through an exempt requester", in.New)})
		}
		if grant != nil {
			// A temporary exemption lets it through: on record, with its reason.
			if len(found) > 0 {
				d.Violations = append(d.Violations, exempted(p.Name, grant, found))
			}
			continue
		}
		for _, f := range found {
			d.Violations = append(d.Violations, decision.Violation{Policy: p.Name, Rule: f.rule,
				Action: action, Field: f.field, Message: f.message})
		}
	}
	d.Violations.SortByPolicy()
	return d, nil
}

// flagsOf is the argsMatchReplicas flags of the policies that select the workload
// (whichever policy holds the flag and whichever holds the revision rules, and whoever is
// exempt from which): a change whose only template difference is those flags following
// spec.replicas is a scale (I4).
func flagsOf(in Input) []v1alpha1.ArgMatchesReplicas {
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
	return flags
}

// Applies reports whether Decide evaluates the policy for the request: it is not
// suspended and selects the new object or the old one (a selector that cannot be
// evaluated selects nothing). Offline tools name the policies each change was judged by
// with it.
func Applies(p *v1alpha1.RolloutPolicy, in Input) bool {
	if p.Spec.Suspend {
		return false
	}
	selectsNew, selectedOld, _ := selection(p, in)
	return selectsNew || selectedOld
}

// selection is whether a policy selects the new object and the old one (none on CREATE).
// A policy applies when it selects either, so relabelling a workload cannot carry a change
// past it, and an UPDATE that takes the workload out of its selection is refused. An error
// means the policy's selectors are invalid: it then selects nothing.
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

// check applies one policy's rules to the request; rs is what the request does to the
// workload's revisions, the same for every policy.
func check(in Input, rules *v1alpha1.RolloutRules, rs *revisionState, skip skipper) ([]finding, error) {
	var out []finding
	// An eviction that replaces a pod (Replaces) changes nothing of the spec: the lints
	// of what the spec says are the workload's own requests'.
	lints := in.Replaces == ""
	if lints && skip.runs(RuleArgsMatchReplicas) {
		found, err := checkArgsMatchReplicas(in.New, rules.ArgsMatchReplicas)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	if lints && skip.runs(RuleStrategy) {
		found, err := checkStrategy(in, rules.Strategy)
		if err != nil {
			return nil, err
		}
		out = append(out, found...)
	}
	if skip.runs(checkStaged) {
		out = append(out, checkStagedEdit(in, rules)...)
	}
	if skip.runs(checkScale) {
		out = append(out, checkScaleDuringRollout(in, rules, rs)...)
	}
	if !rs.start {
		if rs.resumes && skip.runs(checkThird) {
			out = append(out, checkThirdTemplate(in, rules, rs)...) // kube creates the held template's pods now
		}
		if skip.runs(RuleMinInterval) {
			out = append(out, checkFirstPods(in, rules, rs)...)
		}
		// Only a request that starts rolling out a template is held to the revision rules
		// (and one that gives the current revision its first pods, to minInterval).
		return out, nil
	}
	revs := checkRevision(in, rules, rs)
	if skip != nil {
		revs = slices.DeleteFunc(revs, func(f finding) bool { return !skip.runs(f.rule) })
	}
	out = append(out, revs...)
	if !hasRule(out, RuleSettle) && skip.runs(checkThird) {
		out = append(out, checkThirdTemplate(in, rules, rs)...)
	}
	return out, nil
}

// hasRule reports a finding of the rule among found.
func hasRule(found []finding, rule string) bool {
	for _, f := range found {
		if f.rule == rule {
			return true
		}
	}
	return false
}

// isScale reports a change whose only template difference is argsMatchReplicas flags,
// following a replicas change: both templates have the same shape (workload.Template.Shape).
func isScale(old, new *workload.Workload, flags []v1alpha1.ArgMatchesReplicas) (bool, error) {
	if len(flags) == 0 || old.Replicas == nil || new.Replicas == nil || *old.Replicas == *new.Replicas {
		return false, nil
	}
	a, err := old.Template.Shape(flags)
	if err != nil {
		return false, fmt.Errorf("oldObject: %w", err)
	}
	b, err := new.Template.Shape(flags)
	if err != nil {
		return false, fmt.Errorf("object: %w", err)
	}
	return a == b, nil
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
		f, ok, err := w.Template.Flag(r.Container, r.Flag)
		if err != nil {
			return nil, fmt.Errorf("object: %w", err)
		}
		if !ok {
			continue // The rule guards workloads that run this container.
		}
		i, value, path, found := f.Container, f.Value, f.At, f.Found
		switch {
		case !found:
			out = append(out, finding{rule: RuleArgsMatchReplicas, field: containersPath.Index(i), message: fmt.Sprintf(
				"%s: container %q has no %s flag, which must equal spec.replicas (%d); add %s=%d",
				w, r.Container, r.Flag, replicas, r.Flag, replicas)})
		case value != strconv.Itoa(int(replicas)):
			out = append(out, finding{rule: RuleArgsMatchReplicas, field: containersPath.Index(i).Child(path.Name).Index(path.Index), message: fmt.Sprintf(
				"%s: container %q has %s=%s but spec.replicas is %d; change replicas and %s together, to %s=%d",
				w, r.Container, r.Flag, value, replicas, r.Flag, r.Flag, replicas)})
		}
	}
	return out, nil
}
