//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/test/replay"
)

// replaySequences and replaySteps: three sequences per starting kind and strategy, each
// of ten operations after the create.
const (
	replaySequences = 3 * 13
	replaySteps     = 10
)

// TestModelHeldToKube replays generated sequences on kube's controllers (holdfast in no
// request's path: no webhook entry selects the replay's namespaces) and in
// internal/kubemodel, and compares, at each quiescent point, each workload's pods by
// template (kube's identity: pod-template-hash, controller-revision-hash) and revision
// numbers. Sequences run concurrently, one namespace each; a DaemonSet's nodes are a pool
// of its own label. The self-test compares the same points with deliberately wrong models,
// which must differ. REPLAY_SEED changes the sequences; REPLAY_POINTS names a file to
// write the sequences and kube's points to, as JSON.
func TestModelHeldToKube(t *testing.T) {
	f := features.New("model held to kube").
		Assess("every quiescent point of every sequence is the model's", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			seed := uint64(28)
			if s := os.Getenv("REPLAY_SEED"); s != "" {
				n, err := strconv.ParseUint(s, 10, 64)
				if err != nil {
					t.Fatal(err)
				}
				seed = n
			}
			if replay.Shapes() > replaySequences {
				t.Fatalf("%d sequences cannot start from the %d shapes", replaySequences, replay.Shapes())
			}
			rc := rest.CopyConfig(cfg.Client().RESTConfig())
			rc.QPS, rc.Burst = 500, 1000
			cs, err := kubernetes.NewForConfig(rc)
			if err != nil {
				t.Fatal(err)
			}
			nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, n := range nodes.Items {
				names = append(names, n.Name)
			}
			slices.Sort(names)
			kctx, cancel := context.WithCancel(ctx)
			defer cancel()
			k, err := replay.NewKube(kctx, cs, names)
			if err != nil {
				t.Fatal(err)
			}

			seqs := replay.Generate(seed, replaySequences, replaySteps)
			namespaces := make([]string, len(seqs))
			for i, seq := range seqs {
				ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: envconf.RandomName(seq.Name, 16),
					Labels: map[string]string{replay.NamespaceLabel: seq.Name}}}
				if _, err := cs.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
				namespaces[i] = ns.Name
				t.Cleanup(func() {
					_ = cs.CoreV1().Namespaces().Delete(context.Background(), ns.Name, metav1.DeleteOptions{})
				})
			}
			unguarded(ctx, t, cs, namespaces)

			start := time.Now()
			points := make([][]replay.Point, len(seqs))
			errs := make([]error, len(seqs))
			var wg sync.WaitGroup
			for i, seq := range seqs {
				wg.Go(func() { points[i], errs[i] = k.Play(ctx, seq, namespaces[i]) })
			}
			wg.Wait()
			elapsed := time.Since(start)
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}

			if path := os.Getenv("REPLAY_POINTS"); path != "" {
				// Kept for comparing other models with the same points offline.
				raw, err := json.Marshal(struct {
					Sequences []replay.Sequence
					Points    [][]replay.Point
				}{seqs, points})
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, raw, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			var tally replay.Tally
			for i, seq := range seqs {
				before := tally.Differences
				tally.Compare(seq, points[i], replay.Correct)
				if tally.Differences > before {
					t.Log("\n" + replay.Trace(seq, points[i], replay.Correct))
				}
			}
			for _, d := range tally.Diffs {
				t.Error(d)
			}
			if tally.Sequences != len(seqs) || tally.Points != len(seqs)*(replaySteps+1) {
				t.Errorf("compared %d sequences and %d points, want %d and %d", tally.Sequences, tally.Points, len(seqs), len(seqs)*(replaySteps+1))
			}
			// The self-test: the same points against deliberately wrong models.
			for _, fault := range []struct {
				name  string
				fault replay.Fault
			}{{"old-template-ordinals", replay.OldTemplateOrdinals}, {"daemonsets-ignore-node-joins", replay.IgnoreNodeJoins}} {
				var wrong replay.Tally
				for i, seq := range seqs {
					wrong.Compare(seq, points[i], fault.fault)
				}
				fmt.Printf("RELIABILITY model-vs-kube self-test model=%s differences=%d\n", fault.name, wrong.Differences)
				if wrong.Differences == 0 {
					t.Errorf("the wrong model %s shows no difference from kube", fault.name)
				}
			}
			fmt.Printf("RELIABILITY model-vs-kube sequences=%d points=%d differences=%d twoTemplates=%d partition=%d onDelete=%d stalled=%d returns=%d seconds=%.0f\n",
				tally.Sequences, tally.Points, tally.Differences, tally.TwoTemplates, tally.Partition, tally.OnDelete, tally.Stalled, tally.Returned, elapsed.Seconds())
			fmt.Printf("RELIABILITY model-vs-kube operations: %s\n", replay.Histogram(tally.Ops))
			fmt.Printf("RELIABILITY model-vs-kube shapes: %s\n", replay.Histogram(tally.Shapes))
			return ctx
		}).Feature()
	testenv.Test(t, f)
}

// unguarded fails unless no webhook entry on the cluster would be called for the
// namespaces' workloads or pods: the replay tests the model against kube alone.
func unguarded(ctx context.Context, t *testing.T, cs kubernetes.Interface, namespaces []string) {
	t.Helper()
	vwcs, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mwcs, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type entry struct {
		name  string
		sel   *metav1.LabelSelector
		rules []string
	}
	var entries []entry
	for _, c := range vwcs.Items {
		for _, w := range c.Webhooks {
			e := entry{name: c.Name + "/" + w.Name, sel: w.NamespaceSelector}
			for _, r := range w.Rules {
				e.rules = append(e.rules, r.Resources...)
			}
			entries = append(entries, e)
		}
	}
	for _, c := range mwcs.Items {
		for _, w := range c.Webhooks {
			e := entry{name: c.Name + "/" + w.Name, sel: w.NamespaceSelector}
			for _, r := range w.Rules {
				e.rules = append(e.rules, r.Resources...)
			}
			entries = append(entries, e)
		}
	}
	for _, e := range entries {
		workloads := slices.ContainsFunc(e.rules, func(r string) bool {
			r = strings.Split(r, "/")[0]
			return r == "*" || r == "pods" || r == "deployments" || r == "statefulsets" || r == "daemonsets" || r == "replicasets"
		})
		if !workloads {
			continue
		}
		sel := labels.Everything()
		if e.sel != nil {
			if sel, err = metav1.LabelSelectorAsSelector(e.sel); err != nil {
				t.Fatal(err)
			}
		}
		for _, ns := range namespaces {
			n, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if sel.Matches(labels.Set(n.Labels)) {
				t.Fatalf("webhook %s would be called for %s's workloads: the replay must run with holdfast out of the path", e.name, ns)
			}
		}
	}
}
