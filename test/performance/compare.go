package main

import (
	"bufio"
	"context"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// modeLabel says which admission check a comparison namespace gets.
const modeLabel = "bench.holdfast.dev/mode"

// serverCountCEL is holdfast's argsMatchReplicas rule for konnectivity-server's
// --server-count, written for a ValidatingAdmissionPolicy.
const serverCountCEL = `object.spec.template.spec.containers.all(c, c.name != 'konnectivity-server' ||
  (has(c.args) && c.args.exists(a, a == '--server-count=' + string(object.spec.replicas))))`

// compare measures Deployment template updates through the API server in five modes,
// in o.rounds rounds whose ratios are reported as their median and range, interleaved
// update by update so that drift in the machine's load falls on all alike: (none) no admission
// check, (vap) a ValidatingAdmissionPolicy with the --server-count rule in CEL, (noop) a
// webhook that allows everything (the floor of any out-of-process webhook), (holdfast)
// holdfast enforcing the same rule, and (unguarded) holdfast installed with a policy that
// does not select the namespace: the API server must not call it at all.
func (b *bench) compare(ctx context.Context, o options) error {
	// holdfast's leader derives its entries from the policy: only mode holdfast's namespace.
	if err := b.install(); err != nil {
		return err
	}
	noop, err := startNoop(ctx)
	if err != nil {
		return err
	}
	defer noop.stop()
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "server-count"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: serverCountCEL,
				Message: "konnectivity-server's --server-count must equal spec.replicas"}},
		}}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "server-count"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{modeLabel: "vap"}}}}}
	policy := utiltesting.MakeRolloutPolicy("server-count").Kinds(v1alpha1.KindDeployment).
		NamespaceSelector(map[string]string{modeLabel: "holdfast"}).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	for _, obj := range []client.Object{vap, binding, policy} {
		if err := b.c.Create(ctx, obj); err != nil {
			return err
		}
	}
	if err := b.installNoop(ctx, noop, policy.Name); err != nil {
		return err
	}

	modes := []string{"none", "vap", "noop", "holdfast", "unguarded"}
	deployments := map[string]*appsv1.Deployment{}
	for _, m := range modes {
		ns := "compare-" + m
		if err := namespace(ctx, b.c, ns, map[string]string{modeLabel: m}); err != nil {
			return err
		}
		d := utiltesting.HostedKubeAPIServer(ns, 3, "v1.37.1")
		d.ManagedFields, d.ResourceVersion, d.UID, d.CreationTimestamp, d.Status = nil, "", "", metav1.Time{}, appsv1.DeploymentStatus{}
		if err := b.c.Create(ctx, d); err != nil {
			return err
		}
		deployments[m] = d
	}
	// Every check must be live before measuring: the no-op webhook is called, the others
	// deny a mismatched --server-count.
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		before, err := b.apiserverMetric(ctx, `apiserver_admission_webhook_request_total{`, `name="`+noopEntry+`"`)
		if err != nil {
			return false, err
		}
		// A change of the spec: the entry's match condition sends no other update.
		probe := deployments["noop"].DeepCopy()
		probe.Spec.Template.Annotations["bench.holdfast.dev/probe"] = time.Now().String()
		if err := b.c.Update(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		after, err := b.apiserverMetric(ctx, `apiserver_admission_webhook_request_total{`, `name="`+noopEntry+`"`)
		return after > before, err
	}); err != nil {
		return fmt.Errorf("the no-op webhook was never called: %w", err)
	}
	for _, m := range []string{"vap", "holdfast"} {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			bad := deployments[m].DeepCopy()
			bad.Spec.Replicas = ptrTo[int32](5)
			return b.c.Update(ctx, bad, client.DryRunAll) != nil, nil
		})
		if err != nil {
			return fmt.Errorf("mode %s never denied a mismatched --server-count: %w", m, err)
		}
	}

	// update changes the pod template (a new revision) and keeps the rule satisfied.
	n := 0
	update := func(m string) (time.Duration, error) {
		d := deployments[m]
		n++
		d.Spec.Template.Annotations["bench.holdfast.dev/generation"] = strconv.Itoa(n)
		t := time.Now()
		if err := b.c.Update(ctx, d); err != nil {
			return 0, fmt.Errorf("mode %s: %w", m, err)
		}
		return time.Since(t), nil
	}
	// The updates run in o.rounds rounds; each round's ratios are set apart, so that the
	// figures are the median of the rounds with their range, not one draw.
	lat := map[string][]time.Duration{}
	rounds := make([]map[string][]time.Duration, max(o.rounds, 1))
	perRound := max(o.updates/len(rounds), 1)
	updates := perRound * len(rounds) // per mode
	warmup := min(100, o.updates/10)
	var served [2]histogram
	var failOpen, cpu, live [2]float64
	for i := range warmup + updates {
		if i == warmup {
			if cpu[0], err = b.cpuSeconds(); err != nil {
				return err
			}
			if live[0], err = b.liveReads(); err != nil {
				return err
			}
			served[0] = b.webhookLatency()
			if failOpen[0], err = b.apiserverFailOpen(ctx); err != nil {
				return err
			}
		}
		for j := range modes {
			m := modes[(i+j)%len(modes)] // rotate which mode goes first
			d, err := update(m)
			if err != nil {
				return err
			}
			if i >= warmup {
				lat[m] = append(lat[m], d)
				r := (i - warmup) / perRound
				if rounds[r] == nil {
					rounds[r] = map[string][]time.Duration{}
				}
				rounds[r][m] = append(rounds[r][m], d)
			}
		}
	}
	served[1] = b.webhookLatency()
	if cpu[1], err = b.cpuSeconds(); err != nil {
		return err
	}
	if live[1], err = b.liveReads(); err != nil {
		return err
	}
	if failOpen[1], err = b.apiserverFailOpen(ctx); err != nil {
		return err
	}
	p50, p99 := map[string]float64{}, map[string]float64{}
	for _, m := range modes {
		s := sorted(lat[m])
		p50[m], p99[m] = percentile(s, 0.50), percentile(s, 0.99)
		report("apiserver-"+m+"-p50", p50[m], "ms")
		report("apiserver-"+m+"-p99", p99[m], "ms")
	}
	// The ratios of each round, reported as their median and range over the rounds.
	for _, ratio := range []struct {
		mode, against string
		p             float64
	}{{"holdfast", "vap", 0.99}, {"holdfast", "noop", 0.50}, {"holdfast", "noop", 0.99}, {"unguarded", "none", 0.50}} {
		var rs []float64
		for _, r := range rounds {
			rs = append(rs, percentile(sorted(r[ratio.mode]), ratio.p)/percentile(sorted(r[ratio.against]), ratio.p))
		}
		slices.Sort(rs)
		name := fmt.Sprintf("apiserver-%s-vs-%s-p%.0f-ratio", ratio.mode, ratio.against, ratio.p*100)
		report(name, rs[len(rs)/2], "ratio")
		report(name+"-min", rs[0], "ratio")
		report(name+"-max", rs[len(rs)-1], "ratio")
	}
	report("apiserver-rounds", float64(len(rounds)), "rounds")
	report("apiserver-updates-per-mode", float64(updates), "updates")
	// Of mode holdfast's latency, the part spent inside holdfast's webhook server.
	if n := served[1].count - served[0].count; n > 0 {
		report("apiserver-holdfast-served-mean", (served[1].sum-served[0].sum)/n*1000, "ms")
	}
	// holdfast's CPU for each update of any mode: it caches every Deployment, so each update
	// is an event to it (its transform, its controllers' watches) beside the reviews of mode
	// holdfast, all on the cores the API server and the other modes share.
	report("apiserver-holdfast-cpu-per-update", (cpu[1]-cpu[0])/float64(updates*len(modes))*1e6, "us")
	// The reads of pods, ReplicaSets and ControllerRevisions no synced watch answered.
	report("apiserver-holdfast-live-reads", live[1]-live[0], "reads")
	// holdfast was sent one request per update of mode holdfast; any more came from mode
	// unguarded, which no policy selects.
	unguardedCalls := served[1].count - served[0].count - float64(updates)
	report("apiserver-unguarded-calls", unguardedCalls, "requests")
	if unguardedCalls != 0 {
		return fmt.Errorf("the API server called holdfast %v times for updates no policy selects", unguardedCalls)
	}
	if failOpen[1] != failOpen[0] {
		return fmt.Errorf("apiserver_admission_webhook_fail_open_count moved from %v to %v: a webhook failed, and a failing webhook is fast", failOpen[0], failOpen[1])
	}
	return nil
}

