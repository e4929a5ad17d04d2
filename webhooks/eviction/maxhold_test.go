package eviction

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/events"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// release is a policy that lets its own holds go after a maxHold of 30s.
func release(s *v1alpha1.DisruptionPolicySpec) {
	s.MaxHold = &metav1.Duration{Duration: 30 * time.Second}
	s.AfterMaxHold = v1alpha1.AfterMaxHoldRelease
}

// TestDecideAfterMaxHold: once a pod has been held for maxHold under afterMaxHold Release,
// holdfast's own holds (cooldown, windows, minReadySeconds, requester entries, a rollout
// sharing the budget) go, on record; the budget as the pod's PDB counts it (Ready pods, the
// evictions in flight) and budgets written as zero stay.
func TestDecideAfterMaxHold(t *testing.T) {
	cooldown := func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: time.Hour} }
	both := func(muts ...func(*v1alpha1.DisruptionPolicySpec)) func(*v1alpha1.DisruptionPolicySpec) {
		return func(s *v1alpha1.DisruptionPolicySpec) {
			for _, m := range muts {
				m(s)
			}
		}
	}
	lastEviction := []budget.Eviction{{Pod: "gone", UID: "gone", At: now.Add(-time.Minute)}}
	alwaysDeny := []v1alpha1.Window{{Name: "freeze", Schedule: "0 11 * * *", Duration: metav1.Duration{Duration: 2 * time.Hour}, Action: v1alpha1.WindowDeny}}
	cases := map[string]struct {
		mut      func(*v1alpha1.DisruptionPolicySpec)
		held     time.Duration
		mutGroup func(*workload.Group)
		records  []budget.Eviction
		user     string
		rollout  bool
		want     []string
		action   decision.Action
		released bool
		never    bool
	}{
		"a cooldown past maxHold is released": {mut: both(cooldown, release), held: 30 * time.Second, records: lastEviction,
			want: []string{RuleMaxHold}, action: decision.Audit, released: true},
		"afterMaxHold unset keeps holding": {mut: both(cooldown, func(s *v1alpha1.DisruptionPolicySpec) {
			s.MaxHold = &metav1.Duration{Duration: 30 * time.Second}
		}), held: time.Hour, records: lastEviction, want: []string{RuleCooldown}, action: decision.Deny},
		"afterMaxHold Hold keeps holding": {mut: both(cooldown, release, func(s *v1alpha1.DisruptionPolicySpec) { s.AfterMaxHold = v1alpha1.AfterMaxHoldHold }),
			held: time.Hour, records: lastEviction, want: []string{RuleCooldown}, action: decision.Deny},
		"a hold shorter than maxHold is kept": {mut: both(cooldown, release), held: 29 * time.Second, records: lastEviction,
			want: []string{RuleCooldown}, action: decision.Deny},
		"a window past maxHold is released": {mut: both(release, func(s *v1alpha1.DisruptionPolicySpec) { s.Windows = alwaysDeny }),
			held: time.Minute, want: []string{RuleMaxHold}, action: decision.Audit, released: true},
		// The PDB counts a Ready pod as healthy at once: settling is holdfast's own.
		"a replacement that has not settled is counted as its PDB counts it": {mut: both(release, func(s *v1alpha1.DisruptionPolicySpec) { s.MinReadySeconds = 60 }),
			held: time.Minute, mutGroup: func(g *workload.Group) { g.Pods[0].ReadySince = now.Add(-time.Second) },
			want: []string{RuleMaxHold}, action: decision.Audit, released: true},
		"a requester's tighter budget is released": {mut: both(release, func(s *v1alpha1.DisruptionPolicySpec) {
			s.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			s.Requesters = []v1alpha1.Requester{{Users: []string{"ca"}, MaxUnavailable: ptr.To(intstr.FromString("25%"))}}
		}), held: time.Minute, user: "ca", mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			want: []string{RuleMaxHold}, action: decision.Audit, released: true},
		"a rollout sharing the budget is released": {mut: release, held: time.Minute, rollout: true,
			want: []string{RuleMaxHold}, action: decision.Audit, released: true},
		"the budget as the PDB counts it is kept": {mut: both(cooldown, release), held: time.Hour, records: lastEviction,
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready = false },
			want:     []string{RuleMaxUnavailable}, action: decision.Deny},
		"an eviction in flight still counts": {mut: release, held: time.Hour,
			records: []budget.Eviction{{Pod: "p0", UID: "u0", At: now.Add(-time.Second)}},
			want:    []string{RuleMaxUnavailable}, action: decision.Deny},
		"a policy that only warns holds nothing, and releases nothing": {mut: both(cooldown, release, func(s *v1alpha1.DisruptionPolicySpec) { s.Mode = v1alpha1.ModeWarn }),
			held: time.Hour, records: lastEviction, want: []string{RuleCooldown}, action: decision.Warn},
		"a budget of zero is never released": {mut: both(release, func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }),
			held: time.Hour, want: []string{RuleMaxUnavailable}, action: decision.Deny, never: true},
		"a requester's budget of zero is never released": {mut: both(release, func(s *v1alpha1.DisruptionPolicySpec) {
			s.Requesters = []v1alpha1.Requester{{Users: []string{"ca"}, MaxUnavailable: ptr.To(intstr.FromString("0%"))}}
		}), held: time.Hour, user: "ca", want: []string{RuleMaxUnavailable}, action: decision.Deny, never: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := group(v1alpha1.KindDaemonSet, 4)
			if tc.mutGroup != nil {
				tc.mutGroup(g)
			}
			p := dp(tc.mut)
			in := Input{Pod: g.Pods[1], PodLabels: map[string]string{"app": "agent"}, Group: g, Records: tc.records,
				Policies: []v1alpha1.DisruptionPolicy{p}, User: authenticationv1.UserInfo{Username: cmpOr(tc.user, "alice")}, Now: now, Held: map[string]time.Duration{p.Name: tc.held}}
			if tc.rollout {
				in.Rollout = &budget.SharedRollout{RolloutPolicy: "agents", Budgets: []string{p.Name}, Since: now.Add(-time.Minute), StallIn: time.Minute}
			}
			d := Decide(in)
			var rules []string
			for _, v := range d.Violations {
				rules = append(rules, v.Rule)
			}
			if strings.Join(rules, ",") != strings.Join(tc.want, ",") || d.Action() != tc.action || d.Never() != tc.never || d.Released != tc.released {
				t.Fatalf("rules %v action %v never %v released %v, want %v %v %v %v: %v",
					rules, d.Action(), d.Never(), d.Released, tc.want, tc.action, tc.never, tc.released, d.Violations)
			}
			if tc.released && !strings.Contains(d.Violations[0].Message, "maxHold 30s") {
				t.Errorf("the release record %q does not name maxHold", d.Violations[0].Message)
			}
		})
	}
}

