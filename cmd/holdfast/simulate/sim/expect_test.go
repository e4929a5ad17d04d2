package sim

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Each shipped scenario expects what its README line promises, and meets it; without
// its policies, the same timeline breaks at least one of those promises, so that the
// expectations measure holdfast and not the scenario.
func TestShippedScenariosKeepTheirPromises(t *testing.T) {
	for name, want := range map[string][]string{
		"operator-storm":       {"spec.expect.maxTemplatesWithLivePods", "spec.expect.maxRevisions", "spec.expect.convergedWithin"},
		"agent-drain":          {"spec.expect.maxUnavailable", "spec.expect.minEvictionGap", "spec.expect.drained"},
		"kiam-node-group-swap": {"spec.expect.minReady", "spec.expect.drained"},
		"bounded-hold":         {"spec.expect.maxUnavailable", "spec.expect.maxForced", "spec.expect.minReleased", "spec.expect.drained"},
		"delete-drain":         {"spec.expect.maxUnavailable", "spec.expect.drained"},
		"two-writers":          {"spec.expect.maxRevisions", "spec.expect.writersFighting", "spec.expect.refusalNamesWriters"},
	} {
		t.Run(name, func(t *testing.T) {
			sc := load(t, shipped(name))
			res := run(t, sc)
			var got []string
			for _, o := range res.Expectations {
				got = append(got, o.Expectation)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("expectations (-want +got):\n%s", diff)
			}
			if unmet := res.Unmet(); len(unmet) > 0 {
				t.Errorf("guarded, unmet: %v", unmet)
			}
			if off := run(t, unguarded(sc)); len(off.Unmet()) == 0 {
				t.Errorf("without its policies every expectation is met: %v", off.Expectations)
			}
		})
	}
}

// The storm converges on GEN4 once its last pod on GEN4 is Ready, and stays converged.
func TestConvergedSeconds(t *testing.T) {
	res := run(t, load(t, shipped("operator-storm")))
	if w := res.Workloads[0]; !w.Converged || w.ConvergedSeconds != res.Seconds {
		t.Errorf("converged at %gs, the run ended at %gs; want both when GEN4's last pod is Ready: %+v", w.ConvergedSeconds, res.Seconds, w)
	}
}