// cpuSeconds is the CPU time the replica has used (process_cpu_seconds_total).
func (b *bench) cpuSeconds() (float64, error) {
	m, err := b.metrics("process_cpu_seconds_total")
	if err != nil {
		return 0, err
	}
	return m[0], nil
}

// liveReads is the reads of pods and revisions the replica sent to the API server because
// no synced watch covered them.
func (b *bench) liveReads() (float64, error) {
	pods, err := b.metricSum("holdfast_pod_live_reads_total")
	if err != nil {
		return 0, err
	}
	revisions, err := b.metricSum("holdfast_revision_live_reads_total")
	return pods + revisions, err
}

// installNoop registers the no-op webhook for mode noop's namespace, as holdfast's leader
// registered its own entry for the policy (same rules, match conditions, timeout and
// failure policy), so that the two differ only in what answers.
func (b *bench) installNoop(ctx context.Context, noop *noopProcess, policy string) error {
	var entry *admissionregistrationv1.ValidatingWebhook
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := b.c.Get(ctx, client.ObjectKey{Name: interception.Name(harness.WebhookConfigName)}, vwc); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		for i, w := range vwc.Webhooks {
			if strings.HasPrefix(w.Name, policy+"-") && strings.HasSuffix(w.Name, "."+interception.TypeRollout) {
				entry = &vwc.Webhooks[i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("holdfast's leader never wrote an entry for policy %s: %w", policy, err)
	}
	w := *entry.DeepCopy()
	w.Name = noopEntry
	w.ClientConfig = admissionregistrationv1.WebhookClientConfig{URL: ptrTo(noop.url + "/"),
		CABundle: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: noop.cert})}
	w.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{modeLabel: "noop"}}
	w.ObjectSelector = nil
	return b.c.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-noop"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{w}})
}

