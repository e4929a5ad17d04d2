//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/test/harness"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestBackgroundAudit: the leader evaluates the workloads a policy selects as they stand,
// counts those that break its request-free rules in the policy's status, and in Audit
// mode puts a PolicyViolation Event on each.
func TestBackgroundAudit(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("audit").Mode(v1alpha1.ModeAudit).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	applyPolicy(t, ns, p)
	bad := konnectivity(ns, 3, "1") // admitted: Audit mode
	if err := k8s.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	good := utiltesting.MakeDeployment(ns, "web").Replicas(3).Container("konnectivity-server", "--server-count=3").Obj()
	if err := k8s.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the policy counts one violating workload", func() bool {
		got := &v1alpha1.RolloutPolicy{}
		return k8s.Get(ctx, client.ObjectKeyFromObject(p), got) == nil && ptr.Deref(got.Status.Violations, -1) == 1
	})
	eventually(t, "a PolicyViolation Event on the violating Deployment", func() bool {
		var evs eventsv1.EventList
		if k8s.List(ctx, &evs, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range evs.Items {
			if e.Reason == "PolicyViolation" && e.Regarding.Name == bad.Name && strings.Contains(e.Note, "--server-count=1") {
				return true
			}
			if e.Reason == "PolicyViolation" && e.Regarding.Name == good.Name {
				t.Errorf("an Event on the Deployment that breaks no rule: %s", e.Note)
			}
		}
		return false
	})
}

// TestPolicyReports: with the wgpolicyk8s.io PolicyReport CRD installed, the audit writes
// one report per policy and namespace: a fail result per rule a workload breaks, naming the
// workload, and the summary; a second violating workload updates it.
func TestPolicyReports(t *testing.T) {
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join("testdata", "policyreport-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(raw, crd); err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(restConfig, client.Options{Scheme: harness.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	installCRD(t, admin, crd)
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("report").Mode(v1alpha1.ModeAudit).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	applyPolicy(t, ns, p)
	report := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(schema.GroupVersionKind{Group: "wgpolicyk8s.io", Version: "v1alpha2", Kind: "PolicyReport"})
		if k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "holdfast-" + p.Name}, u) != nil {
			return nil
		}
		return u
	}
	if err := k8s.Create(ctx, konnectivity(ns, 3, "1")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a PolicyReport with the violation", func() bool {
		u := report()
		if u == nil {
			return false
		}
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		fail, _, _ := unstructured.NestedInt64(u.Object, "summary", "fail")
		return len(results) == 1 && fail == 1 && strings.Contains(fmt.Sprint(results[0]), "argsMatchReplicas") &&
			strings.Contains(fmt.Sprint(results[0]), "kube-apiserver")
	})
	second := utiltesting.MakeDeployment(ns, "second").Replicas(2).Container("konnectivity-server", "--server-count=5").Obj()
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	// found is when the report says kube-apiserver's violation was found.
	found := func(u *unstructured.Unstructured) any {
		results, _, _ := unstructured.NestedSlice(u.Object, "results")
		for _, r := range results {
			if strings.Contains(fmt.Sprint(r), "kube-apiserver") {
				return r.(map[string]any)["timestamp"]
			}
		}
		return nil
	}
	var first any
	eventually(t, "the PolicyReport counts the second violating workload", func() bool {
		u := report()
		if u == nil {
			return false
		}
		fail, _, _ := unstructured.NestedInt64(u.Object, "summary", "fail")
		first = found(u)
		return fail == 2 && first != nil
	})
	// A later audit that finds the same violation keeps the time it was first found.
	time.Sleep(1100 * time.Millisecond) // timestamps are in seconds
	third := utiltesting.MakeDeployment(ns, "third").Replicas(3).Container("konnectivity-server", "--server-count=3").Obj()
	if err := k8s.Create(ctx, third); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the PolicyReport counts the passing workload", func() bool {
		u := report()
		if u == nil {
			return false
		}
		pass, _, _ := unstructured.NestedInt64(u.Object, "summary", "pass")
		return pass == 1
	})
	if got := found(report()); fmt.Sprint(got) != fmt.Sprint(first) {
		t.Errorf("kube-apiserver's violation was first found at %v, the report now says %v", first, got)
	}
}
