package eviction

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

var now = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// group returns a group of n pods, each Ready for an hour, named p0…p(n-1).
func group(kind v1alpha1.WorkloadKind, n int32) *workload.Group {
	g := &workload.Group{Meta: workload.Meta{Ref: workload.Ref{Kind: kind, Namespace: "kube-system", Name: "agent", UID: "g"}, Expected: n}}
	for i := range n {
		g.Pods = append(g.Pods, workload.Pod{Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("u%d", i)),
			Phase: corev1.PodRunning, Ready: true, ReadySince: now.Add(-time.Hour)})
	}
	return g
}

func dp(mut func(*v1alpha1.DisruptionPolicySpec)) v1alpha1.DisruptionPolicy {
	p := v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"},
		Spec: v1alpha1.DisruptionPolicySpec{Mode: v1alpha1.ModeEnforce, MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Targets: v1alpha1.PodTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}
	if mut != nil {
		mut(&p.Spec)
	}
	return p
}

func TestDecideEviction(t *testing.T) {
	ifHealthy := ptr.To(policyv1.IfHealthyBudget)
	cases := map[string]struct {
		group    *workload.Group
		pod      int // index of the pod evicted
		mutPod   func(*workload.Pod)
		mutGroup func(*workload.Group)
		policy   v1alpha1.DisruptionPolicy
		records  []budget.Eviction
		labels   map[string]string
		user     string
		want     []string // rules violated
		action   decision.Action
		never    bool
		// counts: whether an admitted eviction is recorded; checked where set.
		counts *bool
		wait   time.Duration
	}{
		"first eviction in a healthy Deployment group is allowed": {group: group("Deployment", 4), policy: dp(nil)},
		"first eviction in a StatefulSet group is allowed":        {group: group("StatefulSet", 3), policy: dp(nil)},
		"second while the first replacement is not Ready is deferred": {group: group("DaemonSet", 6), pod: 1, policy: dp(nil),
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			want:     []string{RuleMaxUnavailable}, action: decision.Deny},
		"a missing pod counts as unavailable": {group: group("Deployment", 4), pod: 1, policy: dp(nil),
			mutGroup: func(g *workload.Group) { g.Pods = g.Pods[1:] },
			want:     []string{RuleMaxUnavailable}, action: decision.Deny},
		// A replacement settles after minReadySeconds and the clock margin (budget.MaxClockSkew):
		// its readiness was stamped on the node's clock.
		"a replacement Ready for less than minReadySeconds has not settled": {group: group("Deployment", 4), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MinReadySeconds = 10 }),
			mutGroup: func(g *workload.Group) { g.Pods[0].ReadySince = now.Add(-4 * time.Second) },
			want:     []string{RuleMaxUnavailable}, action: decision.Deny, wait: 6*time.Second + budget.MaxClockSkew},
		"a replacement Ready for minReadySeconds, but within the clock margin, has not settled": {group: group("Deployment", 4), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MinReadySeconds = 10 }),
			mutGroup: func(g *workload.Group) { g.Pods[0].ReadySince = now.Add(-10 * time.Second) },
			want:     []string{RuleMaxUnavailable}, action: decision.Deny, wait: budget.MaxClockSkew},
		"a replacement Ready for minReadySeconds and the clock margin has settled": {group: group("Deployment", 4), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MinReadySeconds = 10 }),
			mutGroup: func(g *workload.Group) { g.Pods[0].ReadySince = now.Add(-10*time.Second - budget.MaxClockSkew) }},
		"an admitted eviction the informer has not seen yet counts": {group: group("Deployment", 4), pod: 1, policy: dp(nil),
			records: []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-time.Second)}},
			want:    []string{RuleMaxUnavailable}, action: decision.Deny},
		"an admitted eviction that never took effect lapses": {group: group("Deployment", 4), pod: 1, policy: dp(nil),
			records: []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-budget.EvictionLapse)}}},
		"a retried eviction of the same pod is not counted twice": {group: group("Deployment", 4), pod: 0, policy: dp(nil),
			records: []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-time.Second)}}},
		"percentages round up as PDBs do": {group: group("Deployment", 5), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromString("25%")) }),
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false }},
		"cooldown defers the next eviction": {group: group("DaemonSet", 6), pod: 1,
			policy:  dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: 20 * time.Second} }),
			records: []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-5 * time.Second)}},
			want:    []string{RuleCooldown}, action: decision.Deny, wait: 15 * time.Second},
		"cooldown has passed": {group: group("DaemonSet", 6), pod: 1,
			policy:  dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: 20 * time.Second} }),
			records: []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-21 * time.Second)}}},
		"an eviction kube refused does not hold the cooldown": {group: group("DaemonSet", 6), pod: 1,
			policy:  dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: time.Hour} }),
			records: []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-time.Minute)}}},
		"budget zero is never": {group: group("Deployment", 3),
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }),
			want:   []string{RuleMaxUnavailable}, action: decision.Deny, never: true},
		"an unready pod goes at once under AlwaysAllow": {group: group("Deployment", 4), pod: 1, policy: dp(nil),
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready, g.Pods[1].Ready = false, false }},
		"an unready pod waits under IfHealthyBudget when the group is over budget": {group: group("Deployment", 4), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.UnhealthyPodEvictionPolicy = ifHealthy }),
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready, g.Pods[1].Ready, g.Pods[2].Ready = false, false, false },
			want:     []string{RuleMaxUnavailable}, action: decision.Deny},
		"Pending, Succeeded, Failed and terminating pods are never guarded": {group: group("Deployment", 2), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }),
			mutGroup: func(g *workload.Group) { g.Pods[1].Phase = corev1.PodPending }},
		"pods of other owners are not guarded": {group: nil, policy: dp(nil)},
		"pods the policy does not select are not guarded": {group: group("Deployment", 2), labels: map[string]string{"app": "web"},
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(0)) })},
		"exempt requesters pass": {group: group("Deployment", 2), user: "system:serviceaccount:kube-system:autoscaler",
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.MaxUnavailable = ptr.To(intstr.FromInt32(0))
				s.Exemptions.ServiceAccounts = []string{"kube-system/autoscaler"}
			})},
		"Warn mode admits with a warning": {group: group("Deployment", 4), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Mode = v1alpha1.ModeWarn }),
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			want:     []string{RuleMaxUnavailable}, action: decision.Warn},

		// What is recorded, and pods that serve nothing under each unhealthyPodEvictionPolicy
		// (E3); invalid selectors (E4); another replica's records read across clock skew.
		"AlwaysAllow: a not-Ready pod is neither deferred by the cooldown nor recorded": {group: group("DaemonSet", 6), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: time.Hour} }),
			mutGroup: func(g *workload.Group) { g.Pods[1].Ready = false },
			records:  []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-5 * time.Second)}}, counts: ptr.To(false)},
		"a Ready pod's admitted eviction is recorded": {group: group("DaemonSet", 6), pod: 1, policy: dp(nil), counts: ptr.To(true)},
		"IfHealthyBudget: a not-Ready pod of a group at its budget is not now (429), not never": {group: group("Deployment", 3), pod: 1,
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.UnhealthyPodEvictionPolicy = ifHealthy
				s.MaxUnavailable = ptr.To(intstr.FromInt32(0))
			}),
			mutGroup: func(g *workload.Group) { g.Pods[1].Ready = false },
			want:     []string{RuleMaxUnavailable}, action: decision.Deny},
		"IfHealthyBudget: a not-Ready pod goes once the group is within its budget without it": {group: group("Deployment", 4), pod: 1,
			policy:   dp(func(s *v1alpha1.DisruptionPolicySpec) { s.UnhealthyPodEvictionPolicy = ifHealthy }),
			mutGroup: func(g *workload.Group) { g.Pods[1].Ready = false }, counts: ptr.To(false)},
		"an invalid namespaceSelector leaves alone the pods its selector does not select": {group: group("Deployment", 3), labels: map[string]string{"app": "web"},
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Targets.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
			})},
		// Stored while the policy webhook was down, it must not defer every eviction in
		// the cluster: it selects nothing, and its status says so.
		"an invalid namespaceSelector selects nothing, not even the pods its selector selects": {group: group("Deployment", 3),
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Targets.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "Near"}}}
			})},
		"an invalid label key in a namespaceSelector alone selects nothing": {group: group("Deployment", 3),
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Targets.Selector = nil
				s.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
			})},
		"another replica's record, 28 s old on this clock, may be 33 s old: still in flight": {group: group("Deployment", 4), pod: 1, policy: dp(nil),
			records: []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-budget.EvictionLapse + 2*time.Second), By: "other"}},
			want:    []string{RuleMaxUnavailable}, action: decision.Deny},
		"another replica's record lapses budget.MaxClockSkew later than this replica's own": {group: group("Deployment", 4), pod: 1, policy: dp(nil),
			records: []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-budget.EvictionLapse - budget.MaxClockSkew), By: "other"}}},
		"another replica's record holds the cooldown budget.MaxClockSkew longer": {group: group("DaemonSet", 6), pod: 1,
			policy:  dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: 20 * time.Second} }),
			records: []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-21 * time.Second), By: "other"}},
			want:    []string{RuleCooldown}, action: decision.Deny, wait: 4 * time.Second},
		// Requesters: the first entry naming the evicting identity tightens the budget and
		// the cooldown, never loosens them, so that an entry cannot open a way around them.
		"the autoscaler held at 0 is refused for good": {group: group("DaemonSet", 6), user: "system:serviceaccount:kube-system:cluster-autoscaler",
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Requesters = []v1alpha1.Requester{{ServiceAccounts: []string{"kube-system/cluster-autoscaler"}, MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			}), want: []string{RuleMaxUnavailable}, action: decision.Deny, never: true},
		"a human beside the autoscaler drains one at a time": {group: group("DaemonSet", 6), user: "alice",
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Requesters = []v1alpha1.Requester{{ServiceAccounts: []string{"kube-system/cluster-autoscaler"}, MaxUnavailable: ptr.To(intstr.FromInt32(0))}}
			})},
		"a requester entry never loosens the budget": {group: group("DaemonSet", 6), pod: 1, user: "alice",
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Requesters = []v1alpha1.Requester{{Users: []string{"alice"}, MaxUnavailable: ptr.To(intstr.FromInt32(3))}}
			}), want: []string{RuleMaxUnavailable}, action: decision.Deny},
		"a requester's longer cooldown holds its evictions": {group: group("DaemonSet", 6), pod: 1, user: "alice",
			records: []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-time.Minute)}},
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
				s.Cooldown = &metav1.Duration{Duration: 30 * time.Second}
				s.Requesters = []v1alpha1.Requester{{Users: []string{"alice"}, Cooldown: &metav1.Duration{Duration: 5 * time.Minute}}}
			}), want: []string{RuleCooldown}, action: decision.Deny},
		// Windows: a Deny window defers the evictions of serving pods, never those of pods
		// that serve nothing (E3); a window that cannot be evaluated (stored while the
		// policy webhook was down) is ignored: an Allow window that never opens would
		// otherwise defer every eviction forever.
		"a Deny window defers evictions of serving pods until it ends": {group: group("DaemonSet", 6),
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 11 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Action: v1alpha1.WindowDeny}}
			}), want: []string{RuleWindow}, action: decision.Deny, wait: time.Hour},
		"a pod that serves nothing goes in a Deny window (E3)": {group: group("DaemonSet", 6),
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Windows = []v1alpha1.Window{{Schedule: "0 11 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Action: v1alpha1.WindowDeny}}
			})},
		"windows that cannot be evaluated are ignored, never a hold on every eviction": {group: group("DaemonSet", 6),
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Windows = []v1alpha1.Window{
					{Schedule: "every day", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny},
					{Schedule: "@every 2h", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowAllow},
				}
			})},
		"a valid Deny window beside one that cannot be evaluated still holds": {group: group("DaemonSet", 6),
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.Windows = []v1alpha1.Window{
					{Schedule: "@every 2h", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowAllow},
					{Name: "freeze", Schedule: "0 11 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Action: v1alpha1.WindowDeny},
				}
			}), want: []string{RuleWindow}, action: decision.Deny, wait: time.Hour},
		// Temporary exemptions: what one lets through is on record, and only until it expires.
		"a live temporary exemption lets it through, on record": {group: group("DaemonSet", 6), pod: 1, user: "oncall",
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.UnhealthyPodEvictionPolicy = ifHealthy
				s.Exemptions.Temporary = []v1alpha1.TemporaryExemption{{Users: []string{"oncall"}, Expires: metav1.NewTime(now.Add(time.Hour)), Reason: "INC-42"}}
			}), want: []string{RuleExemption}, action: decision.Audit},
		"an expired temporary exemption no longer applies": {group: group("DaemonSet", 6), pod: 1, user: "oncall",
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			policy: dp(func(s *v1alpha1.DisruptionPolicySpec) {
				s.UnhealthyPodEvictionPolicy = ifHealthy
				s.Exemptions.Temporary = []v1alpha1.TemporaryExemption{{Users: []string{"oncall"}, Expires: metav1.NewTime(now.Add(-time.Second)), Reason: "INC-42"}}
			}), want: []string{RuleMaxUnavailable}, action: decision.Deny},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			labels := tc.labels
			if labels == nil {
				labels = map[string]string{"app": "agent"}
			}
			// Records are this replica's unless a case says whose.
			for i := range tc.records {
				if tc.records[i].By == "" {
					tc.records[i].By = "self"
				}
			}
			in := Input{PodLabels: labels, Group: tc.group, Records: tc.records, Now: now, Identity: "self",
				User: authenticationv1.UserInfo{Username: tc.user}, Policies: []v1alpha1.DisruptionPolicy{tc.policy}}
			if tc.group != nil && tc.mutGroup != nil {
				tc.mutGroup(tc.group)
			}
			if tc.group != nil {
				in.Pod = tc.group.Pods[tc.pod]
			} else {
				in.Pod = workload.Pod{Name: "bare", Phase: corev1.PodRunning, Ready: true}
			}
			d := Decide(in)
			var got []string
			for _, v := range d.Violations {
				got = append(got, v.Rule)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s\n%v", diff, d.Violations)
			}
			if d.Action() != tc.action || d.Never() != tc.never {
				t.Errorf("action %v never %v, want %v %v", d.Action(), d.Never(), tc.action, tc.never)
			}
			if tc.wait != 0 && d.Wait() != tc.wait {
				t.Errorf("wait = %v, want %v", d.Wait(), tc.wait)
			}
			if tc.counts != nil && d.Counts != *tc.counts {
				t.Errorf("counts = %v, want %v", d.Counts, *tc.counts)
			}
		})
	}
}