// noopEntry names the no-op webhook's entry.
const noopEntry = "noop.bench.holdfast.dev"

// apiserverFailOpen sums the API server's apiserver_admission_webhook_fail_open_count.
func (b *bench) apiserverFailOpen(ctx context.Context) (float64, error) {
	return b.apiserverMetric(ctx, "apiserver_admission_webhook_fail_open_count{")
}

// apiserverMetric sums the API server's samples whose line starts with prefix (a metric
// name and its brace) and contains every label.
func (b *bench) apiserverMetric(ctx context.Context, prefix string, labels ...string) (float64, error) {
	cs, err := kubernetes.NewForConfig(b.cfg)
	if err != nil {
		return 0, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	var sum float64
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, prefix) || !containsAll(line, labels) {
			continue
		}
		fields := strings.Fields(line)
		if v, err := strconv.ParseFloat(fields[len(fields)-1], 64); err == nil {
			sum += v
		}
	}
	return sum, nil
}

func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

func ptrTo[T any](v T) *T { return &v }

// histogram is the sum and count of a Prometheus histogram.
type histogram struct{ sum, count float64 }

// webhookLatency reads controller-runtime's latency histogram of the rollout webhook from
// the replica's metrics.
func (b *bench) webhookLatency() histogram {
	var h histogram
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", b.proc.MetricsPort))
	if err != nil {
		return h
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.Contains(line, `webhook="/validate-rollout"`) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "controller_runtime_webhook_latency_seconds_sum"):
			h.sum = v
		case strings.HasPrefix(line, "controller_runtime_webhook_latency_seconds_count"):
			h.count = v
		}
	}
	return h
}
