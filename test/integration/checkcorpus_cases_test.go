//go:build integration

package integration

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// The check-vs-webhook corpus: every rollout rule, on every kind it applies to, under every
// mode, with a change the rule finds wrong ("found": refused in Enforce, a warning in
// Warn, an audit annotation in Audit) and one it does not; scales; CREATEs and UPDATEs.
// Each case is a policy (shared by the cases of its group, in one namespace), the state
// the cluster is brought to (statuses as kube's controllers would write them, which
// holdfast's leader journals; ledgers as holdfast's guards would write them), and the
// change sent. The manifests spell out every field the API server would default where a
// verdict depends on it (strategies, terminationGracePeriodSeconds): check applies no
// workload defaults (an UPDATE's new object is the stored one, changed).

// Operations of the corpus: SCALE is the scale subresource of a Deployment or a StatefulSet.
const (
	opCreate = "CREATE"
	opUpdate = "UPDATE"
	opScale  = "SCALE"
)

var (
	corpusKinds = []v1alpha1.WorkloadKind{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet}
	corpusModes = []v1alpha1.Mode{v1alpha1.ModeEnforce, v1alpha1.ModeWarn, v1alpha1.ModeAudit}
)

// corpusRules are the rules the corpus holds check to the webhook on, with the kinds each
// applies to. exemption is the record of a change a temporary exemption lets through. (A
// policy whose selectors cannot be evaluated selects nothing, so it has no rule of its own
// here: TestInvalidPolicySelectsNothing and the guards' unit tests hold it.)
var corpusRules = map[string][]v1alpha1.WorkloadKind{
	rollout.RuleStrategy:          corpusKinds,
	rollout.RuleArgsMatchReplicas: {v1alpha1.KindDeployment, v1alpha1.KindStatefulSet}, // a DaemonSet has no replicas to match
	rollout.RuleSelection:         corpusKinds,
	rollout.RuleSettle:            corpusKinds,
	rollout.RuleMinInterval:       corpusKinds,
	rollout.RuleRevertWindow:      corpusKinds,
	rollout.RuleWindow:            corpusKinds,
	rollout.RuleConcurrency:       corpusKinds,
	budget.RuleSharedBudget:       corpusKinds,
	decision.RuleExemption:        corpusKinds,
}

// coverageCell is one combination the corpus must hold: a rule (or, for an operation's
// row, the operation) on a kind, under a mode, found or not.
type coverageCell struct {
	rule  string
	kind  v1alpha1.WorkloadKind
	mode  v1alpha1.Mode
	found bool
}

func (c coverageCell) String() string {
	outcome := "not found"
	if c.found {
		outcome = "found"
	}
	return fmt.Sprintf("%s on a %s in %s mode, %s", c.rule, c.kind, c.mode, outcome)
}

// requiredCoverage is the set the corpus must cover, stated here: every rule × every
// kind it applies to × every mode × found and not found; CREATE and UPDATE of every kind
// and the scale subresource of the scalable kinds, each found and not found.
func requiredCoverage() []coverageCell {
	var out []coverageCell
	for rule, kinds := range corpusRules {
		for _, k := range kinds {
			for _, m := range corpusModes {
				out = append(out, coverageCell{rule, k, m, true}, coverageCell{rule, k, m, false})
			}
		}
	}
	for _, k := range corpusKinds {
		for _, op := range []string{opCreate, opUpdate, opScale} {
			if op == opScale && !workload.Scalable(k) {
				continue
			}
			out = append(out, coverageCell{"op " + op, k, "", true}, coverageCell{"op " + op, k, "", false})
		}
	}
	return out
}