// TestRecordsOutliveTheLongestCooldown: a cooldown longer than an hour keeps its records
// (and its ledger) as long as it needs them.
func TestRecordsOutliveTheLongestCooldown(t *testing.T) {
	if got := budget.Retention(nil); got != time.Hour {
		t.Errorf("Retention without policies = %v, want an hour", got)
	}
	long := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: 3 * time.Hour} })
	short := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: time.Minute} })
	keep := budget.Retention([]v1alpha1.DisruptionPolicy{short, long})
	if keep < 3*time.Hour+budget.EvictionLapse+budget.MaxClockSkew {
		t.Fatalf("Retention = %v, shorter than the 3 h cooldown needs", keep)
	}
	// A record kept that long still holds the cooldown two hours later.
	in := Input{Group: group("DaemonSet", 3), Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{long},
		PodLabels: map[string]string{"app": "agent"},
		Records:   []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-2 * time.Hour), By: "self"}}}
	in.Pod = in.Group.Pods[1]
	if d := Decide(in); d.Action() != decision.Deny || d.Violations[0].Rule != RuleCooldown {
		t.Errorf("decision %v, want the cooldown to hold", d.Violations)
	}
	// And writing the next record keeps it.
	next := budget.Eviction{Pod: "p1", UID: "u1", At: now, By: "self"}
	if got := budget.AppendEviction(in.Records, next, keep); len(got) != 2 {
		t.Errorf("records after the next eviction = %v, want the 2 h old one kept", got)
	}
	if got := budget.AppendEviction(in.Records, next, time.Hour); len(got) != 1 {
		t.Errorf("records kept an hour = %v, want the 2 h old one dropped", got)
	}
}

