//go:build integration

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestAPausedDeploymentsJournalNeverLoops replays the sequence that once put the journal
// recorder in a write loop: template changes to a Deployment created paused (so it has no
// ReplicaSet and nothing has rolled out), guarded by a policy with only
// argsMatchReplicas. A journal needs a revision, so there is none while paused, and no
// journal is read as invalid or rebuilt; once resumed, each observed change is written at
// most once.
func TestAPausedDeploymentsJournalNeverLoops(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	applyPolicy(t, ns, utiltesting.MakeRolloutPolicy("server-count").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())
	d := konnectivity(ns, 3, "3")
	d.Spec.Paused = true
	name := journal.Name(v1alpha1.KindDeployment, ns, d.Name)

	w, err := client.NewWithWatch(restConfig, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	watcher, err := w.Watch(ctx, &corev1.ConfigMapList{}, client.InNamespace(holdfastNamespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	// writes counts the journal's stored versions (each create or update is a new
	// resourceVersion), deletes its deletions.
	writes, deletes := 0, 0
	drain := func(quiet time.Duration) {
		for {
			select {
			case ev := <-watcher.ResultChan():
				switch ev.Type {
				case watch.Added, watch.Modified:
					writes++
				case watch.Deleted:
					deletes++
				}
			case <-time.After(quiet):
				return
			}
		}
	}
	invalidBefore := counter(t, "holdfast_journal_invalid_total")
	rebuiltBefore := counter(t, "holdfast_journal_rebuilds_total")
	failedBefore := reconcileErrors(t, "journal-deployment")
	looped := func(phase string) {
		t.Helper()
		if got := counter(t, "holdfast_journal_invalid_total") - invalidBefore; got != 0 {
			t.Errorf("%s: %v journals read as invalid, want 0", phase, got)
		}
		if got := counter(t, "holdfast_journal_rebuilds_total") - rebuiltBefore; got != 0 {
			t.Errorf("%s: %v journals rebuilt, want 0", phase, got)
		}
		// A recorder that reads its own write back from a cache that lags writes over a
		// version no longer stored: a conflict, retried.
		failed := reconcileErrors(t, "journal-deployment") - failedBefore
		if failed > 3 {
			t.Errorf("%s: %v failed reconciles of the recorder, want at most 3", phase, failed)
		}
		t.Logf("%s: %d journal writes, %d deletes, %v failed reconciles of the recorder", phase, writes, deletes, failed)
	}

	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	const changes = 100
	for i := range changes {
		d.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("registry.example/main:%d", i)
		update(t, d) // staged while paused: admitted
	}
	drain(2 * time.Second)
	if writes != 0 || deletes != 0 {
		t.Errorf("%d journal writes and %d deletes while paused with nothing rolled out, want none", writes, deletes)
	}
	looped("paused")

	// Resumed: the staged template rolls out and is the journal's first revision; each
	// change after it is observed and written once.
	d.Spec.Paused = false
	update(t, d)
	first := d.Generation
	j := journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	if len(j.Revisions) != 1 {
		t.Errorf("after the resume: %d revisions, want 1", len(j.Revisions))
	}
	for i := range changes {
		d.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("registry.example/resumed:%d", i)
		update(t, d)
	}
	journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	drain(2 * time.Second)
	observed := int(d.Generation - first + 1) // the resume and each change after it
	if writes > observed {
		t.Errorf("%d journal writes for %d observed changes, want at most one per change", writes, observed)
	}
	looped("resumed")

	// A journal edited by hand to have no revision reads as invalid: the leader, which
	// sees the edit, rebuilds it once, and the rebuilt journal reads as valid.
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: holdfastNamespace, Name: name}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"journal": fmt.Sprintf(`{"kind":"Deployment","namespace":%q,"name":%q,"uid":%q,"generation":%d,"revisions":[]}`,
		ns, d.Name, d.UID, d.Generation)}
	update(t, cm)
	writes = 0
	journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	drain(2 * time.Second)
	if got := counter(t, "holdfast_journal_rebuilds_total") - rebuiltBefore; got != 1 {
		t.Errorf("a journal edited to be invalid was rebuilt %v times, want once", got)
	}
	if writes > 2 { // the edit and the rebuild
		t.Errorf("%d journal writes after the edit, want at most 2", writes)
	}
}

// counter is the value of holdfast's counter name (without labels).
func counter(t *testing.T, name string) float64 {
	t.Helper()
	families, err := metricsRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			sum := 0.0
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// reconcileErrors is how many reconciles of holdfast's controller name failed (a write
// conflict, an error returned): each is retried.
func reconcileErrors(t *testing.T, name string) float64 {
	t.Helper()
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == name {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
