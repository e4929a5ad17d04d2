package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
)

// fleetLabel marks the namespaces of the fleet burst.
const fleetLabel = "bench.holdfast.dev/fleet"

// fleet is the fleet ledger under a burst: o.fleet Deployments that have served, selected by
// one RolloutPolicy with maxInFlight 10%, all change their template at once (one client
// each). It reports what was admitted and refused per second, the answer's latency
// through the API server, the Lease conflicts the API server answered (its own
// apiserver_request_total), and counts the starts from kube's objects: the Deployments
// whose generation moved. More than the limit fails the run.
func (b *bench) fleet(ctx context.Context, o options) error {
	if err := b.install(); err != nil {
		return err
	}
	const namespaces = 20
	for i := range namespaces {
		if err := namespace(ctx, b.c, fmt.Sprintf("fleet-%02d", i), map[string]string{fleetLabel: "true"}); err != nil {
			return err
		}
	}
	began := time.Now()
	names := make([]client.ObjectKey, o.fleet)
	err := parallel(ctx, 4*runtime.NumCPU(), o.fleet, func(ctx context.Context, i int) error {
		d := fleetDeployment(fmt.Sprintf("fleet-%02d", i%namespaces), fmt.Sprintf("server-%04d", i))
		if err := b.c.Create(ctx, d); err != nil {
			return err
		}
		names[i] = client.ObjectKeyFromObject(d)
		// It served: the status its controller would write once the first revision is out.
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
		return b.c.Status().Update(ctx, d)
	})
	if err != nil {
		return err
	}
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}, Spec: v1alpha1.RolloutPolicySpec{Mode: v1alpha1.ModeEnforce,
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{fleetLabel: "true"}}},
		Rules: v1alpha1.RolloutRules{Concurrency: &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromString("10%")},
			ArgsMatchReplicas: []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}}}}
	if err := b.c.Create(ctx, p); err != nil {
		return err
	}
	limit := (o.fleet + 9) / 10
	// Every workload journaled as served, and the policy's entry live (it denies a
	// mismatched --server-count), before the burst.
	if err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := b.servedJournals(ctx)
		return n >= o.fleet, err
	}); err != nil {
		return fmt.Errorf("the leader never journaled the %d workloads as served: %w", o.fleet, err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d := &appsv1.Deployment{}
		if err := b.c.Get(ctx, names[0], d); err != nil {
			return false, err
		}
		d.Spec.Replicas = ptr.To[int32](5)
		return b.c.Update(ctx, d, client.DryRunAll) != nil, nil
	}); err != nil {
		return fmt.Errorf("the policy's entry never intercepted: %w", err)
	}
	fmt.Fprintf(os.Stderr, "bench: %d served Deployments journaled, policy live (%s)\n", o.fleet, time.Since(began).Round(time.Second))

	conflictsBefore, err := b.apiserverMetric(ctx, "apiserver_request_total{", `code="409"`, `resource="leases"`)
	if err != nil {
		return err
	}
	type answer struct {
		at, took time.Duration
		outcome  string
	}
	answers := make([]answer, o.fleet)
	var unexpected []error
	// Each client reads its Deployment, then all send their update at once.
	var read, done sync.WaitGroup
	release := make(chan struct{})
	var mu sync.Mutex
	var start time.Time
	for i := range o.fleet {
		read.Add(1)
		done.Go(func() {
			d := &appsv1.Deployment{}
			err := b.c.Get(ctx, names[i], d)
			read.Done()
			<-release
			if err != nil {
				mu.Lock()
				unexpected = append(unexpected, err)
				mu.Unlock()
				return
			}
			d.Spec.Template.Spec.Containers[0].Image = "registry.example/konnectivity-server:v0.35.1"
			t := time.Now()
			err = b.c.Update(ctx, d)
			a := answer{at: t.Sub(start), took: time.Since(t), outcome: "admitted"}
			switch {
			case err == nil:
			case apierrors.IsForbidden(err) && strings.Contains(err.Error(), "maxInFlight"):
				a.outcome = "refused"
			case strings.Contains(err.Error(), "contended"):
				a.outcome = "contended"
			case strings.Contains(err.Error(), "context deadline exceeded; retry"):
				a.outcome = "timedOut" // holdfast ran out of its ledger time: 403, retry
			case strings.Contains(err.Error(), "failed calling webhook"):
				// The API server's webhook timeout ran out first: refused here
				// (failurePolicy Fail), admitted unguarded under Ignore.
				a.outcome = "unanswered"
			default:
				a.outcome = "error"
				mu.Lock()
				unexpected = append(unexpected, fmt.Errorf("%s: %w", names[i], err))
				mu.Unlock()
			}
			answers[i] = a
		})
	}
	read.Wait()
	start = time.Now()
	close(release)
	done.Wait()
	conflictsAfter, err := b.apiserverMetric(ctx, "apiserver_request_total{", `code="409"`, `resource="leases"`)
	if err != nil {
		return err
	}

	counts := map[string]int{}
	perSecond := map[int]map[string]int{}
	var lat []time.Duration
	var burst time.Duration
	for _, a := range answers {
		counts[a.outcome]++
		s := int((a.at + a.took) / time.Second)
		if perSecond[s] == nil {
			perSecond[s] = map[string]int{}
		}
		perSecond[s][a.outcome]++
		lat = append(lat, a.took)
		burst = max(burst, a.at+a.took)
	}
	// The starts, counted from kube's objects: Deployments whose spec moved past the first
	// generation.
	starts := 0
	for _, key := range names {
		d := &appsv1.Deployment{}
		if err := b.c.Get(ctx, key, d); err != nil {
			return err
		}
		if d.Generation > 1 {
			starts++
		}
	}
	s := sorted(lat)
	report("fleet-workloads", float64(o.fleet), "workloads")
	report("fleet-limit", float64(limit), "starts")
	report("fleet-starts-in-kube", float64(starts), "starts")
	outcomes := []string{"admitted", "refused", "contended", "timedOut", "unanswered", "error"}
	for _, k := range outcomes {
		report("fleet-"+k, float64(counts[k]), "requests")
	}
	report("fleet-burst", burst.Seconds(), "s")
	peak, peakOf := 0, map[string]int{}
	for _, sec := range slices.Sorted(maps.Keys(perSecond)) {
		c := perSecond[sec]
		line, all := fmt.Sprintf("bench: fleet second %d:", sec), 0
		for _, k := range outcomes {
			line += fmt.Sprintf(" %s %d", k, c[k])
			all += c[k]
			peakOf[k] = max(peakOf[k], c[k])
		}
		fmt.Fprintln(os.Stderr, line)
		peak = max(peak, all)
	}
	report("fleet-answers-peak-per-second", float64(peak), "requests")
	for _, k := range []string{"admitted", "refused"} {
		report("fleet-"+k+"-per-second", float64(counts[k])/max(burst.Seconds(), 1), "requests")
		report("fleet-"+k+"-peak-per-second", float64(peakOf[k]), "requests")
	}
	report("fleet-answer-p50", percentile(s, 0.50), "ms")
	report("fleet-answer-p99", percentile(s, 0.99), "ms")
	report("fleet-lease-conflicts", conflictsAfter-conflictsBefore, "conflicts")
	if len(unexpected) > 0 {
		return fmt.Errorf("%d updates failed otherwise than by the fleet limit, e.g. %w", len(unexpected), errors.Join(unexpected[:min(3, len(unexpected))]...))
	}
	if starts > limit || counts["admitted"] != starts {
		return fmt.Errorf("%d starts in kube's objects (%d admitted) under a limit of %d", starts, counts["admitted"], limit)
	}
	return nil
}

// fleetDeployment is a konnectivity-server Deployment of 3 replicas.
func fleetDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "konnectivity-server",
					Image: "registry.example/konnectivity-server:v0.35.0", Args: []string{"--server-count=3", "--mode=grpc"}}}}}}}
}

// servedJournals counts the Deployments' revision journals in holdfast's namespace that
// say their workload has served.
func (b *bench) servedJournals(ctx context.Context) (int, error) {
	var cms corev1.ConfigMapList
	if err := b.c.List(ctx, &cms, client.InNamespace(holdfastNamespace)); err != nil {
		return 0, err
	}
	n := 0
	for i := range cms.Items {
		j, err := journal.Decode(&cms.Items[i])
		if err != nil || j.Kind != v1alpha1.KindDeployment {
			continue
		}
		if j.Served() {
			n++
		}
	}
	return n, nil
}