// checkCase is one change held to the webhook.
type checkCase struct {
	name  string
	rule  string // the rule the case is about
	kind  v1alpha1.WorkloadKind
	mode  v1alpha1.Mode
	op    string
	found bool // whether the rule finds the change wrong
	// group names the policy (and namespace) the case runs under; policy fills in its rules.
	group  string
	policy func(ns string, p *v1alpha1.RolloutPolicy)
	// setup runs once per group, after its policy (a workload in flight, a DisruptionPolicy).
	setup func(r *corpusRun)
	// create is the workload the case creates (CREATE) or starts from (UPDATE, SCALE).
	create func(kind v1alpha1.WorkloadKind, ns, name string) client.Object
	// start brings the created workload to the case's state and returns it as stored;
	// nil: created is where it starts.
	start func(r *corpusRun, obj client.Object) client.Object
	// change is the object an UPDATE sends, from the stored one; scaleTo the replicas a SCALE
	// (or a scaling UPDATE, with change) asks for.
	change  func(obj client.Object) client.Object
	scaleTo int32
}

// corpus is every case, generated rule by rule for each kind and mode.
func corpus() []checkCase {
	var out []checkCase
	add := func(c checkCase) {
		c.name = fmt.Sprintf("%s %s %s %s %s", c.rule, c.mode, c.op, c.kind, map[bool]string{true: "found", false: "not found"}[c.found]) + c.name
		out = append(out, c)
	}
	for _, mode := range corpusModes {
		group := func(name string) string { return name + "-" + strings.ToLower(string(mode)) }
		for _, kind := range corpusKinds {
			base := checkCase{kind: kind, mode: mode}
			with := func(c checkCase) checkCase {
				c.kind, c.mode = base.kind, base.mode
				return c
			}
			strategy := func(ns string, p *v1alpha1.RolloutPolicy) {
				p.Spec.Rules.Strategy = &v1alpha1.StrategyRule{MinReadySeconds: ptr.To[int32](10), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
			}
			// strategy: a CREATE and an UPDATE that make pods take no time to prove
			// themselves, and ones that keep 10 s.
			add(with(checkCase{rule: rollout.RuleStrategy, op: opCreate, found: true, group: group("strategy"), policy: strategy,
				create: workloadWith(minReady(0))}))
			add(with(checkCase{rule: rollout.RuleStrategy, op: opCreate, group: group("strategy"), policy: strategy,
				create: workloadWith(minReady(10))}))
			add(with(checkCase{rule: rollout.RuleStrategy, op: opUpdate, found: true, group: group("strategy"), policy: strategy,
				create: workloadWith(minReady(10)), change: edit(minReady(5))}))
			add(with(checkCase{rule: rollout.RuleStrategy, op: opUpdate, group: group("strategy"), policy: strategy,
				create: workloadWith(minReady(10)), change: edit(image("registry.example/main:2"))}))

			// argsMatchReplicas: a flag that does not follow the replicas, on a CREATE, a
			// full update and the scale subresource; a flag-following scale.
			if kind != v1alpha1.KindDaemonSet {
				args := func(ns string, p *v1alpha1.RolloutPolicy) {
					p.Spec.Rules.ArgsMatchReplicas = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
				}
				add(with(checkCase{rule: rollout.RuleArgsMatchReplicas, op: opCreate, found: true, group: group("args"), policy: args,
					create: workloadWith(serverCount("1"))}))
				add(with(checkCase{rule: rollout.RuleArgsMatchReplicas, op: opCreate, group: group("args"), policy: args,
					create: workloadWith(serverCount("3"))}))
				add(with(checkCase{rule: rollout.RuleArgsMatchReplicas, op: opUpdate, found: true, group: group("args"), policy: args,
					create: workloadWith(serverCount("3")), change: edit(), scaleTo: 5}))
				add(with(checkCase{rule: rollout.RuleArgsMatchReplicas, op: opUpdate, group: group("args"), policy: args,
					create: workloadWith(serverCount("3")), change: edit(serverCount("5")), scaleTo: 5}))
				add(with(checkCase{rule: rollout.RuleArgsMatchReplicas, op: opScale, found: true, group: group("args"), policy: args,
					create: workloadWith(serverCount("3")), scaleTo: 5}))
				// A workload without the container scales freely.
				add(with(checkCase{rule: rollout.RuleArgsMatchReplicas, op: opScale, group: group("args"), policy: args,
					create: workloadWith(), scaleTo: 5}))
			} else {
				// A DaemonSet's flag is never held to a replica count it does not have.
				add(with(checkCase{rule: rollout.RuleArgsMatchReplicas, op: opCreate, group: group("args"), name: " (no replicas)",
					policy: func(ns string, p *v1alpha1.RolloutPolicy) {
						p.Spec.Rules.ArgsMatchReplicas = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
					}, create: workloadWith(serverCount("1"))}))
			}
			if kind == v1alpha1.KindDeployment {
				// A scale that resolves a percentage to more pods down at once than allowed;
				// one that keeps an absolute maxUnavailable.
				add(with(checkCase{rule: rollout.RuleStrategy, op: opScale, found: true, group: group("strategy"), policy: strategy, name: " (25% of 8)",
					create: workloadWith(minReady(10), maxUnavailable(intstr.FromString("25%"))), scaleTo: 8}))
				add(with(checkCase{rule: rollout.RuleStrategy, op: opScale, group: group("strategy"), policy: strategy, name: " (1 of 8)",
					create: workloadWith(minReady(10)), scaleTo: 8}))
			}

			// selection: a relabel out of the policy's selection, and one that stays in.
			selected := func(ns string, p *v1alpha1.RolloutPolicy) {
				p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "guarded"}}
				p.Spec.Rules.ArgsMatchReplicas = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
			}
			add(with(checkCase{rule: rollout.RuleSelection, op: opUpdate, found: true, group: group("selection"), policy: selected,
				create: workloadWith(label("tier", "guarded")), change: edit(label("tier", "elsewhere"))}))
			add(with(checkCase{rule: rollout.RuleSelection, op: opUpdate, group: group("selection"), policy: selected,
				create: workloadWith(label("tier", "guarded")), change: edit(label("team", "platform"))}))

			// settle: a new revision while the current one rolls out; one after it finished;
			// a CREATE, which adopts nothing.
			settle := func(ns string, p *v1alpha1.RolloutPolicy) { p.Spec.Rules.Settle = &v1alpha1.SettleRule{} }
			add(with(checkCase{rule: rollout.RuleSettle, op: opUpdate, found: true, group: group("settle"), policy: settle,
				create: workloadWith(), start: rollingOut, change: edit(image("registry.example/main:2"))}))
			add(with(checkCase{rule: rollout.RuleSettle, op: opUpdate, group: group("settle"), policy: settle,
				create: workloadWith(), start: finished, change: edit(image("registry.example/main:2"))}))
			add(with(checkCase{rule: rollout.RuleSettle, op: opCreate, group: group("settle"), policy: settle, name: " (nothing to adopt)",
				create: workloadWith()}))

			// minInterval: a new revision moments after the last; one after the interval.
			add(with(checkCase{rule: rollout.RuleMinInterval, op: opUpdate, found: true, group: group("interval-hour"),
				policy: func(ns string, p *v1alpha1.RolloutPolicy) {
					p.Spec.Rules.MinInterval = &metav1.Duration{Duration: time.Hour}
				},
				create: workloadWith(), start: finished, change: edit(image("registry.example/main:2"))}))
			add(with(checkCase{rule: rollout.RuleMinInterval, op: opUpdate, group: group("interval-second"),
				policy: func(ns string, p *v1alpha1.RolloutPolicy) {
					p.Spec.Rules.MinInterval = &metav1.Duration{Duration: time.Second}
				},
				create: workloadWith(), start: finishedLongEnough(2 * time.Second), change: edit(image("registry.example/main:2"))}))

			// revertWindow: back to the template a finished rollout replaced; forward to a new one.
			revert := func(ns string, p *v1alpha1.RolloutPolicy) {
				p.Spec.Rules.RevertWindow = &metav1.Duration{Duration: time.Hour}
			}
			add(with(checkCase{rule: rollout.RuleRevertWindow, op: opUpdate, found: true, group: group("revert"), policy: revert,
				create: workloadWith(), start: rolledOutTwice, change: edit(image("registry.example/main:1"))}))
			add(with(checkCase{rule: rollout.RuleRevertWindow, op: opUpdate, group: group("revert"), policy: revert,
				create: workloadWith(), start: rolledOutTwice, change: edit(image("registry.example/main:3"))}))

			// window: a new revision during a Deny window; one during an open Allow window.
			add(with(checkCase{rule: rollout.RuleWindow, op: opUpdate, found: true, group: group("window-deny"),
				policy: func(ns string, p *v1alpha1.RolloutPolicy) {
					p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
					p.Spec.Windows = alwaysFrozen
				}, create: workloadWith(), start: finished, change: edit(image("registry.example/main:2"))}))
			add(with(checkCase{rule: rollout.RuleWindow, op: opUpdate, group: group("window-allow"),
				policy: func(ns string, p *v1alpha1.RolloutPolicy) {
					p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
					p.Spec.Windows = []v1alpha1.Window{{Name: "open", Schedule: "0 0 * * *", Duration: metav1.Duration{Duration: 24 * time.Hour}, Action: v1alpha1.WindowAllow}}
				}, create: workloadWith(), start: finished, change: edit(image("registry.example/main:2"))}))

			// concurrency: a start while another workload the policy selects rolls out,
			// with one allowed at once; a start with slots free.
			add(with(checkCase{rule: rollout.RuleConcurrency, op: opUpdate, found: true, group: group("fleet-full"),
				policy: func(ns string, p *v1alpha1.RolloutPolicy) {
					p.Spec.Rules.Concurrency = &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(1)}
				}, setup: blocker, create: workloadWith(), start: finished, change: edit(image("registry.example/main:2"))}))
			add(with(checkCase{rule: rollout.RuleConcurrency, op: opUpdate, group: group("fleet-free"),
				policy: func(ns string, p *v1alpha1.RolloutPolicy) {
					p.Spec.Rules.Concurrency = &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(int32(len(corpusKinds)))}
				}, create: workloadWith(), start: finished, change: edit(image("registry.example/main:2"))}))

			// sharedBudget: a start within the cooldown of an eviction of the workload's
			// pods under the shared DisruptionPolicy; one without evictions.
			shared := func(ns string, p *v1alpha1.RolloutPolicy) {
				p.Spec.Rules.SharedBudget = &v1alpha1.SharedBudget{DisruptionPolicy: ns + "-budget"}
			}
			add(with(checkCase{rule: budget.RuleSharedBudget, op: opUpdate, found: true, group: group("shared"), policy: shared, setup: sharedBudget,
				create: workloadWith(), start: evicted, change: edit(image("registry.example/main:2"))}))
			add(with(checkCase{rule: budget.RuleSharedBudget, op: opUpdate, group: group("shared"), policy: shared, setup: sharedBudget,
				create: workloadWith(), start: finished, change: edit(image("registry.example/main:2"))}))

			// exemption: a temporary exemption of the requester lets a CREATE through, on
			// record; an expired one does not.
			add(with(checkCase{rule: decision.RuleExemption, op: opCreate, found: true, group: group("exempt-live"),
				policy: exempting(time.Hour), create: workloadWith(minReady(0))}))
			add(with(checkCase{rule: decision.RuleExemption, op: opCreate, group: group("exempt-expired"),
				policy: exempting(-time.Hour), create: workloadWith(minReady(0))}))
		}
	}
	return out
}

