package journal

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

var serverCount = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity", Flag: "--server-count"}}

// deployment is a Deployment running image with --server-count=replicas; complete says
// whether its status shows the rollout finished.
func deployment(image string, replicas int32, complete, paused bool) *workload.Workload {
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kas", UID: "uid-1", Generation: 3},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Paused: paused, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "kas", Image: image},
			{Name: "konnectivity", Image: "k:1", Args: []string{"--server-count=" + string(rune('0'+replicas))}},
		}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3},
	}
	if complete {
		d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.AvailableReplicas = replicas, replicas, replicas
	}
	w, err := workload.From(d)
	if err != nil {
		panic(err)
	}
	return w
}

func sumOf(w *workload.Workload) string {
	s, _ := w.Template.Sum()
	return s
}

func TestObserve(t *testing.T) {
	a, b := deployment("a", 3, true, false), deployment("b", 3, false, false)
	j := Observe(nil, a, history.History{}, serverCount, t0)
	if cur := j.Current(); len(j.Revisions) != 1 || cur.Template != sumOf(a) || cur.Finished == nil || !cur.Since.Equal(t0) {
		t.Fatalf("first observation: %+v", j)
	}

	// A new template rolling out becomes current when observed, unfinished.
	j = Observe(j, b, history.History{}, serverCount, t0.Add(time.Minute))
	if len(j.Revisions) != 2 || j.Current().Finished != nil || !j.Revisions[0].Until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the change: %+v", j.Revisions)
	}

	// Paused: nothing new becomes current, and the stall clock restarts at the resume.
	c := deployment("c", 3, false, true)
	j = Observe(j, c, history.History{}, serverCount, t0.Add(2*time.Minute))
	if len(j.Revisions) != 2 || !j.Held {
		t.Fatalf("a paused edit was recorded as current: %+v", j)
	}
	j = Observe(j, b, history.History{}, serverCount, t0.Add(5*time.Minute))
	if j.Held || !j.Current().Progressed.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("the resume did not restart the stall clock: %+v", j)
	}

	// More available pods restart it; fewer later do not.
	h := history.History{Revisions: []history.Revision{{Name: "b", Number: 2, Template: b.Template, Serving: 2}}}
	j = Observe(j, b, h, serverCount, t0.Add(6*time.Minute))
	if cur := j.Current(); cur.Available != 2 || !cur.Progressed.Equal(t0.Add(6*time.Minute)) {
		t.Fatalf("progress not recorded: %+v", cur)
	}
	h.Revisions[0].Serving = 1
	j = Observe(j, b, h, serverCount, t0.Add(7*time.Minute))
	if cur := j.Current(); cur.Available != 2 || !cur.Progressed.Equal(t0.Add(6*time.Minute)) {
		t.Fatalf("a lost pod counted as progress: %+v", cur)
	}

	// Finished is sticky: a pod lost later is a health problem, not a rollout.
	done := deployment("b", 3, true, false)
	j = Observe(j, done, h, serverCount, t0.Add(8*time.Minute))
	j = Observe(j, b, h, serverCount, t0.Add(9*time.Minute))
	if f := j.Current().Finished; f == nil || !f.Equal(t0.Add(8*time.Minute)) {
		t.Fatalf("finished was not sticky: %+v", j.Current())
	}

	// A scale (only --server-count follows replicas) keeps the revision's times (I4).
	scaled := deployment("b", 5, false, false)
	j = Observe(j, scaled, h, serverCount, t0.Add(10*time.Minute))
	if cur := j.Current(); len(j.Revisions) != 2 || cur.Template != sumOf(scaled) || !cur.Since.Equal(t0.Add(time.Minute)) || cur.Finished == nil {
		t.Fatalf("a scale became a revision: %+v", j.Revisions)
	}

	// At most MaxRevisions are kept.
	for i := range 2 * MaxRevisions {
		j = Observe(j, deployment(string(rune('d'+i)), 3, true, false), history.History{}, nil, t0.Add(time.Duration(20+i)*time.Minute))
	}
	if len(j.Revisions) != MaxRevisions {
		t.Fatalf("%d revisions kept, want %d", len(j.Revisions), MaxRevisions)
	}
}