func TestRespondDeferralIsA429WithCappedRetry(t *testing.T) {
	d := Decision{Guarded: true, Violations: decision.Violations{{Policy: "agents", Rule: RuleCooldown, Action: decision.Deny, Wait: 95 * time.Second, Message: "wait"}}}
	r := respond(d)
	if r.Allowed || r.Result.Code != 429 || r.Result.Reason != metav1.StatusReasonTooManyRequests {
		t.Fatalf("result = %+v", r.Result)
	}
	if r.Result.Details.RetryAfterSeconds != 10 || r.Result.Details.Causes[0].Type != policyv1.DisruptionBudgetCause {
		t.Errorf("details = %+v", r.Result.Details)
	}
	d.Violations[0].Never = true
	if r := respond(d); r.Result.Code != 403 || r.Result.Details.Causes[0].Type != CauseType {
		t.Errorf("never: result = %+v", r.Result)
	}
}

// TestOneEvictionIsRecordedOnce: two of holdfast's webhook entries may match one eviction
// (two DisruptionPolicies selecting its namespace differently), so the same eviction is
// decided twice. The second decision allows it (a pod does not wait for itself) and
// writes nothing; a pod's later eviction replaces its record instead of adding one.
func TestOneEvictionIsRecordedOnce(t *testing.T) {
	policy := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: time.Minute} })
	in := Input{Group: group("DaemonSet", 3), Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{policy},
		PodLabels: map[string]string{"app": "agent"}}
	in.Pod = in.Group.Pods[1]
	if d := Decide(in); d.Action() == decision.Deny || in.Recorded() {
		t.Fatalf("the first decision: %v, recorded %t", d.Violations, in.Recorded())
	}
	in.Records = budget.AppendEviction(nil, budget.Eviction{Pod: in.Pod.Name, UID: in.Pod.UID, At: now, By: "self"}, time.Hour)
	in.Now = now.Add(20 * time.Millisecond)
	if d := Decide(in); d.Action() == decision.Deny || !in.Recorded() {
		t.Errorf("the same eviction decided again: %v, recorded %t; want allowed and already recorded", d.Violations, in.Recorded())
	}
	// Another pod of the group waits for the cooldown.
	other := in
	other.Pod = in.Group.Pods[2]
	if d := Decide(other); d.Action() != decision.Deny || other.Recorded() {
		t.Errorf("another pod: %v, recorded %t", d.Violations, other.Recorded())
	}
	// Once the record lapsed, a new eviction of the pod is a new record, replacing the old.
	in.Now = now.Add(budget.EvictionLapse + time.Second)
	if in.Recorded() {
		t.Error("a lapsed record still counts as this eviction's")
	}
	if got := budget.AppendEviction(in.Records, budget.Eviction{Pod: in.Pod.Name, UID: in.Pod.UID, At: in.Now, By: "self"}, time.Hour); len(got) != 1 || !got[0].At.Equal(in.Now) {
		t.Errorf("records = %v, want the pod's one, replaced", got)
	}
}