// exempting is a strategy policy with a temporary exemption of the corpus's requester that
// expires in (negative: expired).
func exempting(in time.Duration) func(string, *v1alpha1.RolloutPolicy) {
	return func(ns string, p *v1alpha1.RolloutPolicy) {
		p.Spec.Rules.Strategy = &v1alpha1.StrategyRule{MinReadySeconds: ptr.To[int32](10)}
		p.Spec.Exemptions.Temporary = []v1alpha1.TemporaryExemption{{Users: []string{corpusRequester.Username},
			Expires: metav1.NewTime(time.Now().Add(in).Truncate(time.Second)), Reason: "CHG-27"}}
	}
}

// A mutation changes a workload of any kind.
type mutation func(obj client.Object)

// workloadWith is a workload of three replicas (two scheduled pods for a DaemonSet), with
// every field the rules read spelled out as the API server would default it, changed by
// the mutations.
func workloadWith(muts ...mutation) func(kind v1alpha1.WorkloadKind, ns, name string) client.Object {
	return func(kind v1alpha1.WorkloadKind, ns, name string) client.Object {
		return corpusWorkload(kind, ns, name, muts...)
	}
}

// workloadIn is workloadWith with mutations that depend on the namespace.
func workloadIn(muts ...func(ns string) mutation) func(kind v1alpha1.WorkloadKind, ns, name string) client.Object {
	return func(kind v1alpha1.WorkloadKind, ns, name string) client.Object {
		var m []mutation
		for _, f := range muts {
			m = append(m, f(ns))
		}
		return corpusWorkload(kind, ns, name, m...)
	}
}