func TestViewFillsInWhatTheJournalHasNotRecorded(t *testing.T) {
	a, b := deployment("a", 3, true, false), deployment("b", 3, false, false)
	j := Observe(nil, a, history.History{}, nil, t0)
	b.Generation = 4 // admitted after the journal's last look

	tl := View(j, v1alpha1.KindDeployment, b, history.History{}, nil, t0.Add(time.Hour))
	if cur := tl.Current(); !cur.Pending || !cur.Since.Equal(t0.Add(time.Hour)) || cur.Finished != nil || tl.Recorded {
		t.Fatalf("an unrecorded template must be current since now and unfinished: %+v", tl)
	}
	if prev := tl.Previous(); prev.Template != sumOf(a) || !prev.Until.Equal(t0.Add(time.Hour)) {
		t.Fatalf("previous: %+v", prev)
	}
	if j.Current().Until != nil {
		t.Fatal("View changed the stored journal")
	}

	// Without a journal, the cluster's history tells.
	h := history.History{Revisions: []history.Revision{{Name: "a", Number: 1, Template: a.Template, Created: t0.Add(-time.Hour)}}, LastActivity: t0.Add(-time.Minute)}
	tl = View(nil, v1alpha1.KindDeployment, a, h, nil, t0)
	if cur := tl.Current(); cur.Pending || !cur.Since.Equal(t0.Add(-time.Hour)) || cur.Finished == nil || !cur.Progressed.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("from history: %+v", cur)
	}
}

// A held workload's old object of a generation the journal has not seen may have left its
// template and come back (a cancel, then a pause): the journal does not vouch for it.
func TestViewDoesNotVouchForAHeldGenerationItHasNotSeen(t *testing.T) {
	a := deployment("a", 3, true, false)
	j := Observe(nil, a, history.History{}, nil, t0)
	back := deployment("a", 3, false, true) // a → b → a, paused, before the leader looked
	back.Generation = 6

	tl := View(j, v1alpha1.KindDeployment, back, history.History{}, nil, t0.Add(time.Hour))
	if cur := tl.Current(); !cur.Lagging || cur.Finished != nil || !cur.Since.Equal(t0.Add(time.Hour)) {
		t.Fatalf("the journal vouched for a held generation it has not seen: %+v", cur)
	}
	back.Generation = 3 // seen: what it recorded holds
	tl = View(j, v1alpha1.KindDeployment, back, history.History{}, nil, t0.Add(time.Hour))
	if cur := tl.Current(); cur.Lagging || !cur.Since.Equal(t0) {
		t.Fatalf("a recorded generation: %+v", cur)
	}
}

// A journal rebuilt from the cluster's history cannot tell when a rollback happened: a
// current revision kube renumbered became current, as far as it knows, now.
func TestObserveRebuiltAfterARollback(t *testing.T) {
	a, b := deployment("a", 3, true, false), deployment("b", 3, true, false)
	created := history.History{Revisions: []history.Revision{
		{Name: "a", Number: 1, Template: a.Template, Created: t0.Add(-time.Hour)},
		{Name: "b", Number: 2, Template: b.Template, Created: t0.Add(-time.Minute)},
	}}
	if cur := Observe(nil, b, created, nil, t0).Current(); !cur.Since.Equal(t0.Add(-time.Minute)) {
		t.Fatalf("a finished rollout keeps the history's times: %+v", cur)
	}
	rolledBack := history.History{Revisions: []history.Revision{created.Revisions[1], created.Revisions[0]}}
	rolledBack.Revisions[1].Number = 3
	j := Observe(nil, a, rolledBack, nil, t0)
	if cur, prev := j.Current(), j.Revisions[0]; !cur.Since.Equal(t0) || cur.Finished == nil || !prev.Until.Equal(t0) {
		t.Fatalf("a rollback's time is unknown, so now: %+v", j.Revisions)
	}
}

