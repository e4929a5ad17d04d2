package check

import (
	"os"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/defaults"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// TestNewDaemonSetAbsoluteLimitIsNotDecidedOffline: a new DaemonSet's ABSOLUTE
// maxUnavailable also depends on the nodes it runs on: unavailableDuringRollout caps it at
// max(Expected, 1), and Expected is 0 on a CREATE (status cleared). Offline, StateRules
// (readsNodes) only names strategy for percentages, so check decides maxUnavailable: 5
// against 1 pod and prints "allow"; the webhook resolves it against the nodes (10) and
// refuses 5 > 1.
func TestNewDaemonSetAbsoluteLimitIsNotDecidedOffline(t *testing.T) {
	policies := writeTemp(t, "policy.yaml", `apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: agents}
spec:
  targets: {kinds: [DaemonSet]}
  rules:
    strategy: {maxUnavailable: 1}
`)
	ds := writeTemp(t, "ds.yaml", `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 5}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "agent:1"}]}
`)

	// What the webhook decides: the same objects and policy, with the 10 nodes it reads.
	ps, err := ReadPolicies([]string{policies}, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ReadObjects([]string{ds}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var none client.Object
	_, obj := defaults.Admitted(none, docs[0].Object.(client.Object))
	w, err := workload.From(obj)
	if err != nil {
		t.Fatal(err)
	}
	in := rollout.Input{Operation: admissionv1.Create, New: w, Policies: ps, Matcher: policy.NewMatcher(), Now: checkNow,
		NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}
	if !rollout.NeedsNodes(in) {
		t.Fatal("the webhook would not read the nodes")
	}
	in.Nodes = 10
	d, err := rollout.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Action() != decision.Deny {
		t.Fatalf("precondition: the webhook with 10 nodes should refuse maxUnavailable 5 under a limit of 1; got %v", d.Violations)
	}

	out, code := run(t, &Options{Policies: []string{policies}, Files: []string{ds}, Output: "text"}, "")
	if strings.Contains(out, "CREATE DaemonSet kube-system/agent: allow\n") {
		t.Errorf("check offline prints allow (exit %d) for a new DaemonSet the webhook refuses on a 10-node cluster:\n%s\nwebhook: %v",
			code, out, d.Violations)
	}
}

// TestDaemonSetUpdateWithoutStatusIsNotDecidedOffline: on a DaemonSet UPDATE, the
// strategy's percentages resolve against the old object's status.desiredNumberScheduled
// (the nodes it runs on), which a manifest from git does not carry: offline it is 0, so
// maxUnavailable 1 -> 50% resolves to 0 pods and check prints "allow". The webhook, sent
// the old object with its status (10 nodes), resolves 50% to 5 and refuses. StateRules
// names strategy only on a CREATE (NeedsNodes).
func TestDaemonSetUpdateWithoutStatusIsNotDecidedOffline(t *testing.T) {
	policies := writeTemp(t, "policy.yaml", `apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: agents}
spec:
  targets: {kinds: [DaemonSet]}
  rules:
    strategy: {maxUnavailable: 1}
`)
	ds := func(maxUnavailable string) string {
		return `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: ` + maxUnavailable + `}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "agent:1"}]}
`
	}
	old, next := writeTemp(t, "old.yaml", ds("1")), writeTemp(t, "new.yaml", ds(`"50%"`))

	// The webhook: the same change, the old object with the status the cluster holds.
	ps, err := ReadPolicies([]string{policies}, nil)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := ReadObjects([]string{old, next}, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldObj, newObj := docs[0].Object.(*appsv1.DaemonSet), docs[1].Object.(*appsv1.DaemonSet)
	oldObj.Status = appsv1.DaemonSetStatus{DesiredNumberScheduled: 10, CurrentNumberScheduled: 10, UpdatedNumberScheduled: 10, NumberAvailable: 10, NumberReady: 10}
	o, n := defaults.Admitted(oldObj, newObj)
	in := rollout.Input{Operation: admissionv1.Update, Policies: ps, Matcher: policy.NewMatcher(), Now: checkNow,
		NamespaceLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}
	if in.Old, err = workload.From(o); err != nil {
		t.Fatal(err)
	}
	if in.New, err = workload.From(n); err != nil {
		t.Fatal(err)
	}
	in.TemplateChanged = !workload.SameTemplate(in.Old.Template, in.New.Template)
	d, err := rollout.Decide(in)
	if err != nil {
		t.Fatal(err)
	}
	if d.Action() != decision.Deny {
		t.Fatalf("precondition: the webhook should refuse 50%% of 10 nodes under a limit of 1; got %v", d.Violations)
	}

	out, code := run(t, &Options{Policies: []string{policies}, Files: []string{old, next}, Output: "text"}, "")
	if strings.Contains(out, "UPDATE DaemonSet kube-system/agent: allow\n") {
		t.Errorf("check offline prints allow (exit %d) for a DaemonSet update the webhook refuses on a 10-node cluster:\n%s\nwebhook: %v",
			code, out, d.Violations)
	}
}

// TestNamespaceLabelsNotGivenAreNotDecidedOffline: a policy that selects by namespace
// labels selects nothing offline unless a Namespace document is given (only
// kubernetes.io/metadata.name is known), so check prints "allow", never "undecided",
// for a change the webhook refuses: the namespace's labels are cluster state too.
func TestNamespaceLabelsNotGivenAreNotDecidedOffline(t *testing.T) {
	policies := writeTemp(t, "policy.yaml", `apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: prod}
spec:
  targets: {kinds: [Deployment], namespaceSelector: {matchLabels: {env: prod}}}
  rules:
    strategy: {maxUnavailable: 1}
`)
	dep := writeTemp(t, "dep.yaml", `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 10
  selector: {matchLabels: {app: web}}
  strategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: 3}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "web:1"}]}
`)
	withNS := writeTemp(t, "ns.yaml", "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop, labels: {env: prod}}\n")
	out, code := run(t, &Options{Policies: []string{policies}, Files: []string{withNS, dep}, Output: "text"}, "")
	if code != 1 {
		t.Fatalf("precondition: with the namespace's labels (what the webhook reads) the Deployment is refused; exit %d:\n%s", code, out)
	}
	out, code = run(t, &Options{Policies: []string{policies}, Files: []string{dep}, Output: "text"}, "")
	if strings.Contains(out, ": allow\n") {
		t.Errorf("without the Namespace document check prints allow (exit %d), not undecided, for the Deployment the webhook refuses in a namespace labelled env=prod:\n%s", code, out)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
