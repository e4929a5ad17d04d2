package rollout

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// kiamServer is a Deployment of agents' servers shaped as the strategy rule wants it:
// one per node, bounded NoExecute tolerations, probes, preStop, slow and careful rollout.
func kiamServer() *appsv1.Deployment {
	labels := map[string]string{"app": "kiam-server"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kiam-server"},
		Spec: appsv1.DeploymentSpec{
			Replicas:        ptr.To[int32](3),
			MinReadySeconds: 10,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					Containers: []corev1.Container{{Name: "kiam", Image: "kiam:4",
						ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{GRPC: &corev1.GRPCAction{Port: 443}}},
						Lifecycle:      &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 5}}}}},
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
							TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}}}},
					Tolerations: []corev1.Toleration{
						{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
						{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](30)},
					},
				},
			},
		},
	}
}

func TestStrategyLints(t *testing.T) {
	rule := &v1alpha1.StrategyRule{
		MaxUnavailable:                   ptr.To(intstr.FromString("34%")),
		MinReadySeconds:                  ptr.To[int32](10),
		DaemonSetSurge:                   true,
		ReadinessProbe:                   true,
		MinTerminationGracePeriodSeconds: ptr.To[int64](30),
		PreStop:                          true,
		AntiAffinityTopologyKey:          corev1.LabelHostname,
		MaxNoExecuteTolerationSeconds:    ptr.To[int64](60),
	}
	agent := func(mut func(*appsv1.DaemonSet)) *appsv1.DaemonSet {
		d := kiamServer()
		ds := &appsv1.DaemonSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.DaemonSetSpec{Template: d.Spec.Template, MinReadySeconds: 10,
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}}},
			Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 6}}
		ds.Spec.Template.Spec.Tolerations = nil // DaemonSets tolerate not-ready nodes by design
		if mut != nil {
			mut(ds)
		}
		return ds
	}
	server := func(mut func(*appsv1.Deployment)) *appsv1.Deployment {
		d := kiamServer()
		if mut != nil {
			mut(d)
		}
		return d
	}
	pod := "spec.template.spec."
	cases := map[string]struct {
		obj, old  any
		want      []string
		operation admissionv1.Operation
	}{
		"a well-shaped Deployment passes": {obj: server(nil)},
		"a well-shaped DaemonSet passes":  {obj: agent(nil)},
		"maxUnavailable above the limit (2 of 3 > 34% = 1)": {obj: server(func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2)) }),
			want: []string{"spec.strategy.rollingUpdate.maxUnavailable"}},
		"minReadySeconds below the minimum": {obj: server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 0 }),
			want: []string{"spec.minReadySeconds"}},
		"DaemonSet without surge": {obj: agent(func(d *appsv1.DaemonSet) {
			d.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}
		}), want: []string{"spec.updateStrategy.rollingUpdate"}},
		"missing readiness probe and preStop": {obj: server(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Containers[0].ReadinessProbe, d.Spec.Template.Spec.Containers[0].Lifecycle = nil, nil
		}), want: []string{pod + "containers[0].readinessProbe", pod + "containers[0].lifecycle.preStop"}},
		"short grace period": {obj: server(func(d *appsv1.Deployment) { d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5) }),
			want: []string{pod + "terminationGracePeriodSeconds"}},
		"anti-affinity on another key": {obj: server(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].TopologyKey = corev1.LabelTopologyZone
		}), want: []string{pod + "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"}},
		"anti-affinity selecting other pods": {obj: server(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector.MatchLabels = map[string]string{"app": "x"}
		}), want: []string{pod + "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"}},
		"unbounded and missing NoExecute tolerations": {obj: server(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
		}), want: []string{pod + "tolerations", pod + "tolerations"}},
		"a toleration longer than allowed": {obj: server(func(d *appsv1.Deployment) {
			d.Spec.Template.Spec.Tolerations[1].TolerationSeconds = ptr.To[int64](300)
		}), want: []string{pod + "tolerations"}},
		"an update keeping an old finding is not held up": {operation: admissionv1.Update,
			old: server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 0 }),
			obj: server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 0; d.Labels = map[string]string{"team": "x"} })},
		"an update introducing a finding is denied": {operation: admissionv1.Update,
			old: server(nil), obj: server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 0 }),
			want: []string{"spec.minReadySeconds"}},

		// Scenarios 5, 6 and 13, each case named by its number: I5, a strategy never gets
		// worse.
		"5: a finding the workload has may not get worse (maxUnavailable 2 -> 100%)": {operation: admissionv1.Update,
			old: server(func(d *appsv1.Deployment) { d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromInt32(2)) }),
			obj: server(func(d *appsv1.Deployment) {
				d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("100%"))
			}),
			want: []string{"spec.strategy.rollingUpdate.maxUnavailable"}},
		"5: a finding the workload has may not get worse (minReadySeconds 5 -> 0)": {operation: admissionv1.Update,
			old:  server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 5 }),
			obj:  server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 0 }),
			want: []string{"spec.minReadySeconds"}},
		"5: a finding the workload has may get better (minReadySeconds 0 -> 5)": {operation: admissionv1.Update,
			old: server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 0 }),
			obj: server(func(d *appsv1.Deployment) { d.Spec.MinReadySeconds = 5 })},
		"5: a toleration that was bounded may not become unbounded": {operation: admissionv1.Update,
			old:  server(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Tolerations[0].TolerationSeconds = ptr.To[int64](300) }),
			obj:  server(func(d *appsv1.Deployment) { d.Spec.Template.Spec.Tolerations[0].TolerationSeconds = nil }),
			want: []string{pod + "tolerations"}},
		"6: Recreate takes every pod down at once": {obj: server(func(d *appsv1.Deployment) {
			d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		}), want: []string{"spec.strategy.type"}},
		"13: a scale that makes a percentage take more pods down than allowed": {operation: admissionv1.Update,
			old: server(func(d *appsv1.Deployment) {
				d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("50%"))
			}),
			obj: server(func(d *appsv1.Deployment) {
				d.Spec.Strategy.RollingUpdate.MaxUnavailable = ptr.To(intstr.FromString("50%"))
				d.Spec.Replicas = ptr.To[int32](6)
			}),
			want: []string{"spec.strategy.rollingUpdate.maxUnavailable"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := Input{Operation: admissionv1.Create, New: view(t, tc.obj)}
			if tc.old != nil {
				in.Operation, in.Old = tc.operation, view(t, tc.old)
			}
			found, err := checkStrategy(in, rule)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range found {
				got = append(got, f.field.String())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
		})
	}
}

