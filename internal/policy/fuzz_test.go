package policy

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// FuzzPolicyTargets reads arbitrary policy specs as the cache would hold them (the API
// server validates less than holdfast reads: selectors and percentages are checked at
// use) and holds holdfast's evaluation to apimachinery's: the compiled-selector cache
// answers what a fresh compilation answers, an invalid selector is an error (never a
// match-all), and a budget is never negative.
func FuzzPolicyTargets(f *testing.F) {
	f.Add([]byte(`{"targets":{"selector":{"matchLabels":{"app":"kube-apiserver"}}},"maxUnavailable":1}`), "kube-apiserver", int32(3))
	f.Add([]byte(`{"targets":{"namespaceSelector":{"matchExpressions":[{"key":"tier","operator":"In","values":["cp"]}]}},"maxUnavailable":"34%"}`), "x", int32(7))
	f.Add([]byte(`{"targets":{"selector":{"matchExpressions":[{"key":"app","operator":"Exists","values":["x"]}]}},"maxUnavailable":"150%"}`), "", int32(0))
	f.Add([]byte(`{"targets":{"selector":{"matchLabels":{"bad key!":"v"}}},"maxUnavailable":"-5%"}`), "v", int32(-1))
	f.Fuzz(func(t *testing.T, raw []byte, app string, expected int32) {
		var spec v1alpha1.DisruptionPolicySpec
		if json.Unmarshal(raw, &spec) != nil {
			return
		}
		set := map[string]string{"app": app, "tier": app}
		m := NewMatcher()
		for _, sel := range []*metav1.LabelSelector{spec.Targets.Selector, spec.Targets.NamespaceSelector} {
			for range 2 { // the second call is answered from the cache
				got, err := m.Matches(sel, set)
				if sel == nil {
					if !got || err != nil {
						t.Fatalf("a nil selector must select everything: %t, %v", got, err)
					}
					continue
				}
				want, wantErr := metav1.LabelSelectorAsSelector(sel)
				if (err != nil) != (wantErr != nil) {
					t.Fatalf("Matches error %v, apimachinery %v", err, wantErr)
				}
				if err == nil && got != want.Matches(labels.Set(set)) {
					t.Fatalf("Matches = %t, apimachinery %t for %v", got, !got, sel)
				}
				if err != nil && got {
					t.Fatal("an invalid selector matched")
				}
			}
		}
		b := Resolve(DisruptionBudget, v1alpha1.KindDeployment, spec.MaxUnavailable, expected)
		if b < 0 {
			t.Fatalf("budget %d < 0", b)
		}
	})
}
