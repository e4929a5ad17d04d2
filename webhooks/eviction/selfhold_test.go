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

// TestAReleasedHoldGoesOnWhileAnotherPolicyDefers: P (cooldown, Release after 30s) and Q
// (a Deny window). Once P is released, only Q defers; P's hold goes on with Q's deferrals
// rather than lapsing after HoldBreak and starting again from zero, so when Q's window
// ends P does not hold the drain for another maxHold.
func TestAReleasedHoldGoesOnWhileAnotherPolicyDefers(t *testing.T) {
	g := group(v1alpha1.KindDaemonSet, 4)
	p := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		release(s)
		s.Cooldown = &metav1.Duration{Duration: time.Hour}
	})
	q := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		s.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 11 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Action: v1alpha1.WindowDeny}}
	})
	q.Name = "freeze"
	h := &Holds{}
	base := Input{Pod: g.Pods[1], PodLabels: map[string]string{"app": "agent"}, Group: g,
		Policies: []v1alpha1.DisruptionPolicy{p, q}, User: authenticationv1.UserInfo{Username: "alice"}}
	t0 := now.Add(-30 * time.Minute) // 11:30, window until 13:00
	var lastReleased, reheld time.Duration
	for i := 0; i <= 60; i++ {
		in := base
		in.Now = t0.Add(time.Duration(i) * 5 * time.Second)
		in.Records = []budget.Eviction{{Pod: "gone", UID: "gone", At: t0.Add(-time.Minute)}}
		holdStep(h, in)
		held := h.Held(in.Pod.UID, in.Now)
		if held[p.Name] >= 30*time.Second {
			lastReleased = in.Now.Sub(t0)
		} else if lastReleased > 0 && reheld == 0 {
			reheld = in.Now.Sub(t0)
		}
	}
	t.Logf("P released until %s, P's hold restarted from zero at %s", lastReleased, reheld)
	if lastReleased == 0 {
		t.Fatal("P was never released: the sequence does not reach the case")
	}
	if reheld > 0 {
		// Q's window ends now (Q removed): P defers again although it released before.
		in := base
		in.Policies = []v1alpha1.DisruptionPolicy{p}
		in.Now = t0.Add(reheld + 5*time.Second)
		in.Records = []budget.Eviction{{Pod: "gone", UID: "gone", At: t0.Add(-time.Minute)}}
		d := holdStep(h, in)
		t.Errorf("after %s of holds, with the freeze over, P defers again (released %v, action %v): up to another maxHold of delay", in.Now.Sub(t0), d.Released, d.Action())
	}
}
