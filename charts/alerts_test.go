package charts

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const alertTests = "testdata/alerts_test.yaml"

// renderedRules renders the chart's PrometheusRule with its defaults and returns its groups
// as a Prometheus rule file.
func renderedRules(t *testing.T) (file []byte, alerts []string) {
	t.Helper()
	// As the chart is scraped by its ServiceMonitor, which HoldfastUnavailable reads.
	objs, err := render(t, "holdfast-system", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true},
		"serviceMonitor": map[string]any{"enabled": true}}})
	if err != nil {
		t.Fatal(err)
	}
	rule := objs["PrometheusRule/holdfast"]
	if rule == nil {
		t.Fatal("no PrometheusRule")
	}
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if name, ok := r.(map[string]any)["alert"].(string); ok {
				alerts = append(alerts, name)
			}
		}
	}
	file, err = yaml.Marshal(map[string]any{"groups": groups})
	if err != nil {
		t.Fatal(err)
	}
	return file, alerts
}

// TestAlertRulesAreTested: every alert the chart renders has a promtool test that expects
// it to fire and one that expects it not to (for a cause that is not its own, or before
// its `for:` has passed).
func TestAlertRulesAreTested(t *testing.T) {
	raw, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	_, alerts := renderedRules(t)
	for _, a := range alerts {
		fires := regexp.MustCompile(`(?m)alertname: ` + a + `\n\s+exp_alerts:\n\s+- exp_labels`)
		if !fires.Match(raw) {
			t.Errorf("alert %s: no test in %s expects it to fire", a, alertTests)
		}
		silent := regexp.MustCompile(`(?m)alertname: ` + a + `\n\s+exp_alerts: \[\]`)
		if !silent.Match(raw) {
			t.Errorf("alert %s: no test in %s expects it not to fire", a, alertTests)
		}
	}
}

// TestUnavailableAlertFollowsTheScrape: HoldfastUnavailable reads `up` of the job that
// scrapes holdfast, the ServiceMonitor's or scrapeJob, and no `up` at all without either
// (absent() would otherwise fire for ever where holdfast is scraped another way).
func TestUnavailableAlertFollowsTheScrape(t *testing.T) {
	for name, tc := range map[string]struct {
		metrics map[string]any
		want    string // the up selector, "" for none
	}{
		"service monitor":        {map[string]any{"serviceMonitor": map[string]any{"enabled": true}}, `up{namespace="holdfast-system", job="holdfast-metrics"}`},
		"no service monitor":     {map[string]any{}, ""},
		"scraped another way":    {map[string]any{"prometheusRule": map[string]any{"scrapeJob": "kubernetes-pods"}}, `up{namespace="holdfast-system", job="kubernetes-pods"}`},
		"scrapeJob wins over it": {map[string]any{"serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"scrapeJob": "pods"}}, `job="pods"`},
	} {
		t.Run(name, func(t *testing.T) {
			pr, _ := tc.metrics["prometheusRule"].(map[string]any)
			if pr == nil {
				pr = map[string]any{}
			}
			pr["enabled"] = true
			tc.metrics["prometheusRule"] = pr
			objs, err := render(t, "holdfast-system", map[string]any{"metrics": tc.metrics})
			if err != nil {
				t.Fatal(err)
			}
			expr := alertExpr(t, objs["PrometheusRule/holdfast"], "HoldfastUnavailable")
			if !strings.Contains(expr, `kube_deployment_status_replicas_available{namespace="holdfast-system", deployment="holdfast"} == 0`) {
				t.Errorf("expr %q does not read kube-state-metrics", expr)
			}
			if tc.want == "" && strings.Contains(expr, "up{") || tc.want != "" && !strings.Contains(expr, tc.want) {
				t.Errorf("expr %q, want the up selector %q", expr, tc.want)
			}
		})
	}
}

func alertExpr(t *testing.T, rule *unstructured.Unstructured, alert string) string {
	t.Helper()
	groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if r.(map[string]any)["alert"] == alert {
				return r.(map[string]any)["expr"].(string)
			}
		}
	}
	t.Fatalf("no alert %s", alert)
	return ""
}