// TestReleasedEvictionThroughTheHandler: a drain retrying every 5 s against a cooldown is
// deferred until the pod has been held for maxHold, then admitted with the release on
// record: the ledger record, the audit annotation, the metric's outcome, and a Warning
// Event on the pod and its node.
func TestReleasedEvictionThroughTheHandler(t *testing.T) {
	p := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		release(s)
		s.Cooldown = &metav1.Duration{Duration: time.Hour}
	})
	objs, pod := agentGroup(nil)
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue // both agents Ready
		}
	}
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &eventLog{}
	ledgers := &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &p)...),
		Clock: clk, Ledgers: ledgers, Holds: &Holds{}, Events: &events.Limiter{Recorder: rec}}
	// An eviction of another agent a minute ago holds the cooldown.
	g, err := ledgers.ReadGroup(context.Background(), budget.GroupID{UID: "ds"})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.RecordEviction(context.Background(), ledgers, budget.Eviction{Pod: "gone", UID: "gone", At: clk.Now().Add(-time.Minute), By: "replica-0"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	req := podEviction(pod, "alice")
	var resp admission.Response
	start := clk.Now()
	for range 10 {
		if resp = h.Handle(context.Background(), req); resp.Allowed {
			break
		}
		if resp.Result.Code != http.StatusTooManyRequests {
			t.Fatalf("answered %d, want 429 while held", resp.Result.Code)
		}
		clk.Step(5 * time.Second)
	}
	if !resp.Allowed {
		t.Fatal("the eviction was still deferred after 45s under maxHold 30s, afterMaxHold Release")
	}
	if held := clk.Since(start); held < 30*time.Second {
		t.Errorf("released after %s, before maxHold", held)
	}
	if a := resp.AuditAnnotations[RuleMaxHold]; !strings.Contains(a, "released after a hold of 30s") || !strings.Contains(a, "cooldown") {
		t.Errorf("audit annotation %q, want the release and the cooldown it let go", a)
	}
	if g, err = ledgers.ReadGroup(context.Background(), budget.GroupID{UID: "ds"}); err != nil {
		t.Fatal(err)
	}
	if last := g.Records[len(g.Records)-1]; last.UID != pod.UID || !last.Released {
		t.Errorf("the last ledger record is %+v, want the released eviction of %s", last, pod.Name)
	}
	var onPod, onNode bool
	for _, e := range rec.events {
		onPod = onPod || e.reason == "EvictionReleased" && e.kind == "Pod" && e.name == pod.Name
		onNode = onNode || e.reason == "EvictionReleased" && e.kind == "Node" && e.name == "node-0"
	}
	if !onPod || !onNode {
		t.Errorf("EvictionReleased on the pod %v, on the node %v; want both", onPod, onNode)
	}
}

// TestOutlastsDrainerDeadline: a deferral warns when the hold would outlast the evicting
// requester's drain deadline (after the hold began, or Karpenter's NodeClaim time), with
// the time the drainer acts and when the budget frees; not when the budget frees first.
func TestOutlastsDrainerDeadline(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "p1"}}
	ca := v1alpha1.Requester{Users: []string{"ca"}, Deadline: &v1alpha1.DrainDeadline{After: &metav1.Duration{Duration: 2 * time.Minute}, Then: v1alpha1.DrainerGiveUp}}
	karpenter := v1alpha1.Requester{Users: []string{"karpenter"}, Deadline: &v1alpha1.DrainDeadline{NodeClaim: true, Then: v1alpha1.DrainerForce}}
	policies := []v1alpha1.DisruptionPolicy{dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Requesters = []v1alpha1.Requester{ca, karpenter} })}
	deferred := func(wait time.Duration) Decision {
		return Decision{Guarded: true, Violations: decision.Violations{{Policy: "agents", Rule: RuleCooldown, Action: decision.Deny, Wait: wait}}}
	}
	karpenterAt := now.Add(3 * time.Minute)
	nodeClaim := func() (time.Time, bool) { return karpenterAt, true }
	cases := map[string]struct {
		user  string
		d     Decision
		held  time.Duration
		mut   func(*v1alpha1.DisruptionPolicySpec)
		warns []string
	}{
		"a wait past cluster-autoscaler's timeout warns": {user: "ca", d: deferred(10 * time.Minute), held: time.Minute,
			warns: []string{"gives up the drain at 2026-11-30T12:01:00Z", "the budget frees at 2026-11-30T12:10:00Z"}},
		"a wait holdfast cannot tell warns": {user: "ca", d: deferred(0), held: 10 * time.Second,
			warns: []string{"gives up the drain at 2026-11-30T12:01:50Z", "cannot tell when the budget frees"}},
		"a wait within the timeout does not warn": {user: "ca", d: deferred(30 * time.Second), held: time.Minute},
		"Karpenter's NodeClaim deadline warns": {user: "karpenter", d: deferred(time.Hour), held: time.Minute,
			warns: []string{"forces the pod out", "at 2026-11-30T12:03:00Z"}},
		"a release before the deadline frees the budget first": {user: "karpenter", d: deferred(time.Hour), held: time.Minute,
			mut: func(s *v1alpha1.DisruptionPolicySpec) { release(s) }},
		"a requester without a deadline is not warned of": {user: "alice", d: deferred(time.Hour), held: time.Minute},
		"an admitted eviction is not warned of":           {user: "ca", d: Decision{Guarded: true}, held: time.Minute},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ps := policies
			if tc.mut != nil {
				ps = []v1alpha1.DisruptionPolicy{*policies[0].DeepCopy()}
				tc.mut(&ps[0].Spec)
			}
			in := Input{Policies: ps, User: authenticationv1.UserInfo{Username: tc.user}, Now: now}
			note, ok := outlasts(pod, tc.d, in, tc.held, nodeClaim)
			if ok != (len(tc.warns) > 0) {
				t.Fatalf("warned %v (%q), want %v", ok, note, len(tc.warns) > 0)
			}
			for _, w := range tc.warns {
				if !strings.Contains(note, w) {
					t.Errorf("warning %q does not say %q", note, w)
				}
			}
		})
	}
}

