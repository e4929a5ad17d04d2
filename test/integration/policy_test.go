//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestSamplesAreValid applies every sample policy (server-side dry run) through the
// CRD's schema and CEL rules.
func TestSamplesAreValid(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*policy_*.yaml"))
	if err != nil || len(files) < 5 {
		t.Fatalf("want the RolloutPolicy and DisruptionPolicy samples, found %v (%v)", files, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var p client.Object = &v1alpha1.RolloutPolicy{}
			if strings.HasPrefix(filepath.Base(f), "disruptionpolicy_") {
				p = &v1alpha1.DisruptionPolicy{}
			}
			if err := yaml.UnmarshalStrict(raw, p); err != nil {
				t.Fatal(err)
			}
			if err := k8s.Create(context.Background(), p, client.DryRunAll); err != nil {
				t.Fatalf("sample rejected: %v", err)
			}
		})
	}
}

// TestInvalidPoliciesAreRejected checks that the API rejects bad policies with 422 and a
// message naming the field.
func TestInvalidPoliciesAreRejected(t *testing.T) {
	base := func() *v1alpha1.RolloutPolicy {
		return utiltesting.MakeRolloutPolicy("invalid").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	}
	cases := map[string]struct {
		mut   func(p *v1alpha1.RolloutPolicy)
		field string
	}{
		"no rules": {func(p *v1alpha1.RolloutPolicy) { p.Spec.Rules = v1alpha1.RolloutRules{} }, "spec.rules"},
		"settle alone is a rule": {func(p *v1alpha1.RolloutPolicy) {
			p.Spec.Rules = v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 90e9}}}
		}, ""},
		"bad flag":            {func(p *v1alpha1.RolloutPolicy) { p.Spec.Rules.ArgsMatchReplicas[0].Flag = "server count" }, "spec.rules.argsMatchReplicas[0].flag"},
		"bad mode":            {func(p *v1alpha1.RolloutPolicy) { p.Spec.Mode = "Sometimes" }, "spec.mode"},
		"bad kind":            {func(p *v1alpha1.RolloutPolicy) { p.Spec.Targets.Kinds = []v1alpha1.WorkloadKind{"ReplicaSet"} }, "spec.targets.kinds[0]"},
		"bad service account": {func(p *v1alpha1.RolloutPolicy) { p.Spec.Exemptions.ServiceAccounts = []string{"no-namespace"} }, "spec.exemptions.serviceAccounts[0]"},
		"bad percentage": {func(p *v1alpha1.RolloutPolicy) {
			p.Spec.Rules.Strategy = &v1alpha1.StrategyRule{MaxUnavailable: ptr.To(intstr.FromString("half"))}
		}, "spec.rules.strategy.maxUnavailable"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p := base()
			tc.mut(p)
			err := k8s.Create(context.Background(), p, client.DryRunAll)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("valid policy rejected: %v", err)
				}
				return
			}
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want 422 Invalid", err)
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %q does not name %s", err, tc.field)
			}
		})
	}
}

// TestInvalidDurationIsRejected sends a duration the typed client cannot express.
func TestInvalidDurationIsRejected(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "holdfast.dev/v1alpha1", "kind": "RolloutPolicy",
		"metadata": map[string]any{"name": "bad-duration"},
		"spec":     map[string]any{"targets": map[string]any{}, "rules": map[string]any{"minInterval": "soon"}},
	}}
	err := k8s.Create(context.Background(), u, client.DryRunAll)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.rules.minInterval") {
		t.Fatalf("got %v, want 422 naming spec.rules.minInterval", err)
	}
}