func TestDecodeRefusesWhatHoldfastDidNotWrite(t *testing.T) {
	good := Observe(nil, deployment("a", 3, true, false), history.History{}, nil, t0)
	good = Observe(good, deployment("b", 3, true, false), history.History{}, nil, t0.Add(time.Minute))
	cm, err := Encode(good, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(cm); err != nil {
		t.Fatalf("a journal holdfast wrote: %v", err)
	}
	edit := func(f func(j map[string]string)) *corev1.ConfigMap {
		c := cm.DeepCopy()
		f(c.Data)
		return c
	}
	cases := map[string]*corev1.ConfigMap{
		"not JSON": edit(func(d map[string]string) { d[dataKey] = "{" }),
		"no key":   edit(func(d map[string]string) { delete(d, dataKey) }),
		"unknown field": edit(func(d map[string]string) {
			d[dataKey] = strings.Replace(d[dataKey], `"kind"`, `"allow":true,"kind"`, 1)
		}),
		"another's name": edit(func(d map[string]string) {
			d[dataKey] = strings.Replace(d[dataKey], `"name":"kas"`, `"name":"other"`, 1)
		}),
		"no revisions": edit(func(d map[string]string) {
			d[dataKey] = `{"kind":"Deployment","namespace":"ns","name":"kas","revisions":[]}`
		}),
		"a bad fingerprint": edit(func(d map[string]string) {
			d[dataKey] = strings.Replace(d[dataKey], sumOf(deployment("a", 3, true, false)), "allow", 1)
		}),
		"the current revision ended": edit(func(d map[string]string) {
			d[dataKey] = strings.Replace(d[dataKey], `"finished":"2026-12-01T12:01:00Z"`, `"until":"2026-12-01T12:01:00Z"`, 1)
		}),
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(c); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Decode = %v, want ErrInvalid", err)
			}
			s := &Store{}
			s.Add(cm)
			s.Add(c) // an edit by hand replaces the valid version
			if j := s.Get(v1alpha1.KindDeployment, "ns", "kas"); j != nil {
				t.Fatalf("an invalid journal was read: %+v", j)
			}
		})
	}
}

func TestRetention(t *testing.T) {
	p := func(r v1alpha1.RolloutRules) v1alpha1.RolloutPolicy {
		return v1alpha1.RolloutPolicy{Spec: v1alpha1.RolloutPolicySpec{Rules: r}}
	}
	got := Retention([]v1alpha1.RolloutPolicy{
		p(v1alpha1.RolloutRules{MinInterval: &metav1.Duration{Duration: time.Minute}}),
		p(v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{Duration: time.Hour}}),
		p(v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}),
	})
	if got != time.Hour {
		t.Fatalf("Retention = %v, want the longest look back, 1h", got)
	}
	if got := Retention(nil); got != 0 {
		t.Fatalf("Retention without policies = %v", got)
	}
}

// TestServedOutlivesItsRevisions: once a journal is written with a revision that served,
// its ConfigMap says so for good, so that eight failed releases trimming that revision
// away do not make a serving workload look new (and drop its fleet slot); a journal of a
// workload that never served says nothing, and a bad value is an invalid journal.
func TestServedOutlivesItsRevisions(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	sum := func(i int) string { return fmt.Sprintf("%064x", i) }
	done := t0
	j := &Journal{Kind: "Deployment", Namespace: "ns", Name: "web", Revisions: []Revision{{Template: sum(0), Since: t0, Finished: &done, Available: 3}}}
	for i := 1; i <= MaxRevisions; i++ {
		cm, err := Encode(j, "holdfast-system")
		if err != nil {
			t.Fatal(err)
		}
		if j, err = Decode(cm); err != nil {
			t.Fatal(err)
		}
		// A release that never gets a pod Ready replaces the current one.
		until := t0.Add(time.Duration(i) * time.Minute)
		j.Revisions[len(j.Revisions)-1].Until = &until
		j.Revisions = append(j.Revisions, Revision{Template: sum(i), Since: until, Progressed: until})
		if len(j.Revisions) > MaxRevisions {
			j.Revisions = j.Revisions[1:]
		}
	}
	if j.Revisions[0].Finished != nil {
		t.Fatal("the finished revision is still kept: the test trims nothing")
	}
	if !j.Served() {
		t.Error("a workload that served looks new after eight failed releases")
	}
	never := &Journal{Kind: "Deployment", Namespace: "ns", Name: "new", Revisions: []Revision{{Template: sum(1), Since: t0, Progressed: t0}}}
	cm, _ := Encode(never, "holdfast-system")
	if _, ok := cm.Data[servedKey]; ok {
		t.Error("a workload that never served is recorded as served")
	}
	cm.Data[servedKey] = "yes"
	if _, err := Decode(cm); !errors.Is(err, ErrInvalid) {
		t.Errorf("served: yes decoded as %v, want an invalid journal", err)
	}
}

