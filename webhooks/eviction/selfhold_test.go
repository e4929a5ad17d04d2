package eviction

import (
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
)

// holdStep drives one retry as handle does: Held read, Decide, Deferred on a deferral.
func holdStep(h *Holds, in Input) Decision {
	in.Held = h.Held(in.Pod.UID, in.Now)
	d := Decide(in)
	if d.Action() == decision.Deny {
		h.Deferred(in.Pod.UID, deferring(d), in.Now)
	}
	return d
}

// TestAPolicyNamedHoldfastHoldsOnlyItsOwn: a DisruptionPolicy named "holdfast" (the name
// holdfast's own deferrals carry in messages) that has deferred the pod for ten minutes is
// a policy like any other: another policy's cooldown, with afterMaxHold Release, is not
// released on its first deferral, as it was while the two shared a hold.
func TestAPolicyNamedHoldfastHoldsOnlyItsOwn(t *testing.T) {
	g := group(v1alpha1.KindDaemonSet, 4)
	freeze := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		// A budget of 1 spent by another pod down: defers, no maxHold.
	})
	freeze.Name = "holdfast"
	agents := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		release(s)
		s.MaxUnavailable = ptr.To(intstr.FromInt32(2)) // one pod down leaves it room: only the cooldown holds
		s.Cooldown = &metav1.Duration{Duration: time.Hour}
	})
	h := &Holds{}
	base := Input{Pod: g.Pods[1], PodLabels: map[string]string{"app": "agent"}, Group: g,
		Policies: []v1alpha1.DisruptionPolicy{freeze, agents}, User: authenticationv1.UserInfo{Username: "alice"}}
	// 10 minutes of deferrals by "holdfast" only (another pod is down: budget spent).
	g.Pods[0].Ready = false
	t0 := now
	for i := 0; i <= 120; i++ {
		in := base
		in.Now = t0.Add(time.Duration(i) * 5 * time.Second)
		d := holdStep(h, in)
		if d.Action() != decision.Deny || len(d.Violations) != 1 || d.Violations[0].Policy != "holdfast" {
			t.Fatalf("at %d: want a deferral by policy holdfast's budget alone: %v", i, d.Violations)
		}
	}
	// p0 is back; an eviction of another agent a second ago starts agents' cooldown.
	g.Pods[0].Ready = true
	in := base
	in.Now = t0.Add(605 * time.Second)
	in.Records = []budget.Eviction{{Pod: "gone", UID: "gone", At: in.Now.Add(-time.Second)}}
	d := holdStep(h, in)
	t.Logf("first cooldown deferral: action %v released %v: %v", d.Action(), d.Released, d.Messages(decision.Audit))
	if d.Released {
		t.Errorf("policy agents' cooldown began now but was released at once: the policy named %q counted as holdfast's own deferrals (heldBy)", SelfPolicy)
	}
}