// Per-workload limits, a top-level limit over every workload, convergence that a policy
// refusing every change prevents, and drained: false (a budget of zero), each measured
// and worded.
func TestExpectations(t *testing.T) {
	// The operator of b never has what it wants: the run goes on until spec.until.
	res, err := Run(load(t, writeFile(t, `apiVersion: scenario.holdfast.dev/v1alpha1
kind: Scenario
metadata: {name: expect}
spec:
  nodes: [{prefix: node, count: 4}]
  podStartup: 2s
  until: 2m
  timeline:
  - at: 0s
    apply:
      workload: {kind: Deployment, namespace: x, name: b}
      template: {metadata: {labels: {app: b}}, spec: {containers: [{name: c, image: "b:2", args: [--server-count=3]}]}}
  - at: 1s
    drain: {nodes: [node-0], retryAfter: 5s}
  expect:
    maxUnavailable: 0
    drained: false
    workloads:
    - workload: {kind: Deployment, namespace: x, name: a}
      minReady: 2
      minEvictionGap: 1s
    - workload: {kind: Deployment, namespace: x, name: b}
      convergedWithin: 1m
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: a, namespace: x}
spec:
  replicas: 2
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: a}}
    spec:
      nodeSelector: {kubernetes.io/hostname: node-0}
      terminationGracePeriodSeconds: 1
      containers: [{name: c, image: "a:1"}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: b, namespace: x, labels: {app: b}}
spec:
  replicas: 1
  selector: {matchLabels: {app: b}}
  template: {metadata: {labels: {app: b}}, spec: {containers: [{name: c, image: "b:1"}]}}
---
apiVersion: holdfast.dev/v1alpha1
kind: DisruptionPolicy
metadata: {name: a}
spec:
  targets: {selector: {matchLabels: {app: a}}}
  maxUnavailable: 0
---
apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: b}
spec:
  targets: {selector: {matchLabels: {app: b}}}
  rules: {argsMatchReplicas: [{container: c, flag: --server-count}]}
`)))
	if err != nil || len(res.Errors) > 0 || !res.TimedOut {
		t.Fatalf("err %v, errors %v, timed out %t; want a run that times out", err, res.Errors, res.TimedOut)
	}
	var got []string
	for _, o := range res.Expectations {
		mark := "met"
		if !o.Met {
			mark = "UNMET"
		}
		got = append(got, mark+" "+o.String())
	}
	want := []string{
		"met spec.expect.maxUnavailable: Deployment x/a: 0 pods unavailable at once, want at most 0",
		"met spec.expect.maxUnavailable: Deployment x/b: 0 pods unavailable at once, want at most 0",
		"met spec.expect.workloads[0].minReady: Deployment x/a: 2 pods Ready at the fewest, want at least 2",
		"met spec.expect.workloads[0].minEvictionGap: Deployment x/a: 0 evictions, want at least 1s",
		"UNMET spec.expect.workloads[1].convergedWithin: Deployment x/b: not converged at the end (120s), after 63 refusals, want within 1m0s",
		"met spec.expect.drained: drain node-0: drained 0 of 1 nodes, want a node left undrained",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
}

// A limit for a workload the scenario never has is an error naming the field.
func TestExpectationOfAnUnknownWorkload(t *testing.T) {
	sc := load(t, writeFile(t, `apiVersion: scenario.holdfast.dev/v1alpha1
kind: Scenario
metadata: {name: x}
spec:
  nodes: [{prefix: node, count: 1}]
  timeline: []
  expect:
    workloads:
    - workload: {kind: Deployment, namespace: a, name: nope}
      maxUnavailable: 1
`))
	_, err := Run(sc)
	if err == nil || !strings.Contains(err.Error(), "document 1: spec.expect.workloads[0].workload: no Deployment a/nope in the scenario") {
		t.Fatalf("error %v", err)
	}
}

// The bounded hold keeps its promise because of afterMaxHold Release: under Hold, the
// cooldown outlasts the platform's deadline and it forces three agents out at once.
func TestBoundedHoldNeedsRelease(t *testing.T) {
	sc := load(t, shipped("bounded-hold"))
	held := *sc
	held.Objects = slices.Clone(sc.Objects)
	for i, o := range held.Objects {
		if p, ok := o.Object.(*v1alpha1.DisruptionPolicy); ok {
			p = p.DeepCopy()
			p.Spec.AfterMaxHold = v1alpha1.AfterMaxHoldHold
			held.Objects[i].Object = p
		}
	}
	res := run(t, &held)
	if d := res.Drains[0]; d.Forced != 3 || d.Released != 0 {
		t.Errorf("under afterMaxHold Hold the drain forced %d and released %d, want 3 forced, none released", d.Forced, d.Released)
	}
	var unmet []string
	for _, o := range res.Unmet() {
		unmet = append(unmet, o.Expectation)
	}
	if want := []string{"spec.expect.maxUnavailable", "spec.expect.maxForced", "spec.expect.minReleased"}; !cmp.Equal(want, unmet) {
		t.Errorf("unmet under Hold %v, want %v", unmet, want)
	}
}

// kubectl drain --disable-eviction meets no PodDisruptionBudget: only guardDeletes holds
// its DELETEs. Without it, the four agents are deleted at once.
func TestDeleteDrainNeedsGuardDeletes(t *testing.T) {
	sc := load(t, shipped("delete-drain"))
	open := *sc
	open.Objects = slices.Clone(sc.Objects)
	for i, o := range open.Objects {
		if p, ok := o.Object.(*v1alpha1.DisruptionPolicy); ok {
			p = p.DeepCopy()
			p.Spec.GuardDeletes = false
			open.Objects[i].Object = p
		}
	}
	res := run(t, &open)
	if q := res.Requests; q.DeletesAllowed != 4 || q.DeletesRefused != 0 || res.Workloads[0].MaxUnavailable != 4 {
		t.Errorf("without guardDeletes: %d deletes allowed, %d refused, %d agents down at once; want 4, 0, 4", q.DeletesAllowed, q.DeletesRefused, res.Workloads[0].MaxUnavailable)
	}
	res = run(t, sc)
	if q := res.Requests; q.DeletesAllowed != 1 || q.DeletesRefused != 3 || q.EvictionsAllowed != 0 {
		t.Errorf("with guardDeletes: %d deletes allowed, %d refused, %d evictions; want 1, 3, 0", q.DeletesAllowed, q.DeletesRefused, q.EvictionsAllowed)
	}
}

// Two writers are told apart only by their field managers: with both left at kubebuilder's
// default ("manager"), the third change is still refused, but neither the refusal nor
// WritersFighting can say who is fighting, and both expectations go unmet.
func TestTwoWritersNeedDistinctFieldManagers(t *testing.T) {
	sc := load(t, shipped("two-writers"))
	res := run(t, sc)
	if w := res.Workloads[0]; !slices.Equal(w.WritersFighting, []string{"platform-operator", "argocd-controller"}) || w.RefusalsNamingWriters == 0 {
		t.Errorf("distinct field managers: WritersFighting %v, %d refusals naming both; want platform-operator then argocd-controller, and some", w.WritersFighting, w.RefusalsNamingWriters)
	}
	same := *sc
	same.Spec.Timeline = slices.Clone(sc.Spec.Timeline)
	for i, st := range same.Spec.Timeline {
		if st.Apply != nil {
			a := *st.Apply
			a.FieldManager = "manager"
			same.Spec.Timeline[i].Apply = &a
		}
	}
	res = run(t, &same)
	var unmet []string
	for _, o := range res.Unmet() {
		unmet = append(unmet, o.Expectation)
	}
	if want := []string{"spec.expect.writersFighting", "spec.expect.refusalNamesWriters"}; !slices.Equal(unmet, want) {
		t.Errorf("both named manager: unmet %v, want %v (the third change refused all the same: %d refusals)", unmet, want, res.Requests.RolloutRefused)
	}
	if res.Requests.RolloutRefused == 0 {
		t.Error("both named manager: the third change was not refused")
	}
}
