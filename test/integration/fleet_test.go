//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// TestFleetSlotsCannotBeCaptured: through the real API server, a tenant's three
// never-Ready Deployments in a selected namespace (a CREATE is never refused) hold no slot
// of a `maxInFlight: 3` fleet, so another workload's rollout is admitted; three workloads
// that served and are mid-rollout do hold the slots (the limit still works), and
// maxInFlightPerNamespace keeps one namespace to its share.
func TestFleetSlotsCannotBeCaptured(t *testing.T) {
	ctx := context.Background()
	tenant, other := createNamespace(t, map[string]string{"fleet-test": "slots"}), createNamespace(t, map[string]string{"fleet-test": "slots"})
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: tenant + "-fleet"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{tenant, other}}}}},
		Rules: v1alpha1.RolloutRules{Concurrency: &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(3)}}}}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)
	r := &corpusRun{t: t, ns: tenant}
	retag := func(obj client.Object, image string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := &appsv1.Deployment{}
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), d); err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].Image = image
			return k8s.Update(ctx, d)
		})
	}
	// served creates a workload that rolled out its first revision.
	served := func(ns, name string) client.Object {
		w := corpusWorkload(v1alpha1.KindDeployment, ns, name)
		if err := k8s.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		writeFinishedStatus(t, w)
		(&corpusRun{t: t, ns: ns}).journaled(w, true)
		return w
	}
	target := served(other, "kube-apiserver")

	for i := range 3 {
		dummy := corpusWorkload(v1alpha1.KindDeployment, tenant, fmt.Sprintf("dummy-%d", i))
		if err := k8s.Create(ctx, dummy); err != nil {
			t.Fatalf("a CREATE is never refused: %v", err)
		}
		r.journaled(dummy, false) // in the journal, unfinished, never served
	}
	if err := retag(target, "registry.example/main:2"); err != nil {
		t.Fatalf("three never-Ready dummies captured the fleet: %v", err)
	}
	writeFinishedStatus(t, target)
	(&corpusRun{t: t, ns: other}).journaled(target, true)

	// Three that served, mid-rollout, in the tenant's namespace: they hold the slots.
	for i := range 3 {
		w := served(tenant, fmt.Sprintf("serving-%d", i))
		if err := retag(w, "registry.example/broken:1"); err != nil {
			t.Fatalf("starting rollout %d of 3: %v", i, err)
		}
		r.journaled(w, false)
	}
	err := retag(target, "registry.example/main:3")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "serving-0") {
		t.Fatalf("a start with three served rollouts in flight: %v, want 403 naming them", err)
	}

	// maxInFlightPerNamespace: the tenant may hold one slot; the others' rollouts go on.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Rules.Concurrency.MaxInFlight = intstr.FromInt32(5)
		p.Spec.Rules.Concurrency.MaxInFlightPerNamespace = ptr32(1)
		return k8s.Update(ctx, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	intercepted(t, p)
	if err := retag(target, "registry.example/main:3"); err != nil {
		t.Fatalf("another namespace's start under maxInFlightPerNamespace: %v", err)
	}
	fresh := served(tenant, "serving-3")
	err = retag(fresh, "registry.example/main:2")
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "maxInFlightPerNamespace") {
		t.Fatalf("a fourth start in the tenant's namespace: %v, want 403 naming maxInFlightPerNamespace", err)
	}
}

func ptr32(v int32) *int32 { return &v }

// TestFleetBurstInOneReplica: twenty served Deployments under `maxInFlight: 5` change their
// templates at once, through the real API server to one holdfast replica. Exactly five
// start (counted from the Deployments' generations), and every other answer is the fleet
// limit's refusal: the replica records its starts one after another (its start lock), so
// none of them is answered "contended" after losing the race on the Lease five times.
func TestFleetBurstInOneReplica(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, map[string]string{"fleet-test": "burst"})
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-fleet"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		Rules: v1alpha1.RolloutRules{Concurrency: &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromInt32(5)}}}}
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)
	r := &corpusRun{t: t, ns: ns}
	var ws []*appsv1.Deployment
	for i := range 20 {
		w := corpusWorkload(v1alpha1.KindDeployment, ns, fmt.Sprintf("server-%02d", i))
		if err := k8s.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		writeFinishedStatus(t, w)
		ws = append(ws, r.journaled(w, true).(*appsv1.Deployment))
	}
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		w.Spec.Template.Spec.Containers[0].Image = "registry.example/main:2"
		wg.Go(func() { errs[i] = k8s.Update(ctx, w) })
	}
	wg.Wait()
	admitted, starts := 0, 0
	for i, err := range errs {
		switch {
		case err == nil:
			admitted++
		case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "maxInFlight"):
		default:
			t.Errorf("%s: %v, want admitted or refused by the fleet limit", ws[i].Name, err)
		}
		if fetched(t, ws[i]).GetGeneration() > 1 {
			starts++
		}
	}
	if admitted != 5 || starts != 5 {
		t.Errorf("%d admitted, %d Deployments whose template changed; want 5 and 5 under maxInFlight 5", admitted, starts)
	}
}