func view(t *testing.T, obj any) *workload.Workload {
	t.Helper()
	var w *workload.Workload
	var err error
	switch o := obj.(type) {
	case *appsv1.Deployment:
		w, err = workload.From(o)
	case *appsv1.DaemonSet:
		w, err = workload.From(o)
	}
	if err != nil || w == nil {
		t.Fatalf("workload.From(%T): %v", obj, err)
	}
	return w
}

// TestDaemonSetPercentagesRoundUp: kube's DaemonSet controller rounds maxUnavailable up,
// so 34% of 5 takes 2 pods down, more than a limit of 1.
func TestDaemonSetPercentagesRoundUp(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
		Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("34%"))}}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 5}}
	found, err := checkStrategy(Input{Operation: admissionv1.Create, New: view(t, ds)},
		&v1alpha1.StrategyRule{MaxUnavailable: ptr.To(intstr.FromInt32(1))})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || !strings.Contains(found[0].message, "lets 2 of 5 pods go at once") {
		t.Errorf("findings %+v, want maxUnavailable 34%% of 5 to take 2 down", found)
	}
}

// TestDaemonSetCreateResolvesAgainstNodes: the API server clears a CREATE's status, so a
// new DaemonSet has 0 pods to resolve a percentage against. Resolved against the nodes its
// node selector matches, maxUnavailable: 100% lets every agent go at once, more than a
// limit of 1: refused, where against 0 pods it passed.
func TestDaemonSetCreateResolvesAgainstNodes(t *testing.T) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromString("100%"))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}}}
	w, err := workload.From(ds)
	if err != nil {
		t.Fatal(err)
	}
	policies := []v1alpha1.RolloutPolicy{{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.RolloutPolicySpec{
		Rules: v1alpha1.RolloutRules{Strategy: &v1alpha1.StrategyRule{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}}}}
	in := Input{Operation: admissionv1.Create, New: w, Policies: policies}
	if !NeedsNodes(in) {
		t.Fatal("a DaemonSet CREATE under a strategy rule must read the nodes")
	}
	for nodes, want := range map[int32][]string{0: nil, 1: nil, 8: {RuleStrategy}} {
		in.Nodes = nodes
		d := decide(t, in)
		var got []string
		for _, v := range d.Violations {
			got = append(got, v.Rule)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d nodes: violated rules (-want +got):\n%s\n%v", nodes, diff, d.Violations)
		}
		if nodes == 8 && !strings.Contains(d.Violations[0].Message, "lets 8 of 8 pods go at once") {
			t.Errorf("the refusal does not count the nodes: %s", d.Violations[0].Message)
		}
	}
	in.Operation, in.Old = admissionv1.Update, w
	if NeedsNodes(in) {
		t.Error("an UPDATE carries the DaemonSet's status: it reads no nodes")
	}
}