// TestSharedRolloutDefersEvictions: while the group's workload rolls out under a
// RolloutPolicy sharing this DisruptionPolicy's budget, its serving pods' evictions wait
// (429); a pod that is not Ready, and the pods under another DisruptionPolicy, do not.
func TestSharedRolloutDefersEvictions(t *testing.T) {
	agents := dp(nil)
	in := Input{Group: group("DaemonSet", 3), Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{agents},
		PodLabels: map[string]string{"app": "agent"},
		Rollout:   &budget.SharedRollout{RolloutPolicy: "agents-rollouts", Budgets: []string{agents.Name}, Since: now.Add(-time.Minute), StallIn: 4 * time.Minute}}
	in.Pod = in.Group.Pods[1]
	d := Decide(in)
	if d.Action() != decision.Deny || d.Never() || len(d.Violations) != 1 || d.Violations[0].Rule != budget.RuleSharedBudget || d.Violations[0].Wait != MaxRetryAfter {
		t.Fatalf("a serving pod during the shared rollout: %v, want a deferral", d.Violations)
	}
	if !strings.Contains(d.Violations[0].Message, "agents-rollouts") || !strings.Contains(d.Violations[0].Message, "stalled (in 4m0s)") {
		t.Errorf("the message must name the rollout's policy and when it stops holding: %s", d.Violations[0].Message)
	}
	other := in
	other.Rollout = &budget.SharedRollout{RolloutPolicy: "x", Budgets: []string{"someone-else"}, StallIn: time.Minute}
	if d := Decide(other); d.Action() == decision.Deny {
		t.Errorf("a rollout sharing another policy's budget: %v", d.Violations)
	}
	notReady := in
	notReady.Pod.Ready = false
	if d := Decide(notReady); d.Action() == decision.Deny {
		t.Errorf("a pod that is not Ready serves nothing: %v", d.Violations)
	}
}

