//go:build integration

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// TestTwoWritersFight replays a revision storm of two writers with distinct field managers
// (kubebuilder operators all default to "manager") through the real API server: an
// operator creates the Deployment with template A, a GitOps controller changes it to B,
// the operator to C; when the GitOps controller goes back to B after C finished, the
// revert window refuses it, and the refusal names the request's user and field manager and
// the template's last writer. The journal records each template's writer, the policy's
// WritersFighting condition names the workload and both writers, the Deployment gets a
// WritersFighting Event and holdfast_rollout_writers_fighting counts it.
func TestTwoWritersFight(t *testing.T) {
	ctx := context.Background()
	ns := guardedNamespace(t, "writers", revertWindow)
	operator, gitops := client.FieldOwner("operator-a"), client.FieldOwner("gitops-b")

	a := createKas(t, ns, operator)
	waitForWriters(t, a, "operator-a")
	b := rollTo(t, a, "registry.example/main:B", "2", gitops)
	waitForWriters(t, a, "operator-a", "gitops-b")
	// B→C by operator-a, a new template.
	c := rolledOut(t, rollTo(t, b, "registry.example/main:C", "3", operator))
	j := waitForWriters(t, a, "operator-a", "gitops-b", "operator-a")
	eventually(t, "C's rollout finished in the journal", func() bool {
		j = readJournal(t, a)
		return j != nil && j.Current().Writer == "operator-a" && j.Current().Finished != nil
	})

	// gitops-b goes back to B: a return after a finished rollout within the window. The
	// cache may lag operator-a's change by a moment; the refusal then names the writer
	// before it, so it is read again until it names operator-a.
	var msg string
	eventually(t, "the refusal names both writers", func() bool {
		err := k8s.Update(ctx, withImage(c, "registry.example/main:B"), gitops)
		assertHoldfastDenied(t, err, rollout.RuleRevertWindow, "spec.template")
		msg = err.Error()
		return strings.Contains(msg, `the template was last changed by field manager "operator-a"`)
	})
	for _, want := range []string{`with field manager "gitops-b"`, `request by user "`, "two writers may be alternating"} {
		if !strings.Contains(msg, want) {
			t.Errorf("refusal %q does not say %q", msg, want)
		}
	}

	name := ns + "-writers"
	want := fmt.Sprintf(`newest: Deployment %s/kas, by field managers "gitops-b" then "operator-a"`, ns)
	eventually(t, "the policy's WritersFighting condition names the workload and both writers", func() bool {
		got := &v1alpha1.RolloutPolicy{}
		if k8s.Get(ctx, client.ObjectKey{Name: name}, got) != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionWritersFighting)
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonAlternating && strings.Contains(c.Message, want)
	})
	eventually(t, "a WritersFighting Event on the Deployment", func() bool {
		var evs eventsv1.EventList
		if k8s.List(ctx, &evs, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "WritersFighting" && e.Regarding.Name == "kas" && e.Type == corev1.EventTypeWarning &&
				strings.Contains(e.Note, `"gitops-b"`) && strings.Contains(e.Note, `"operator-a"`) {
				return true
			}
		}
		return false
	})
	eventually(t, "holdfast_rollout_writers_fighting counts the workload", func() bool {
		return gauge(t, "holdfast_rollout_writers_fighting", name) == 1
	})
}

// TestOneWriterDoesNotFight: one writer changing templates twice, and a second writer that
// only scales, is no fight.
func TestOneWriterDoesNotFight(t *testing.T) {
	ctx := context.Background()
	ns := guardedNamespace(t, "writers", revertWindow)
	operator := client.FieldOwner("operator-a")
	a := createKas(t, ns, operator)
	waitForWriters(t, a, "operator-a")
	b := rollTo(t, a, "registry.example/main:B", "2", operator)
	waitForWriters(t, a, "operator-a", "operator-a")
	c := rollTo(t, b, "registry.example/main:C", "3", operator)
	scaled := c.DeepCopy()
	scaled.Spec.Replicas = new(int32(2))
	if err := k8s.Update(ctx, scaled, client.FieldOwner("autoscaler")); err != nil {
		t.Fatal(err)
	}
	waitForWriters(t, a, "operator-a", "operator-a", "operator-a")
	eventually(t, "the policy's WritersFighting condition is False", func() bool {
		got := &v1alpha1.RolloutPolicy{}
		if k8s.Get(ctx, client.ObjectKey{Name: ns + "-writers"}, got) != nil {
			return false
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionWritersFighting)
		return c != nil && c.Status == metav1.ConditionFalse && got.Status.ObservedGeneration == got.Generation
	})
	if g := gauge(t, "holdfast_rollout_writers_fighting", ns+"-writers"); g != 0 {
		t.Errorf("holdfast_rollout_writers_fighting = %v, want 0", g)
	}
}

// revertWindow sets a revert window of an hour, longer than any test.
func revertWindow(r *v1alpha1.RolloutRules) { r.RevertWindow = &metav1.Duration{Duration: time.Hour} }

// readJournal reads d's revision journal from the API server, nil while there is none.
func readJournal(t *testing.T, d *appsv1.Deployment) *journal.Journal {
	t.Helper()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(v1alpha1.KindDeployment, d.Namespace, d.Name)}, cm); err != nil {
		return nil
	}
	j, err := journal.Decode(cm)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// waitForWriters waits until d's journal records these writers, oldest first, its current
// revision by the last. Revisions the journal spliced in without seeing them become
// current (a template kube numbered between two of its looks) have no writer and are left
// out, and so are repeats of one writer in a row.
func waitForWriters(t *testing.T, d *appsv1.Deployment, writers ...string) *journal.Journal {
	t.Helper()
	var j *journal.Journal
	var got []string
	want := strings.Join(slices.Compact(slices.Clone(writers)), ",")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got = got[:0]
		if j = readJournal(t, d); j != nil {
			for _, r := range j.Revisions {
				got = append(got, r.Writer)
			}
			known := slices.Compact(slices.DeleteFunc(slices.Clone(got), func(w string) bool { return w == "" }))
			if strings.Join(known, ",") == want && j.Current().Writer == writers[len(writers)-1] {
				return j
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the journal records the writers %q, want %q", got, writers)
		}
	}
}

// gauge is the value of holdfast's gauge name for the policy, -1 when it has none.
func gauge(t *testing.T, name, policy string) float64 {
	t.Helper()
	families, err := metricsRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "policy" && l.GetValue() == policy {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// decisionOf is a rollout refusal's message without the writers it ends with (only the
// webhook knows them: holdfast check has no request), and whether it ended with them.
func decisionOf(msg string) (string, bool) {
	i := strings.LastIndex(msg, " (request by user ")
	if i < 0 || !strings.HasSuffix(msg, ")") {
		return msg, false
	}
	return msg[:i], true
}