// TestNodeClaimDeadline reads Karpenter's deadline from the NodeClaim whose status names
// the node, less the pod's grace period.
func TestNodeClaimDeadline(t *testing.T) {
	nc := &unstructured.Unstructured{}
	nc.SetGroupVersionKind(nodeClaimGVK.GroupVersion().WithKind("NodeClaim"))
	nc.SetName("default-x7k2p")
	nc.SetAnnotations(map[string]string{KarpenterDeadlineAnnotation: "2026-11-30T13:00:00Z"})
	if err := unstructured.SetNestedField(nc.Object, "ip-10-0-0-1", "status", "nodeName"); err != nil {
		t.Fatal(err)
	}
	h := &Handler{APIReader: fake.NewClientBuilder().WithObjects(nc).Build()}
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: "ip-10-0-0-1", TerminationGracePeriodSeconds: ptr.To(int64(120))}}
	at, ok := h.nodeClaimDeadline(context.Background(), pod)
	if want := time.Date(2026, 11, 30, 12, 58, 0, 0, time.UTC); !ok || !at.Equal(want) {
		t.Errorf("deadline %v %v, want %v", at, ok, want)
	}
	pod.Spec.NodeName = "ip-10-0-0-2"
	if _, ok := h.nodeClaimDeadline(context.Background(), pod); ok {
		t.Error("a node without a NodeClaim has a Karpenter deadline")
	}
}