// TestSharedStartHoldsBeforeTheJournal: a start the rollout guard recorded in the group's
// ledger holds the group's evictions until the journal shows it, or it lapses.
func TestSharedStartHoldsBeforeTheJournal(t *testing.T) {
	h := &Handler{Journals: &journal.Store{}}
	agents := dp(nil)
	start := budget.RolloutStart{Template: strings.Repeat("a", 64), At: now.Add(-time.Second), RolloutPolicy: "agents-rollouts", Budgets: []string{agents.Name}}
	in := Input{Group: group("DaemonSet", 3), Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{agents},
		PodLabels: map[string]string{"app": "agent"}}
	in.Pod = in.Group.Pods[0]
	h.sharedStart(&in, start)
	if d := Decide(in); d.Action() != decision.Deny || d.Violations[0].Rule != budget.RuleSharedBudget {
		t.Fatalf("an eviction just after a recorded start: %v", d.Violations)
	}
	lapsed := in
	lapsed.Rollout, lapsed.Now = nil, now.Add(budget.StartLapse+budget.MaxClockSkew)
	h.sharedStart(&lapsed, start)
	if lapsed.Rollout != nil {
		t.Errorf("a lapsed start still holds: %+v", lapsed.Rollout)
	}
}

// TestSharedStartHoldsUntilTheJournalObservesItsObject: a StatefulSet deleted orphaning
// its pods mid-rollout and created again with the template it rolled out continues that
// rollout; the rollout guard records the CREATE's start. Until the leader observes the new
// object, the name's journal is the deleted workload's, with the template current and
// marked deleted (it rolls nothing out): the start holds the group's evictions then, as
// it does before any journal shows it. The fleet explorer found a drain admitted in that
// window beside the rollout (seed 28226).
func TestSharedStartHoldsUntilTheJournalObservesItsObject(t *testing.T) {
	tmpl := strings.Repeat("a", 64)
	agents := dp(nil)
	g := group(v1alpha1.KindStatefulSet, 3)
	journalOf := func(uid types.UID, generation int64, deleted *time.Time) *journal.Store {
		j := &journal.Journal{Kind: g.Kind, Namespace: g.Namespace, Name: g.Name, UID: uid, Generation: generation, Deleted: deleted,
			Revisions: []journal.Revision{{Template: tmpl, Since: now.Add(-time.Minute)}}}
		cm, err := journal.Encode(j, "holdfast-system")
		if err != nil {
			t.Fatal(err)
		}
		store := &journal.Store{}
		store.Add(cm)
		if store.Get(g.Kind, g.Namespace, g.Name) == nil {
			t.Fatalf("the journal does not read back")
		}
		return store
	}
	start := budget.RolloutStart{Template: tmpl, At: now.Add(-time.Second), RolloutPolicy: "agents-rollouts", Budgets: []string{agents.Name},
		UID: g.UID, Generation: 1}
	holds := func(store *journal.Store, s budget.RolloutStart) bool {
		in := Input{Group: g, Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{agents}, PodLabels: map[string]string{"app": "agent"}}
		in.Pod = g.Pods[0]
		(&Handler{Journals: store}).sharedStart(&in, s)
		return in.Rollout != nil
	}
	deleted := now.Add(-2 * time.Second)
	if !holds(journalOf("deleted-one", 7, &deleted), start) {
		t.Errorf("the start of a CREATE whose journal is still the deleted workload's holds nothing")
	}
	if holds(journalOf(g.UID, 1, nil), start) {
		t.Errorf("a journal that observed the created object does not decide (readSharedRollout)")
	}
	if !holds(journalOf("deleted-one", 7, nil), start) {
		t.Errorf("a journal of another object of the name decides the start of this one")
	}
	legacy := start
	legacy.UID, legacy.Generation = "", 0 // written by a release before the fields
	if holds(journalOf("deleted-one", 7, nil), legacy) {
		t.Errorf("a start without its object is not decided by the live journal whose current template it is")
	}
	if !holds(journalOf("deleted-one", 7, &deleted), legacy) {
		t.Errorf("a start without its object is decided by a deleted workload's journal")
	}
}

