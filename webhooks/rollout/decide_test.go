package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// finding is what a test expects of a violation: messages are for people, so tests
// assert who objected, with which rule, how strictly and where.
type want struct {
	Policy, Rule, Field string
	Action              decision.Action
}

func summarize(d Decision) []want {
	var out []want
	for _, v := range d.Violations {
		w := want{Policy: v.Policy, Rule: v.Rule, Action: v.Action}
		if v.Field != nil {
			w.Field = v.Field.String()
		}
		out = append(out, w)
	}
	return out
}

// decide is Decide on an input as the handler's decode completes it: an UPDATE's
// templates compared once.
func decide(t testing.TB, in Input) Decision {
	t.Helper()
	if in.Operation == admissionv1.Update && in.Old != nil {
		in.TemplateChanged = !workload.SameTemplate(in.Old.Template, in.New.Template)
	}
	d, err := Decide(in)
	if err != nil {
		t.Fatalf("Decide: %v", err)
	}
	return d
}

func mustWorkload(t *testing.T, obj *appsv1.Deployment) *workload.Workload {
	t.Helper()
	w, err := workload.From(obj)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func konnectivity(replicas int32, serverCount string) *utiltesting.DeploymentWrapper {
	return utiltesting.MakeDeployment("tenant-a", "kube-apiserver").Replicas(replicas).
		Label("component", "control-plane").
		Container("konnectivity-server", "--mode=grpc", "--server-count="+serverCount)
}

func TestDecideArgsMatchReplicas(t *testing.T) {
	serverCount := utiltesting.MakeRolloutPolicy("konnectivity").ArgMatchesReplicas("konnectivity-server", "--server-count")
	argsField := "spec.template.spec.containers[1].args[1]"
	operator := authenticationv1.UserInfo{Username: "system:serviceaccount:kamaji-system:kamaji", Groups: []string{"system:serviceaccounts"}}

	cases := map[string]struct {
		op       admissionv1.Operation
		old, obj *appsv1.Deployment
		policies []*v1alpha1.RolloutPolicy
		user     authenticationv1.UserInfo
		nsLabels map[string]string
		want     []want
		action   decision.Action
	}{
		"create with matching flag is allowed": {
			op: admissionv1.Create, obj: konnectivity(3, "3").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			action:   decision.Allow,
		},
		"create with mismatched flag is denied at the flag": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			want:     []want{{"konnectivity", RuleArgsMatchReplicas, argsField, decision.Deny}},
			action:   decision.Deny,
		},
		"scale without the flag is denied": {
			op: admissionv1.Update, old: konnectivity(3, "3").Obj(), obj: konnectivity(5, "3").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			want:     []want{{"konnectivity", RuleArgsMatchReplicas, argsField, decision.Deny}},
			action:   decision.Deny,
		},
		"scale with the flag is allowed": {
			op: admissionv1.Update, old: konnectivity(3, "3").Obj(), obj: konnectivity(5, "5").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			action:   decision.Allow,
		},
		"flag given as a separate argument is read": {
			op: admissionv1.Create,
			obj: utiltesting.MakeDeployment("tenant-a", "kas").Replicas(2).
				Container("konnectivity-server", "--server-count", "3").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			want:     []want{{"konnectivity", RuleArgsMatchReplicas, "spec.template.spec.containers[1].args[1]", decision.Deny}},
			action:   decision.Deny,
		},
		"last occurrence of the flag wins": {
			op: admissionv1.Create,
			obj: utiltesting.MakeDeployment("tenant-a", "kas").Replicas(2).
				Container("konnectivity-server", "--server-count=1", "--server-count=2").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			action:   decision.Allow,
		},
		"missing flag in the named container is denied at the container": {
			op:       admissionv1.Create,
			obj:      utiltesting.MakeDeployment("tenant-a", "kas").Replicas(2).Container("konnectivity-server", "--mode=grpc").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			want:     []want{{"konnectivity", RuleArgsMatchReplicas, "spec.template.spec.containers[1]", decision.Deny}},
			action:   decision.Deny,
		},
		"workload without the container is not concerned": {
			op:       admissionv1.Create,
			obj:      utiltesting.MakeDeployment("tenant-a", "web").Replicas(3).Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Obj()},
			action:   decision.Allow,
		},
		"warn mode reports without denying": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Mode(v1alpha1.ModeWarn).Obj()},
			want:     []want{{"konnectivity", RuleArgsMatchReplicas, argsField, decision.Warn}},
			action:   decision.Warn,
		},
		"strictest of several policies wins and every violation is reported": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(),
			policies: []*v1alpha1.RolloutPolicy{
				utiltesting.MakeRolloutPolicy("audit").ArgMatchesReplicas("konnectivity-server", "--server-count").Mode(v1alpha1.ModeAudit).Obj(),
				serverCount.Clone().Obj(),
			},
			want: []want{
				{"audit", RuleArgsMatchReplicas, argsField, decision.Audit},
				{"konnectivity", RuleArgsMatchReplicas, argsField, decision.Deny},
			},
			action: decision.Deny,
		},
		"suspended policy is skipped": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Suspend().Obj()},
			action:   decision.Allow,
		},
		"exempt service account is skipped": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(), user: operator,
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().ExemptServiceAccounts("kamaji-system/kamaji").Obj()},
			action:   decision.Allow,
		},
		"other service account is not exempt": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(), user: operator,
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().ExemptServiceAccounts("kamaji-system/other").Obj()},
			want:     []want{{"konnectivity", RuleArgsMatchReplicas, argsField, decision.Deny}},
			action:   decision.Deny,
		},
		"policy for other kinds is skipped": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(),
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().Kinds(v1alpha1.KindStatefulSet).Obj()},
			action:   decision.Allow,
		},
		"namespace selector not matching skips the policy": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(), nsLabels: map[string]string{"tier": "dev"},
			policies: []*v1alpha1.RolloutPolicy{serverCount.Clone().NamespaceSelector(map[string]string{"tier": "tenant"}).Obj()},
			action:   decision.Allow,
		},
		"relabel out of the selector with a bad change is still denied": {
			op:  admissionv1.Update,
			old: konnectivity(3, "3").Obj(),
			obj: konnectivity(5, "3").Label("component", "moved").Obj(),
			policies: []*v1alpha1.RolloutPolicy{
				serverCount.Clone().Selector(map[string]string{"component": "control-plane"}).Obj(),
			},
			want: []want{{"konnectivity", RuleArgsMatchReplicas, argsField, decision.Deny},
				{"konnectivity", RuleSelection, "metadata.labels", decision.Deny}},
			action: decision.Deny,
		},
		// Scenario 8: a relabel out of the policy is the first step of a two-step walk
		// around every rule (once unselected, the workload takes any change).
		"8: a labels-only update that takes the workload out of an Enforce policy is refused": {
			op:  admissionv1.Update,
			old: konnectivity(3, "3").Obj(),
			obj: konnectivity(3, "3").Label("component", "moved").Obj(),
			policies: []*v1alpha1.RolloutPolicy{
				serverCount.Clone().Selector(map[string]string{"component": "control-plane"}).Obj(),
			},
			want:   []want{{"konnectivity", RuleSelection, "metadata.labels", decision.Deny}},
			action: decision.Deny,
		},
		"8: an exempt requester may take a workload out of a policy": {
			op:  admissionv1.Update,
			old: konnectivity(3, "3").Obj(),
			obj: konnectivity(3, "3").Label("component", "moved").Obj(),
			policies: []*v1alpha1.RolloutPolicy{
				serverCount.Clone().Selector(map[string]string{"component": "control-plane"}).ExemptServiceAccounts("kamaji-system/kamaji").Obj(),
			},
			user:   operator,
			action: decision.Allow,
		},
		"8: a relabel that keeps the workload selected is not held": {
			op:  admissionv1.Update,
			old: konnectivity(3, "3").Obj(),
			obj: konnectivity(3, "3").Label("team", "a").Obj(),
			policies: []*v1alpha1.RolloutPolicy{
				serverCount.Clone().Selector(map[string]string{"component": "control-plane"}).Obj(),
			},
			action: decision.Allow,
		},
		// Stored while the policy webhook was down, it must not refuse every workload
		// change in the cluster: it selects nothing, and its status says so.
		"an invalid selector selects nothing": {
			op: admissionv1.Create, obj: konnectivity(3, "1").Obj(),
			policies: []*v1alpha1.RolloutPolicy{
				serverCount.Clone().Selector(map[string]string{"bad key!": "x"}).Mode(v1alpha1.ModeEnforce).Obj(),
			},
			action: decision.Allow,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Operation: tc.op, New: mustWorkload(t, tc.obj), User: tc.user, NamespaceLabels: tc.nsLabels}
			if tc.old != nil {
				in.Old = mustWorkload(t, tc.old)
			}
			for _, p := range tc.policies {
				in.Policies = append(in.Policies, *p)
			}
			d := decide(t, in)
			if diff := cmp.Diff(tc.want, summarize(d)); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
			if got := d.Action(); got != tc.action {
				t.Errorf("action = %v, want %v", got, tc.action)
			}
		})
	}
}

func TestDecideDaemonSetHasNoReplicaCount(t *testing.T) {
	ds := &appsv1.DaemonSet{}
	ds.Name, ds.Namespace = "agent", "kube-system"
	ds.Spec.Template.Spec.Containers = []corev1.Container{{Name: "konnectivity-server", Args: []string{"--server-count=9"}}}
	w, err := workload.From(ds)
	if err != nil {
		t.Fatal(err)
	}
	p := utiltesting.MakeRolloutPolicy("p").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	d := decide(t, Input{Operation: admissionv1.Create, New: w, Policies: []v1alpha1.RolloutPolicy{*p}})
	if len(d.Violations) != 0 {
		t.Errorf("DaemonSet got violations %v, want none", d.Violations)
	}
}