// A Deployment created paused has rolled nothing out: observing it gives a journal with no
// revision, which Encode refuses to write (the readers would take it as invalid and the
// recorder rebuild it, in a loop).
func TestEncodeNeverWritesWhatReadsAsInvalid(t *testing.T) {
	j := Observe(nil, deployment("a", 3, false, true), history.History{}, serverCount, t0)
	if len(j.Revisions) != 0 {
		t.Fatalf("a Deployment created paused has a current revision: %+v", j.Revisions)
	}
	if cm, err := Encode(j, "holdfast-system"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Encode of a journal with no revision = %v, %v; want ErrInvalid", cm, err)
	}
}

// TestHeldStagedTemplateProgresses: a held workload whose staged template has pods (a held
// StatefulSet grown over it; here a paused Deployment whose new template reached pods
// before the pause) records their coming up as progress of that template, which the
// fleet limit reads to keep a staged start's slot while its pods come up.
func TestHeldStagedTemplateProgresses(t *testing.T) {
	a, b := deployment("a", 3, true, false), deployment("b", 3, false, true)
	j := Observe(nil, a, history.History{}, nil, t0)
	h := history.History{Revisions: []history.Revision{{Name: "a", Number: 1, Template: a.Template, Serving: 3},
		{Name: "b", Number: 2, Template: b.Template, Serving: 1}}}
	j = Observe(j, b, h, nil, t0.Add(time.Minute))
	if cur := j.Current(); !j.Held || cur.Template != sumOf(b) || cur.Available != 1 {
		t.Fatalf("the staged template with a pod: held %t, %+v", j.Held, cur)
	}
	h.Revisions[1].Serving = 2
	j = Observe(j, b, h, nil, t0.Add(3*time.Minute))
	if cur := j.Current(); !j.Held || cur.Available != 2 || !cur.Progressed.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("a second pod of the staged template came up while held: %+v, want Available 2 progressed at %s", cur, t0.Add(3*time.Minute))
	}
	h.Revisions[1].Serving = 1
	if cur := Observe(j, b, h, nil, t0.Add(4*time.Minute)).Current(); cur.Available != 2 || !cur.Progressed.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("fewer pods later are no progress: %+v", cur)
	}
}

// TestLoweredPartitionReopensTheRollout: a StatefulSet's rollout finished under its
// partition (the canary) is Finished, and Finished is sticky through pod churn. Lowering the
// partition restarts it: the generation the leader sees rolls ordinals again, so Observe
// clears Finished (the fleet limit counts the workload, settle waits) and sets it once the
// status shows every ordinal updated. A pod deleted and replaced (no new generation) does
// not reopen it.
func TestLoweredPartitionReopensTheRollout(t *testing.T) {
	sts := func(gen int64, partition, updated, ready int32) *workload.Workload {
		s := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "etcd", UID: "uid-1", Generation: gen},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(int32(3)), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "etcd:2"}}}},
				UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
					RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(partition)}}},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: gen, Replicas: 3, UpdatedReplicas: updated, ReadyReplicas: ready},
		}
		w, err := workload.From(s)
		if err != nil {
			panic(err)
		}
		return w
	}
	stsUnobserved := func(gen int64, partition, updated, ready int32) *workload.Workload {
		w := sts(gen, partition, updated, ready)
		w.Rollout.Progress.Unobserved, w.Rollout.InProgress = gen, true
		return w
	}
	j := Observe(nil, sts(2, 2, 1, 3), history.History{}, nil, t0)
	if j.Current().Finished == nil {
		t.Fatalf("the canary under partition 2 (1 of 1 updated, all ready) is not finished: %+v", j.Current())
	}
	churn := Observe(j, sts(2, 2, 1, 2), history.History{}, nil, t0.Add(time.Minute))
	if churn.Current().Finished == nil {
		t.Errorf("a pod not Ready (no new generation) reopened the finished rollout")
	}
	lowered := Observe(j, sts(3, 0, 1, 3), history.History{}, nil, t0.Add(2*time.Minute))
	if lowered.Current().Finished != nil || !lowered.Current().Progressed.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("the partition lowered to 0 with 1 of 3 ordinals updated left the rollout finished: %+v", lowered.Current())
	}
	// Lowered before its controller acted: the status of the generation before counts the
	// canary's 1 of 3, the spec's target is 3.
	early := Observe(j, stsUnobserved(3, 0, 1, 3), history.History{}, nil, t0.Add(2*time.Minute))
	if early.Current().Finished != nil {
		t.Errorf("the partition lowered to 0, seen before the controller acted, left the rollout finished")
	}
	done := Observe(lowered, sts(3, 0, 3, 3), history.History{}, nil, t0.Add(3*time.Minute))
	if f := done.Current().Finished; f == nil || !f.Equal(t0.Add(3*time.Minute)) {
		t.Errorf("every ordinal updated and ready: Finished = %v, want %s", f, t0.Add(3*time.Minute))
	}
	// A scale up (partition 0, 3 to 10 replicas, seen before and while its controller
	// acts) leaves no pod of another revision: the rollout stays finished, as a
	// Deployment's does, and holds no fleet slot.
	base := Observe(nil, sts(2, 0, 3, 3), history.History{}, nil, t0)
	for _, w := range []*workload.Workload{stsUnobserved(3, 0, 3, 3), sts(3, 0, 4, 3)} {
		w.Rollout.Progress.Target, w.Rollout.Progress.Want, w.Rollout.Progress.Total = 10, 10, w.Rollout.Progress.Updated
		if up := Observe(base, w, history.History{}, nil, t0.Add(time.Minute)); up.Current().Finished == nil {
			t.Errorf("a scale up to 10 replicas (%s) reopened the finished rollout", w.Rollout.Progress)
		}
	}
}