// TestSharedStartOfAnObjectReplacedSinceHoldsNothing (fleet explorer, seed 6279): a start
// recorded for a DaemonSet later deleted with its pods and created again on another
// template. Once the leader has seen the new object settle on it (Observed.Replaced), no
// pod of the started template is left that the workload keeps: the start holds the
// group's evictions no more. Until then, or of an object the journal does not name as
// replaced, it holds until it lapses.
func TestSharedStartOfAnObjectReplacedSinceHoldsNothing(t *testing.T) {
	started, current := strings.Repeat("b", 64), strings.Repeat("a", 64)
	agents := dp(nil)
	g := group(v1alpha1.KindDaemonSet, 3)
	start := budget.RolloutStart{Template: started, At: now.Add(-10 * time.Second), RolloutPolicy: "agents-rollouts", Budgets: []string{agents.Name},
		UID: "deleted-one", Generation: 2}
	holds := func(o journal.Observed) bool {
		j := &journal.Journal{Kind: g.Kind, Namespace: g.Namespace, Name: g.Name, UID: g.UID, Generation: 1, Observed: &o,
			Revisions: []journal.Revision{{Template: current, Since: now.Add(-time.Hour), Finished: ptr.To(now.Add(-time.Second))}}}
		cm, err := journal.Encode(j, "holdfast-system")
		if err != nil {
			t.Fatal(err)
		}
		store := &journal.Store{}
		store.Add(cm)
		in := Input{Group: g, Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{agents}, PodLabels: map[string]string{"app": "agent"}}
		in.Pod = g.Pods[0]
		(&Handler{Journals: store}).sharedStart(&in, start)
		return in.Rollout != nil
	}
	if holds(journal.Observed{Revision: 1, Template: current, Previous: "deleted-one", Settled: true}) {
		t.Errorf("a start of the object the settled workload replaced holds the group")
	}
	if !holds(journal.Observed{Revision: 1, Template: current, Previous: "deleted-one"}) {
		t.Errorf("a start of the replaced object holds nothing before the workload settled")
	}
	if !holds(journal.Observed{Revision: 1, Template: current, Previous: "another", Settled: true}) {
		t.Errorf("a start of an object the journal does not name as replaced holds nothing")
	}
}

