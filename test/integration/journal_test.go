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

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestAPausedDeploymentsJournalNeverLoops replays the sequence that once put the journal
// recorder in a write loop: template changes to a Deployment created paused (so it has no
// ReplicaSet and nothing has rolled out), guarded by a policy with only
// argsMatchReplicas. A journal needs a revision, so there is none while paused, and no
// journal is read as invalid; once resumed, each observed change is written at most once.
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
	writes := 0
	drain := func(quiet time.Duration) {
		for {
			select {
			case ev := <-watcher.ResultChan():
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					writes++
				}
			case <-time.After(quiet):
				return
			}
		}
	}
	invalidBefore := counter(t, "holdfast_journal_invalid_total")

	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	const changes = 40
	for i := range changes {
		d.Spec.Template.Spec.Containers[0].Image = fmt.Sprintf("registry.example/main:%d", i)
		update(t, d) // staged while paused: admitted
	}
	drain(2 * time.Second)
	if writes != 0 {
		t.Errorf("%d journal writes while paused with nothing rolled out, want 0", writes)
	}
	if got := counter(t, "holdfast_journal_invalid_total") - invalidBefore; got != 0 {
		t.Errorf("%v journals read as invalid, want 0", got)
	}

	// Resumed: the staged template rolls out and is the journal's first revision.
	d.Spec.Paused = false
	update(t, d)
	j := journalOf(t, v1alpha1.KindDeployment, ns, d.Name, d.Generation)
	drain(2 * time.Second)
	if len(j.Revisions) != 1 || writes > 2 {
		t.Errorf("after the resume: %d revisions and %d writes, want 1 revision in at most 2 writes", len(j.Revisions), writes)
	}
	if got := counter(t, "holdfast_journal_invalid_total") - invalidBefore; got != 0 {
		t.Errorf("%v journals read as invalid, want 0", got)
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
