package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// modeLabel says which admission check a comparison namespace gets.
const modeLabel = "bench.holdfast.dev/mode"

// serverCountCEL is holdfast's argsMatchReplicas rule for konnectivity-server's
// --server-count, written for a ValidatingAdmissionPolicy.
const serverCountCEL = `object.spec.template.spec.containers.all(c, c.name != 'konnectivity-server' ||
  (has(c.args) && c.args.exists(a, a == '--server-count=' + string(object.spec.replicas))))`

// compare measures Deployment template updates through the API server in three modes,
// interleaved so that drift in the machine's load falls on all three alike: (a) no
// admission check, (b) a ValidatingAdmissionPolicy with the --server-count rule in CEL,
// (c) holdfast's webhook enforcing the same rule.
func (b *bench) compare(ctx context.Context, o options) error {
	// holdfast's webhooks reach only the namespaces of mode (c).
	if err := harness.InstallWebhooks(ctx, b.c, harness.WebhookOptions{Manifest: "config/webhook/manifests.yaml",
		BaseURL: b.webhook, CABundle: b.ca, Namespace: holdfastNamespace, FailurePolicy: admissionregistrationv1.Fail}); err != nil {
		return err
	}
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := b.c.Get(ctx, client.ObjectKey{Name: harness.WebhookConfigName}, vwc); err != nil {
		return err
	}
	for i := range vwc.Webhooks {
		vwc.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{modeLabel: "holdfast"}}
	}
	if err := b.c.Update(ctx, vwc); err != nil {
		return err
	}
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

	modes := []string{"none", "vap", "holdfast"}
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
	// Both checks must be live before measuring: each denies a mismatched --server-count.
	for _, m := range modes[1:] {
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
	lat := map[string][]time.Duration{}
	warmup := min(100, o.updates/10)
	var served [2]histogram
	for i := range warmup + o.updates {
		if i == warmup {
			served[0] = b.webhookLatency()
		}
		for j := range modes {
			m := modes[(i+j)%len(modes)] // rotate which mode goes first
			d, err := update(m)
			if err != nil {
				return err
			}
			if i >= warmup {
				lat[m] = append(lat[m], d)
			}
		}
	}
	p99 := map[string]float64{}
	for _, m := range modes {
		s := sorted(lat[m])
		p99[m] = percentile(s, 0.99)
		report("apiserver-"+m+"-p50", percentile(s, 0.50), "ms")
		report("apiserver-"+m+"-p99", p99[m], "ms")
	}
	report("apiserver-updates-per-mode", float64(o.updates), "updates")
	// Of mode (c)'s latency, the part spent inside holdfast's webhook server.
	served[1] = b.webhookLatency()
	if n := served[1].count - served[0].count; n > 0 {
		report("apiserver-holdfast-served-mean", (served[1].sum-served[0].sum)/n*1000, "ms")
	}
	report("apiserver-holdfast-vs-vap-p99-ratio", p99["holdfast"]/p99["vap"], "ratio")
	return nil
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