// TestExplorerFindings are the holes the outcome explorer (model_test.go) found in the
// decision code, each through the real decision.
func TestExplorerFindings(t *testing.T) {
	user := func(name string) authenticationv1.UserInfo { return authenticationv1.UserInfo{Username: name} }
	input := func(g *workload.Group, p v1alpha1.DisruptionPolicy) Input {
		in := Input{Group: g, Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{p}, PodLabels: map[string]string{"app": "agent"}}
		in.Pod = g.Pods[0]
		return in
	}
	// E6: a percentage of a group that expects no pods (a DaemonSet whose status has not
	// counted its pods, a StatefulSet scaled to 0) forbids nothing: its pods are surplus, as
	// kube's PDB arithmetic has it. A budget written as 0 still refuses (403).
	t.Run("a percentage against 0 expected pods is no refusal", func(t *testing.T) {
		g := group("DaemonSet", 3)
		g.Expected = 0
		for _, pct := range []string{"34%", "100%"} {
			in := input(g, dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromString(pct)) }))
			if d := Decide(in); d.Action() == decision.Deny {
				t.Errorf("maxUnavailable %s of 0 expected pods: %v", pct, d.Violations)
			}
			in.Policies[0].Spec.Requesters = []v1alpha1.Requester{{Users: []string{"karpenter"}, MaxUnavailable: ptr.To(intstr.FromString("50%"))}}
			in.User = user("karpenter")
			if d := Decide(in); d.Action() == decision.Deny {
				t.Errorf("a requester's 50%% of 0 expected pods: %v", d.Violations)
			}
		}
		for _, zero := range []intstr.IntOrString{intstr.FromInt32(0), intstr.FromString("0%")} {
			in := input(g, dp(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(zero) }))
			if d := Decide(in); d.Action() != decision.Deny || !d.Never() {
				t.Errorf("maxUnavailable %s: %v, want a refusal", zero.String(), d.Violations)
			}
		}
	})
	// E3: a pod that serves nothing passes in every window, under IfHealthyBudget too; the
	// budget alone decides it.
	t.Run("a Deny window does not hold a pod that serves nothing under IfHealthyBudget", func(t *testing.T) {
		g := group("DaemonSet", 6)
		g.Pods[0].Ready = false
		in := input(g, dp(func(s *v1alpha1.DisruptionPolicySpec) {
			s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
			s.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 11 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Action: v1alpha1.WindowDeny}}
		}))
		if d := Decide(in); d.Action() == decision.Deny {
			t.Errorf("not-Ready pod in a Deny window, group within budget: %v", d.Violations)
		}
		in.Pod = g.Pods[1]
		if d := Decide(in); d.Action() != decision.Deny || d.Violations[0].Rule != RuleWindow {
			t.Errorf("a Ready pod in the same window: %v, want held by the window", d.Violations)
		}
	})
	// E1: an exempt requester's eviction of a Ready pod is recorded, so that a replica
	// whose cache has not seen the pod go counts it against everyone else's budget.
	t.Run("an exempt eviction of a Ready pod counts", func(t *testing.T) {
		in := input(group("Deployment", 4), dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Exemptions.Users = []string{"kubernetes-admin"} }))
		in.User = user("kubernetes-admin")
		d := Decide(in)
		if d.Action() == decision.Deny || !d.Counts {
			t.Errorf("exempt eviction: %v, counts %t; want admitted and recorded", d.Violations, d.Counts)
		}
		in.Pod.Ready = false
		if d := Decide(in); d.Counts {
			t.Error("an exempt eviction of a pod that serves nothing is recorded")
		}
	})
	// E2: an admitted eviction kube's PDB check refused and the drain retries later is a
	// new disruption when it goes: recorded anew, it holds the next pod for the cooldown.
	t.Run("a retry after kube refused is recorded anew", func(t *testing.T) {
		in := input(group("Deployment", 4), dp(func(s *v1alpha1.DisruptionPolicySpec) {
			s.Cooldown, s.MaxUnavailable = &metav1.Duration{Duration: 20 * time.Second}, ptr.To(intstr.FromInt32(2))
		}))
		in.Records = []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-22 * time.Second), By: "self"}, {Pod: "p1", UID: "u1", At: now.Add(-21 * time.Second), By: "self"}}
		if d := Decide(in); d.Action() == decision.Deny || in.Recorded() {
			t.Fatalf("the retry 22 s later: %v, recorded %t; want admitted and recorded anew", d.Violations, in.Recorded())
		}
		// Another replica's record a moment ago is no proof of the same request: its clock
		// may differ by budget.MaxClockSkew.
		other := in
		other.Records = []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-time.Second), By: "other"}}
		if other.Recorded() {
			t.Error("a retry through this replica of another replica's eviction a second ago is not recorded anew")
		}
		in.Records = budget.AppendEviction(in.Records, budget.Eviction{Pod: "p0", UID: "u0", At: now, By: "self"}, time.Hour)
		in.Pod, in.Now = in.Group.Pods[1], now.Add(time.Second)
		if d := Decide(in); d.Action() != decision.Deny || d.Violations[0].Rule != RuleCooldown {
			t.Errorf("p1's retry a second after p0's went: %v, want the cooldown", d.Violations)
		}
	})
}