// TestMinReadySecondsDelaysTheStall: the recorder keeps the workload's minReadySeconds
// under its own key (which the previous release, reading dataKey strictly, never sees), it
// reads back, a value holdfast would not write is invalid, and the stall clocks read from
// the journal (a fleet slot's, the eviction guard's shared rollout's through StallAfter)
// wait that much longer, as the rollout guard's does.
func TestMinReadySecondsDelaysTheStall(t *testing.T) {
	w := deployment("kas:2", 3, false, false)
	w.Strategy.MinReadySeconds = 30
	j := Observe(nil, w, history.History{}, nil, t0)
	if len(j.Revisions) == 0 {
		j.Revisions = []Revision{{Template: sumOf(w), Since: t0, Progressed: t0, Available: 1}}
	}
	j.ServedBefore = true
	if j.MinReadySeconds != 30 {
		t.Fatalf("observed minReadySeconds %d, want 30", j.MinReadySeconds)
	}
	cm, err := Encode(j, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	if cm.Data[minReadyKey] != "30" || strings.Contains(cm.Data[dataKey], "minReady") {
		t.Fatalf("stored as %q under its key, and in the journal's JSON: %s", cm.Data[minReadyKey], cm.Data[dataKey])
	}
	back, err := Decode(cm)
	if err != nil || back.MinReadySeconds != 30 {
		t.Fatalf("read back %v, %v", back, err)
	}
	settle := &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: time.Minute}}
	if got := back.StallAfter(settle); got != time.Minute+30*time.Second {
		t.Errorf("StallAfter = %s, want 1m30s", got)
	}
	if got := (*Journal)(nil).StallAfter(settle); got != time.Minute {
		t.Errorf("a nil journal's StallAfter = %s, want the rule's", got)
	}
	s := &Store{}
	s.Add(cm)
	progressed := back.Current().Progressed
	for _, c := range []struct {
		at      time.Duration
		stalled bool
	}{{time.Minute + 29*time.Second, false}, {time.Minute + 30*time.Second, true}} {
		slots := s.Slots([]workload.Ref{w.Ref}, time.Minute, 0, progressed.Add(c.at))
		if len(slots) != 1 || slots[0].Stalled != c.stalled {
			t.Errorf("%s after its last progress: slots %+v, want stalled=%t", c.at, slots, c.stalled)
		}
	}
	// A minReadySeconds the workload's owner set without bound delays the stall by at most
	// stallAfter again: a fleet slot or the group's drains are not held for good.
	back.MinReadySeconds = math.MaxInt32
	if got := back.StallAfter(settle); got != 2*time.Minute {
		t.Errorf("StallAfter with minReadySeconds %d = %s, want 2m", back.MinReadySeconds, got)
	}
	huge, err := Encode(back, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	s.Add(huge)
	if slots := s.Slots([]workload.Ref{w.Ref}, time.Minute, 0, progressed.Add(2*time.Minute)); len(slots) != 1 || !slots[0].Stalled {
		t.Errorf("2m after its last progress with minReadySeconds %d: slots %+v, want stalled", back.MinReadySeconds, slots)
	}
	for _, v := range []string{"0", "-5", "x"} {
		cm.Data[minReadyKey] = v
		if _, err := Decode(cm); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %q decoded as %v, want an invalid journal", minReadyKey, v, err)
		}
	}
}