// corpusWorkload builds a workload of the kind.
func corpusWorkload(kind v1alpha1.WorkloadKind, ns, name string, muts ...mutation) client.Object {
	labels := map[string]string{"app": name}
	tmpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name, "corpus": "pod"}},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30),
			Containers: []corev1.Container{{Name: "main", Image: "registry.example/main:1"}}},
	}
	meta := metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	var obj client.Object
	switch kind {
	case v1alpha1.KindDeployment:
		obj = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: sel, Template: tmpl,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}}}}
	case v1alpha1.KindStatefulSet:
		obj = &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: sel, Template: tmpl,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0)}}}}
	default:
		obj = &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
				MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}}}}
	}
	for _, m := range muts {
		m(obj)
	}
	return obj
}

// edit is the stored object, changed.
func edit(muts ...mutation) func(client.Object) client.Object {
	return func(obj client.Object) client.Object {
		c := obj.DeepCopyObject().(client.Object)
		for _, m := range muts {
			m(c)
		}
		return c
	}
}

func image(ref string) mutation {
	return func(obj client.Object) { workload.PodTemplate(obj).Spec.Containers[0].Image = ref }
}

func label(k, v string) mutation {
	return func(obj client.Object) {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[k] = v
		obj.SetLabels(l)
	}
}

// serverCount runs a konnectivity-server with --server-count=n beside the main container.
func serverCount(n string) mutation {
	return func(obj client.Object) {
		spec := &workload.PodTemplate(obj).Spec
		for i := range spec.Containers {
			if spec.Containers[i].Name == "konnectivity-server" {
				spec.Containers[i].Args = []string{"--server-count=" + n}
				return
			}
		}
		spec.Containers = append(spec.Containers, corev1.Container{Name: "konnectivity-server", Image: "registry.example/konnectivity:1",
			Args: []string{"--server-count=" + n}})
	}
}

func minReady(s int32) mutation {
	return func(obj client.Object) {
		switch o := obj.(type) {
		case *appsv1.Deployment:
			o.Spec.MinReadySeconds = s
		case *appsv1.StatefulSet:
			o.Spec.MinReadySeconds = s
		case *appsv1.DaemonSet:
			o.Spec.MinReadySeconds = s
		}
	}
}

func maxUnavailable(v intstr.IntOrString) mutation {
	return func(obj client.Object) {
		if d, ok := obj.(*appsv1.Deployment); ok {
			d.Spec.Strategy.RollingUpdate.MaxUnavailable = &v
		}
	}
}