// TestAJournalWrittenMidRequestStillHoldsTheStart: the leader writes the group's journal
// (it has seen the rollout a recorded start began) between readSharedRollout, which reads
// the old one (its revision finished: no rollout), and sharedStart, which would read the
// new one as showing the start and leave it to readSharedRollout: the start held nothing,
// and the drain went on beside the rollout. A request reads the journal once.
func TestAJournalWrittenMidRequestStillHoldsTheStart(t *testing.T) {
	old, started := strings.Repeat("a", 64), strings.Repeat("b", 64)
	agents := dp(nil)
	g := group(v1alpha1.KindDaemonSet, 3)
	finished := now.Add(-time.Hour)
	encode := func(j *journal.Journal) *corev1.ConfigMap {
		cm, err := journal.Encode(j, "holdfast-system")
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	before := encode(&journal.Journal{Kind: g.Kind, Namespace: g.Namespace, Name: g.Name, UID: g.UID, Generation: 1,
		Revisions: []journal.Revision{{Template: old, Since: now.Add(-2 * time.Hour), Finished: &finished}}})
	after := encode(&journal.Journal{Kind: g.Kind, Namespace: g.Namespace, Name: g.Name, UID: g.UID, Generation: 2,
		Revisions: []journal.Revision{{Template: old, Since: now.Add(-2 * time.Hour), Until: &finished, Finished: &finished},
			{Template: started, Since: now.Add(-time.Second), Progressed: now.Add(-time.Second)}}})
	start := budget.RolloutStart{Template: started, At: now.Add(-2 * time.Second), RolloutPolicy: "agents-rollouts", Budgets: []string{agents.Name},
		UID: g.UID, Generation: 2}
	store := &journal.Store{}
	store.Add(before)
	h := &Handler{Journals: store}
	in := Input{Group: g, Now: now, Identity: "self", Policies: []v1alpha1.DisruptionPolicy{agents}, PodLabels: map[string]string{"app": "agent"}}
	in.Pod = g.Pods[0]
	if err := h.readSharedRollout(context.Background(), &in); err != nil || in.Rollout != nil {
		t.Fatalf("the journal before the rollout shows one: %v %v", in.Rollout, err)
	}
	store.Add(after) // the leader's write lands here
	h.sharedStart(&in, start)
	if in.Rollout == nil {
		t.Error("a journal written mid-request left the recorded start holding nothing")
	}
}
