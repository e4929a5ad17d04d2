//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/selftest"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/test/harness"
)

// TestSelfTestOnKwok runs holdfast selftest against the test bed, where holdfast's
// replicas serve behind a balancer: the policy webhook and the rollout, eviction and PDB
// entries the leader derived for a namespace's policies each answer the API server's
// dry-run probe, and no entry fails.
func TestSelfTestOnKwok(t *testing.T) {
	f := features.New("selftest").
		Assess("every entry answers", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			ns := newNamespace(ctx, t, c, "selftest")
			settlePolicyIn(ctx, t, c, ns)
			namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) {
				s.PDB = &v1alpha1.PDBGeneration{Generate: true}
				s.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "agent"}}
			})
			results, err := selftest.Run(ctx, cfg.Client().RESTConfig(), harness.WebhookConfigName, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var table bytes.Buffer
			selftest.Print(&table, results)
			t.Log("\n" + table.String())
			ok := map[string]bool{}
			for _, r := range results {
				if r.Status == selftest.Fail {
					t.Errorf("%s %s: FAIL %s", r.Configuration, r.Entry, r.Reason)
				}
				if r.Status == selftest.OK && (r.Entry == "validation.holdfast.dev" || strings.Contains(r.Probe, " "+ns+"/")) {
					for _, typ := range []string{"validation.holdfast.dev", interception.TypeRollout, interception.TypeEviction, interception.TypeFloor} {
						if strings.HasSuffix(r.Entry, typ) {
							ok[typ] = true
						}
					}
				}
			}
			if len(ok) != 4 {
				t.Errorf("want the policy entry and %s's rollout, eviction and PDB entries OK, got %v", ns, ok)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