// TestReleaseCountsOnlyThePolicysOwnHold: maxHold counts each policy's own hold of the
// pod (Holds), not the pod's. Policy "freeze" (no afterMaxHold) holds the drain for an hour with a Deny window;
// policy "agents" (afterMaxHold Release, maxHold 30s, cooldown 10m) holds nothing during
// it. When the window ends an eviction of another agent was admitted a moment before (by a
// requester the freeze exempts), so "agents"' cooldown now defers the pod: its own hold has
// lasted no time at all, and it is not released until it has lasted its own 30s: counted
// per pod, the freeze's hour released it at once.
func TestReleaseCountsOnlyThePolicysOwnHold(t *testing.T) {
	agents := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		release(s)
		s.Cooldown = &metav1.Duration{Duration: 10 * time.Minute}
	})
	freeze := dp(func(s *v1alpha1.DisruptionPolicySpec) {
		s.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 10 * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}
	})
	freeze.Name = "freeze"
	objs, pod := agentGroup(nil)
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok {
			q.Status.Conditions[0].Status = corev1.ConditionTrue
			q.Status.Conditions[0].LastTransitionTime = metav1.NewTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
		}
	}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	ledgers := &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &agents, &freeze)...),
		Clock: clk, Ledgers: ledgers, Holds: &Holds{}, Events: &events.Limiter{Recorder: &eventLog{}}}
	req := podEviction(pod, "alice")
	// The drain retries every 30s through the freeze window: deferred by the window alone.
	for clk.Now().Before(time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC)) {
		resp := h.Handle(context.Background(), req)
		if resp.Allowed || resp.Result.Code != http.StatusTooManyRequests {
			t.Fatalf("at %s answered %d, want 429 inside the freeze", clk.Now().Format(time.TimeOnly), resp.Result.Code)
		}
		if clk.Now().Equal(time.Date(2026, 11, 30, 10, 59, 30, 0, time.UTC)) {
			// Another agent's eviction, admitted for a requester the freeze exempts.
			g, err := ledgers.ReadGroup(context.Background(), budget.GroupID{UID: "ds"})
			if err != nil {
				t.Fatal(err)
			}
			if err := g.RecordEviction(context.Background(), ledgers, budget.Eviction{Pod: "other", UID: "other", At: clk.Now(), By: "replica-0"}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		clk.Step(30 * time.Second)
	}
	// 11:00:00: the window has ended; "agents"' cooldown (10m, from 10:59:30) is the only
	// hold, and it has held the pod for no time at all.
	resp := h.Handle(context.Background(), req)
	t.Logf("at 11:00:00 allowed=%v message=%q audit=%v", resp.Allowed, resp.Result.Message, resp.AuditAnnotations)
	if resp.Allowed {
		t.Fatalf("released at once when the freeze ended (audit %q): policy agents' own hold (its cooldown) had lasted 0s, "+
			"not its maxHold of 30s; the hour counted was policy freeze's, which does not release", resp.AuditAnnotations[RuleMaxHold])
	}
	// The way out stays: once "agents" has held the pod for its own 30s, it lets go.
	for resp.Allowed == false && clk.Now().Before(time.Date(2026, 11, 30, 11, 1, 0, 0, time.UTC)) {
		clk.Step(10 * time.Second)
		resp = h.Handle(context.Background(), req)
	}
	if at := clk.Now(); !resp.Allowed || at.Before(time.Date(2026, 11, 30, 11, 0, 30, 0, time.UTC)) {
		t.Fatalf("at %s allowed=%v (%s), want released once policy agents' own hold reached 30s (11:00:30)", at.Format(time.TimeOnly), resp.Allowed, resp.Result.Message)
	}
	if len(resp.AuditAnnotations) == 0 {
		t.Errorf("the release is not on record: audit %v", resp.AuditAnnotations)
	}
}
