package rollout

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestStateRulesSplitTheDecision holds StateRules and Without to Decide over generated
// requests, policies and cluster states: (1) a rule of StateReads refuses a request only
// when StateRules names it, so that what an offline tool decides without the cluster's
// state is never a pass the state would have refused; (2) Decide with the named rules
// taken out (Without) finds exactly the other findings, so that those are decided from the
// request alone, whatever the state.
func TestStateRulesSplitTheDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(27, 3))
	pick := func(n int) int { return rng.IntN(n) }
	kinds := []v1alpha1.WorkloadKind{v1alpha1.KindDeployment, v1alpha1.KindStatefulSet, v1alpha1.KindDaemonSet}
	modes := []v1alpha1.Mode{v1alpha1.ModeEnforce, v1alpha1.ModeWarn, v1alpha1.ModeAudit}
	rollouts := []workload.Rollout{
		{},
		{InProgress: true, Mixed: true, Progress: workload.Progress{Kind: v1alpha1.KindDeployment, Updated: 1, Target: 3, Available: 2, Want: 3, Total: 3}},
		{InProgress: true, DeadlineExceeded: true, ProgressDeadline: 10 * time.Minute},
		{Held: true, Paused: true},
	}
	agents := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
		MaxUnavailable: ptrIntOrString(intstr.FromInt32(1)), Cooldown: &metav1.Duration{Duration: time.Minute}}}
	tmpl := func(tag, serverCount string) *corev1.PodTemplateSpec {
		t := template(tag, serverCount)
		if pick(3) == 0 {
			t.Spec.Containers[1].Args = nil // no flag
		}
		return t
	}
	policyOf := func(i int) v1alpha1.RolloutPolicy {
		p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: string(rune('a' + i))}, Spec: v1alpha1.RolloutPolicySpec{Mode: modes[pick(3)]}}
		r := &p.Spec.Rules
		if pick(2) == 0 {
			r.Settle = &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}
		}
		if pick(2) == 0 {
			r.MinInterval = &metav1.Duration{Duration: time.Duration(1+pick(60)) * time.Minute}
		}
		if pick(2) == 0 {
			r.RevertWindow = &metav1.Duration{Duration: time.Duration(1+pick(60)) * time.Minute}
		}
		if pick(2) == 0 {
			r.ArgsMatchReplicas = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
		}
		if pick(2) == 0 {
			r.Strategy = &v1alpha1.StrategyRule{MinReadySeconds: ptr.To[int32](int32(pick(20)))}
		}
		if pick(3) == 0 {
			r.Concurrency = &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(int32(1 + pick(2)))}
		}
		if pick(3) == 0 {
			r.SharedBudget = &v1alpha1.SharedBudget{DisruptionPolicy: "agents"}
		}
		if pick(3) == 0 {
			p.Spec.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 9 * * *", Duration: metav1.Duration{Duration: 8 * time.Hour}, Action: v1alpha1.WindowDeny}}
		}
		if pick(4) == 0 {
			p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "control-plane"}}
		}
		if pick(6) == 0 {
			p.Spec.Exemptions.Users = []string{"release-manager"}
		}
		return p
	}
	tags := []string{"A", "B", "C"}
	counts := map[string]int{}
	for n := range 3000 {
		kind := kinds[pick(3)]
		oldTag, newTag := tags[pick(3)], tags[pick(3)]
		oldCount, newCount := int32(3), int32(3+pick(2)*2)
		old := gen(wl(kind, oldCount, tmpl(oldTag, "3"), rollouts[pick(4)]), 7)
		obj := gen(wl(kind, newCount, tmpl(newTag, string(rune('0'+newCount))), rollouts[pick(2)]), 8)
		if pick(3) == 0 {
			obj.Labels = map[string]string{"tier": "control-plane"}
		}
		if pick(3) == 0 {
			old.Labels = map[string]string{"tier": "control-plane"}
		}
		in := Input{Operation: admissionv1.Update, Old: old, New: obj, Now: now.Add(time.Duration(pick(24)) * time.Hour),
			User: authenticationv1.UserInfo{Username: []string{"operator", "release-manager"}[pick(2)]}}
		if pick(5) == 0 {
			in.Operation, in.Old = admissionv1.Create, nil
		}
		var policies []v1alpha1.RolloutPolicy
		for i := range 1 + pick(3) {
			policies = append(policies, policyOf(i))
		}
		in.Policies = policies
		// The cluster's state: a journal or none, a history, fleets and evictions.
		A, B, C := template("A", "3"), template("B", "3"), template("C", "3")
		switch pick(4) {
		case 0:
			in.Journal = jr(7, jrev(A, 2*time.Hour, time.Hour, 90*time.Minute), jrev(B, time.Hour, 0, 50*time.Minute))
		case 1:
			in.Journal = jr(7, jrev(A, time.Hour, 20*time.Second, 50*time.Minute), jrev(B, 20*time.Second, 0, -1))
		case 2:
			in.Journal = jr(7, jrev(C, 3*time.Hour, 0, 2*time.Hour))
		}
		if in.Journal != nil {
			in.Journal.Kind = kind
		}
		if pick(2) == 0 {
			in.History = history.History{Revisions: []history.Revision{rev(1, A, time.Hour, 2), rev(2, B, 20*time.Second, 1)}, LastActivity: now}
		}
		in.Fleets, in.Evictions = map[string]Fleet{}, map[string]budget.Evictions{}
		for _, p := range policies {
			in.Fleets[p.Name] = Fleet{Selected: 9, InFlight: []string{"Deployment t1/kube-apiserver", "Deployment t2/kube-apiserver"}[:pick(3)]}
			in.Evictions[p.Name] = budget.Evictions{Policy: agents, Records: []budget.Eviction{{Pod: "p", UID: "u", At: in.Now.Add(-time.Duration(pick(120)) * time.Second)}}[:pick(2)]}
		}
		if in.Old != nil {
			in.TemplateChanged = !workload.SameTemplate(in.Old.Template, in.New.Template)
		}

		full, err := Decide(in)
		if err != nil {
			t.Fatal(err)
		}
		state := map[string][]string{}
		split := in
		split.Policies = nil
		for i := range policies {
			rules, err := StateRules(&policies[i], in)
			if err != nil {
				t.Fatal(err)
			}
			state[policies[i].Name] = rules
			split.Policies = append(split.Policies, Without(policies[i], rules...))
		}
		var rest decision.Violations
		for _, v := range full.Violations {
			_, reads := StateReads[v.Rule]
			switch named := slices.Contains(state[v.Policy], v.Rule); {
			case reads && !named:
				t.Fatalf("case %d: %s refused by %s/%s, which StateRules does not name (%v): %v", n, in.Operation, v.Policy, v.Rule, state[v.Policy], v)
			case named:
				counts[v.Rule]++
			default:
				rest = append(rest, v)
			}
		}
		decided, err := Decide(split)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(rendered(rest), rendered(decided.Violations)); diff != "" {
			t.Fatalf("case %d: without the rules StateRules names, Decide finds (-want +got):\n%s", n, diff)
		}
	}
	// The generator reaches every rule that reads the state.
	for rule := range StateReads {
		if counts[rule] == 0 {
			t.Errorf("no generated request was refused by %s: widen the generator", rule)
		}
	}
}

