package rollout

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// TestStagedStartKeepsItsSlotWhilePodsComeUp: an OnDelete StatefulSet is scaled from 1
// to 10 over a staged template b (a staged start, admitted under maxInFlight 1). kube
// creates its ordinals one by one, each once the one before is Ready: ten pods of b take
// longer than the start's lapse. The journal shows b current, unfinished and still
// progressing (its available pods rose a moment ago), but held, which holds no slot
// (Rolling). The start lapsed after budget.StartLapse, and from then the fleet saw nothing
// in flight and admitted another workload's start while the StatefulSet's pods of b were
// still being created. The start now lapses only StartLapse after the journal's last
// progress of b.
func TestStagedStartKeepsItsSlotWhilePodsComeUp(t *testing.T) {
	a, _ := workload.FromSpec(template("a", "3"), "").Sum()
	b, _ := workload.FromSpec(template("b", "3"), "").Sum()
	sts := workload.Ref{Kind: v1alpha1.KindStatefulSet, Namespace: "t8", Name: "etcd"}
	started := now.Add(-budget.StartLapse - budget.MaxClockSkew)
	j := &journal.Journal{Kind: sts.Kind, Namespace: sts.Namespace, Name: sts.Name, Held: true,
		Revisions: []journal.Revision{
			{Template: a, Since: now.Add(-time.Hour), Until: &started, Available: 1, Progressed: now.Add(-time.Hour)},
			// 3 of the 10 pods of b available, the last a few seconds ago: far from finished.
			{Template: b, Since: started, Progressed: now.Add(-5 * time.Second), Available: 3}}}
	store := storeOf(t, j)
	p := fleetPolicy(intstr.FromInt32(1))
	starts := []budget.Start{{Workload: sts.String(), Template: b, At: started}}
	other := workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "t9", Name: "kube-apiserver"}
	got, _ := InFlight(&p, []workload.Ref{sts, other}, store, starts, other.String(), now)
	if len(got) == 0 {
		t.Errorf("in flight = none while %s still creates the pods of its staged template (3 of 10 available, progressed 5s ago): "+
			"the start of %s is admitted beside it under maxInFlight 1", sts, other)
	}
}
