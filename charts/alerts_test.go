package charts

import (
	"os"
	"regexp"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

const alertTests = "testdata/alerts_test.yaml"

// renderedRules renders the chart's PrometheusRule with its defaults and returns its groups
// as a Prometheus rule file.
func renderedRules(t *testing.T) (file []byte, alerts []string) {
	t.Helper()
	objs, err := render(t, "holdfast-system", map[string]any{"metrics": map[string]any{"prometheusRule": map[string]any{"enabled": true}}})
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
// it to fire.
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
	}
}