// rendered is each violation as the webhook reports it, with its action and field.
func rendered(vs decision.Violations) []string {
	var out []string
	for _, v := range vs {
		f := ""
		if v.Field != nil {
			f = v.Field.String()
		}
		out = append(out, v.Action.String()+" "+f+" "+v.String())
	}
	return out
}

// TestStateRulesNameOnlyWhatMayStart: a request that cannot start a rollout is decided
// from the request alone, whatever rules a policy enables.
func TestStateRulesNameOnlyWhatMayStart(t *testing.T) {
	dep, ds := v1alpha1.KindDeployment, v1alpha1.KindDaemonSet
	A, B := template("A", "3"), template("B", "3")
	all := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "all"}, Spec: v1alpha1.RolloutPolicySpec{
		Windows: []v1alpha1.Window{{Schedule: "0 9 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}},
		Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}, MinInterval: &metav1.Duration{Duration: time.Minute},
			RevertWindow: &metav1.Duration{Duration: time.Minute}, Concurrency: &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(1)},
			SharedBudget:      &v1alpha1.SharedBudget{DisruptionPolicy: "agents"},
			ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}}}}
	relabelled := wl(dep, 3, A, workload.Rollout{})
	relabelled.Labels = map[string]string{"team": "platform"}
	paused := wl(dep, 3, A, workload.Rollout{Held: true, Paused: true})
	every := []string{RuleSettle, RuleMinInterval, RuleRevertWindow, RuleWindow, RuleConcurrency, budget.RuleSharedBudget}
	for name, tc := range map[string]struct {
		op       admissionv1.Operation
		old, obj *workload.Workload
		mut      func(*v1alpha1.RolloutPolicy)
		user     string
		want     []string
	}{
		"a template change reads every state rule": {op: admissionv1.Update, old: wl(dep, 3, A, workload.Rollout{}), obj: wl(dep, 3, B, workload.Rollout{}), want: every},
		"a resume reads them too":                  {op: admissionv1.Update, old: paused, obj: wl(dep, 3, A, workload.Rollout{}), want: every},
		// Of fresh pods: the shared budget reads nothing (over live pods it reads the
		// ledgers of the workloads of its name before it).
		"a CREATE of fresh pods reads all but the shared budget": {op: admissionv1.Create, obj: wl(dep, 3, A, workload.Rollout{}), want: every[:5]},
		"a labels-only update reads none":                        {op: admissionv1.Update, old: wl(dep, 3, A, workload.Rollout{}), obj: relabelled},
		// It changes the template: settle counts the templates with live pods (I7).
		"a flag-following scale reads settle": {op: admissionv1.Update, old: wl(dep, 3, A, workload.Rollout{}), obj: wl(dep, 5, template("A", "5"), workload.Rollout{}), want: every[:1]},
		"an OnDelete edit reads settle": {op: admissionv1.Update, old: wl(ds, 3, A, workload.Rollout{OnDelete: true, Held: true}),
			obj: wl(ds, 3, B, workload.Rollout{OnDelete: true, Held: true}), want: every[:1]},
		"a bare scale reads none":                  {op: admissionv1.Update, old: wl(dep, 3, A, workload.Rollout{}), obj: wl(dep, 5, A, workload.Rollout{})},
		"a change to a paused workload reads none": {op: admissionv1.Update, old: paused, obj: wl(dep, 3, B, workload.Rollout{Held: true, Paused: true})},
		"a suspended policy reads none": {op: admissionv1.Update, old: wl(dep, 3, A, workload.Rollout{}), obj: wl(dep, 3, B, workload.Rollout{}),
			mut: func(p *v1alpha1.RolloutPolicy) { p.Spec.Suspend = true }},
		"an exempt requester reads none": {op: admissionv1.Update, old: wl(dep, 3, A, workload.Rollout{}), obj: wl(dep, 3, B, workload.Rollout{}),
			mut: func(p *v1alpha1.RolloutPolicy) { p.Spec.Exemptions.Users = []string{"oncall"} }, user: "oncall"},
		"a policy that selects neither object reads none": {op: admissionv1.Update, old: wl(dep, 3, A, workload.Rollout{}), obj: wl(dep, 3, B, workload.Rollout{}),
			mut: func(p *v1alpha1.RolloutPolicy) {
				p.Spec.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet}
			}},
	} {
		t.Run(name, func(t *testing.T) {
			p := *all.DeepCopy()
			if tc.mut != nil {
				tc.mut(&p)
			}
			in := Input{Operation: tc.op, Old: tc.old, New: tc.obj, Now: now, User: authenticationv1.UserInfo{Username: tc.user}, Policies: []v1alpha1.RolloutPolicy{p}}
			if tc.old != nil {
				in.TemplateChanged = !workload.SameTemplate(tc.old.Template, tc.obj.Template)
			}
			got, err := StateRules(&p, in)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("StateRules (-want +got):\n%s", diff)
			}
		})
	}
}
