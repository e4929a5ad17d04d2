package check

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/internal/defaults"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

const hostedPolicy = "../../../config/samples/rolloutpolicy_hosted_control_plane.yaml"

var checkNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

// hosted is the old manifest's kube-apiserver labelled for the hosted-control-plane
// sample, edited by the replacer: a file.
func hosted(t *testing.T, name string, edit *strings.Replacer) string {
	t.Helper()
	raw, err := os.ReadFile(oldManifest)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), "  namespace: tenant-a\nspec:", "  namespace: tenant-a\n  labels: {app: kube-apiserver}\nspec:", 1)
	if edit != nil {
		s = edit.Replace(s)
	}
	return writeTemp(t, name, s)
}

// newImage is the hosted kube-apiserver with another image: a new revision.
func newImage(t *testing.T) string {
	t.Helper()
	return hosted(t, "new.yaml", strings.NewReplacer("kube-apiserver:v1.37.2", "kube-apiserver:v1.37.3"))
}

// TestCheckSaysWhatItDoesNotDecideOffline: without the cluster, the rules that read its
// state are named, never passed: the change is undecided (exit 0, 1 with
// --fail-on-undecided), unless a decided rule refuses it.
func TestCheckSaysWhatItDoesNotDecideOffline(t *testing.T) {
	next := newImage(t)
	o := &Options{Policies: []string{hostedPolicy}, Files: []string{hosted(t, "old.yaml", nil), next}, Output: "text"}
	out, code := run(t, o, "")
	for _, want := range []string{
		"UPDATE Deployment tenant-a/kube-apiserver: undecided\n",
		"  not decided offline: [hosted-control-plane/settle] settle reads whether the workload's current rollout has finished and which templates have live pods, from its revision journal and history; give --cluster\n",
		"  not decided offline: [hosted-control-plane/revertWindow] revertWindow reads ",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("exit %d, output:\n%s\nwant exit 0 and %q", code, out, want)
		}
	}
	o.FailOnUndecided = true
	if _, code := run(t, o, ""); code != 1 {
		t.Errorf("--fail-on-undecided: exit %d, want 1", code)
	}

	o = &Options{Policies: []string{hostedPolicy}, Files: []string{hosted(t, "old.yaml", nil), next}, Output: "json"}
	out, _ = run(t, o, "")
	var report Report
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatal(err)
	}
	r := report.Results[0]
	want := []Undecided{{Policy: "hosted-control-plane", Rule: "settle"}, {Policy: "hosted-control-plane", Rule: "revertWindow"}}
	for i := range r.Undecided {
		r.Undecided[i].Reads = ""
	}
	if r.Action != ActionUndecided || r.Code != 0 || !cmp.Equal(want, r.Undecided) {
		t.Errorf("result %+v, want undecided, no code, and %v", r, want)
	}

	// A rule decided from the objects refuses it: that is the answer, whatever the state.
	refused := hosted(t, "refused.yaml", strings.NewReplacer("kube-apiserver:v1.37.2", "kube-apiserver:v1.37.3", "replicas: 3", "replicas: 5"))
	o = &Options{Policies: []string{hostedPolicy}, Files: []string{hosted(t, "old.yaml", nil), refused}, Output: "json"}
	out, code = run(t, o, "")
	report = Report{}
	if err := json.Unmarshal([]byte(strings.TrimSuffix(out, "an Enforce policy would refuse a change")), &report); err != nil {
		t.Fatal(err)
	}
	if r := report.Results[0]; code != 1 || r.Action != "deny" || r.Code != 403 || len(r.Undecided) != 2 || r.Violations[0].Rule != "argsMatchReplicas" {
		t.Errorf("exit %d, result %+v; want a 403 for argsMatchReplicas, with the two rules still named", code, r)
	}

	// A scale (the flag follows replicas) starts no revision, but its template is one more
	// set of pods: settle counts the templates with live pods, which only the cluster holds.
	scaled := hosted(t, "scaled.yaml", strings.NewReplacer("replicas: 3", "replicas: 5", "--server-count=3", "--server-count=5"))
	o = &Options{Policies: []string{hostedPolicy}, Files: []string{hosted(t, "old.yaml", nil), scaled}, Output: "text"}
	if out, code := run(t, o, ""); code != 0 || !strings.Contains(out, "UPDATE Deployment tenant-a/kube-apiserver: undecided\n") ||
		!strings.Contains(out, "[hosted-control-plane/settle]") || strings.Contains(out, "revertWindow") {
		t.Errorf("a scale: exit %d, output:\n%s", code, out)
	}
}

// revisionPolicy refuses a new revision within an hour of the last, and limits the fleet.
const revisionPolicy = `apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: pace}
spec:
  targets: {kinds: [Deployment]}
  rules:
    minInterval: 1h
    concurrency: {maxInFlight: 1}
`

// agent is a rolled-out Deployment with uid u1 and its ReplicaSet, created ago.
func agent(image string) *appsv1.Deployment {
	d := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "u1", Generation: 1, Labels: map[string]string{"app": "agent"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "agent"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: image}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 1, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}
	return d
}

func replicaSetOf(d *appsv1.Deployment, uid types.UID, ago time.Duration) *appsv1.ReplicaSet {
	tmpl := d.Spec.Template.DeepCopy()
	tmpl.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "h1"
	return &appsv1.ReplicaSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: d.Name + "-h1", CreationTimestamp: metav1.NewTime(checkNow.Add(-ago)),
			Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: d.Name, UID: uid, Controller: ptr.To(true)}}},
		Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Template: *tmpl},
		Status: appsv1.ReplicaSetStatus{Replicas: 3, AvailableReplicas: 3, ReadyReplicas: 3}}
}

func yamlOf(t *testing.T, objs ...any) string {
	t.Helper()
	var docs []string
	for _, o := range objs {
		b, err := yaml.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(b))
	}
	return strings.Join(docs, "---\n")
}

// TestCheckDecidesRevisionRulesFromHistory: given the workload's ReplicaSets, minInterval
// is decided from them, as the webhook decides without a journal; the fleet limit, which
// reads other workloads and a ledger, stays undecided; revisions of another workload
// decide nothing.
func TestCheckDecidesRevisionRulesFromHistory(t *testing.T) {
	policies := writeTemp(t, "policy.yaml", revisionPolicy)
	old := agent("agent:1")
	old.UID = "" // a manifest from git: the ReplicaSet's owner reference names it
	next := agent("agent:2")
	next.UID = ""
	files := writeTemp(t, "change.yaml", yamlOf(t, old, next))
	for name, tc := range map[string]struct {
		history    []any
		wantAction string
		wantCode   int
		decided    bool // minInterval
	}{
		"a revision 10 minutes old: minInterval refuses": {history: []any{replicaSetOf(agent("agent:1"), "u1", 10*time.Minute)}, wantAction: "deny", wantCode: 1, decided: true},
		"a revision 2 hours old: it passes":              {history: []any{replicaSetOf(agent("agent:1"), "u1", 2*time.Hour)}, wantAction: ActionUndecided, decided: true},
		"another workload's revisions decide nothing": {history: []any{func() any {
			rs := replicaSetOf(agent("agent:1"), "u9", 10*time.Minute)
			rs.OwnerReferences[0].Name = "other"
			return rs
		}()}, wantAction: ActionUndecided},
	} {
		t.Run(name, func(t *testing.T) {
			h := writeTemp(t, "history.yaml", yamlOf(t, tc.history...))
			var out bytes.Buffer
			err := Run(&out, nil, &Options{Policies: []string{policies}, Files: []string{files}, History: []string{h}, Output: "json"}, checkNow)
			if code := exitCode(t, err); code != tc.wantCode {
				t.Errorf("exit %d, want %d", code, tc.wantCode)
			}
			var report Report
			if err := json.Unmarshal(out.Bytes(), &report); err != nil {
				t.Fatal(err)
			}
			r := report.Results[0]
			var undecided []string
			for _, u := range r.Undecided {
				undecided = append(undecided, u.Rule)
			}
			want := []string{"concurrency"}
			if !tc.decided {
				want = []string{"minInterval", "concurrency"}
			}
			if r.Action != tc.wantAction || !cmp.Equal(want, undecided) {
				t.Errorf("action %s, undecided %v; want %s and %v: %+v", r.Action, undecided, tc.wantAction, want, r)
			}
		})
	}
}

// TestCheckReadsTheClusterAsTheWebhook: with a cluster, a workload given once is an
// UPDATE from the cluster's object, and every rule is decided from what the webhook reads:
// the journal says when the current revision became current, the fleet ledger and the
// other workloads are read, nothing is undecided.
func TestCheckReadsTheClusterAsTheWebhook(t *testing.T) {
	live := agent("agent:1")
	defaults.Object(live) // as the API server stores it, and the journal records its template
	w, err := workload.From(live)
	if err != nil {
		t.Fatal(err)
	}
	j := journal.Observe(nil, w, history.History{}, nil, checkNow.Add(-10*time.Minute))
	cm, err := journal.Encode(j, DefaultHoldfastNamespace)
	if err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(informer.NewScheme()).WithObjects(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{corev1.LabelMetadataName: "kube-system"}}},
		live, replicaSetOf(live, "u1", 3*time.Hour), cm).Build()
	cluster, err := newCluster(c, DefaultHoldfastNamespace)
	if err != nil {
		t.Fatal(err)
	}
	policies, err := ReadPolicies([]string{writeTemp(t, "policy.yaml", revisionPolicy)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	next := agent("agent:2")
	next.UID, next.Status = "", appsv1.DeploymentStatus{}
	results, err := Evaluate(policies, []Document{{Source: "new.yaml", Object: next}}, nil, cluster, authenticationv1.UserInfo{}, checkNow)
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.Operation != "UPDATE" || r.Action != "deny" || r.Code != 403 || len(r.Undecided) != 0 || len(r.Violations) != 1 ||
		!strings.Contains(r.Violations[0].Message, "[pace/minInterval] Deployment kube-system/agent got its current revision 10m0s ago") {
		t.Errorf("result %+v; want an UPDATE refused by minInterval from the journal (10 minutes), nothing undecided", r)
	}
	results, err = Evaluate(policies, []Document{{Source: "new.yaml", Object: next}}, nil, cluster, authenticationv1.UserInfo{}, checkNow.Add(2*time.Hour))
	if err != nil || results[0].Action != "allow" || results[0].Code != 200 {
		t.Errorf("two hours later: %v %+v, want allowed (200)", err, results)
	}
	created := agent("agent:2")
	created.Name, created.UID = "new-agent", ""
	results, err = Evaluate(policies, []Document{{Source: "new.yaml", Object: created}}, nil, cluster, authenticationv1.UserInfo{}, checkNow)
	if err != nil || results[0].Operation != "CREATE" || results[0].Action != "allow" {
		t.Errorf("a workload the cluster does not hold: %v %+v, want an allowed CREATE", err, results)
	}
}

// TestCheckPolicyReport: -o policyreport prints a PolicyReport per policy and namespace as
// the audit writes them: a result per change and rule, fail for a refusal, warn for a Warn
// policy's finding, skip for a rule not decided, pass for the others (a strategy the
// change does not make worse passes).
func TestCheckPolicyReport(t *testing.T) {
	warn := strings.NewReplacer("name: pace", "name: shape", "    minInterval: 1h\n    concurrency: {maxInFlight: 1}\n",
		"    strategy: {minReadySeconds: 10}\n    argsMatchReplicas: [{container: agent, flag: --count}]\n", "spec:\n", "spec:\n  mode: Warn\n").Replace(revisionPolicy)
	policies := writeTemp(t, "policies.yaml", revisionPolicy+"---\n"+warn)
	old, next := agent("agent:1"), agent("agent:2")
	next.Spec.Template.Spec.Containers[0].Args = []string{"--count=2"}
	files := writeTemp(t, "change.yaml", yamlOf(t, old, next))
	var out bytes.Buffer
	if code := exitCode(t, Run(&out, nil, &Options{Policies: []string{policies}, Files: []string{files}, Output: "policyreport"}, checkNow)); code != 0 {
		t.Errorf("exit %d", code)
	}
	type result struct {
		Policy, Rule, Result, Message string
		Resources                     []map[string]string
	}
	type report struct {
		APIVersion, Kind string
		Metadata         metav1.ObjectMeta
		Results          []result
		Summary          map[string]int
	}
	var got []report
	for _, doc := range strings.Split(out.String(), "---\n") {
		var r report
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatalf("%v in\n%s", err, out.String())
		}
		for i := range r.Results {
			r.Results[i].Message = strings.SplitN(r.Results[i].Message, ":", 2)[0]
		}
		got = append(got, r)
	}
	agentRef := []map[string]string{{"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "kube-system", "name": "agent", "uid": "u1"}}
	labels := func(p string) map[string]string {
		return map[string]string{"app.kubernetes.io/managed-by": "holdfast", "holdfast.dev/policy": p}
	}
	want := []report{
		{APIVersion: "wgpolicyk8s.io/v1alpha2", Kind: "PolicyReport", Metadata: metav1.ObjectMeta{Name: "holdfast-pace", Namespace: "kube-system", Labels: labels("pace")},
			Results: []result{
				{Policy: "pace", Rule: "minInterval", Result: "skip", Message: "not decided offline", Resources: agentRef},
				{Policy: "pace", Rule: "concurrency", Result: "skip", Message: "not decided offline", Resources: agentRef},
			}, Summary: map[string]int{"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 2}},
		{APIVersion: "wgpolicyk8s.io/v1alpha2", Kind: "PolicyReport", Metadata: metav1.ObjectMeta{Name: "holdfast-shape", Namespace: "kube-system", Labels: labels("shape")},
			Results: []result{
				{Policy: "shape", Rule: "argsMatchReplicas", Result: "warn", Message: "Deployment kube-system/agent", Resources: agentRef},
				{Policy: "shape", Rule: "strategy", Result: "pass", Resources: agentRef},
			}, Summary: map[string]int{"pass": 1, "fail": 0, "warn": 1, "error": 0, "skip": 0}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PolicyReports (-want +got):\n%s\n%s", diff, out.String())
	}
}

// TestCheckJUnitUndecided: a policy whose rules are not decided is a skipped test case,
// a failed one with --fail-on-undecided.
func TestCheckJUnitUndecided(t *testing.T) {
	for _, failOn := range []bool{false, true} {
		var out bytes.Buffer
		o := &Options{Policies: []string{hostedPolicy}, Files: []string{hosted(t, "old.yaml", nil), newImage(t)}, Output: "junit", FailOnUndecided: failOn}
		_ = Run(&out, nil, o, checkNow)
		var suite JUnitSuite
		if err := xml.Unmarshal(out.Bytes(), &suite); err != nil {
			t.Fatal(err)
		}
		c := suite.Cases[0]
		switch {
		case !failOn && (c.Skipped == nil || !strings.HasPrefix(c.Skipped.Message, "not decided offline: [hosted-control-plane/settle]") || suite.Skipped != 1):
			t.Errorf("undecided: %+v, want a skipped case naming the rule", suite)
		case failOn && (c.Failure == nil || c.Failure.Type != ActionUndecided || suite.Failures != 1):
			t.Errorf("--fail-on-undecided: %+v, want a failed case", suite)
		}
	}
}

func TestCheckNowIsRFC3339(t *testing.T) {
	o := &Options{Policies: []string{samplePolicy}, Files: []string{oldManifest}, Output: "text", Now: "yesterday"}
	if out, code := run(t, o, ""); code != 2 || !strings.Contains(out, "--now") {
		t.Errorf("exit %d, %q; want 2 naming --now", code, out)
	}
	o.Now = "2027-01-01T00:00:00Z"
	o.Output = "policyreport"
	out, code := run(t, o, "")
	if code != 0 || !strings.Contains(out, "seconds: 1798761600") {
		t.Errorf("exit %d, output:\n%s\nwant the results stamped at --now", code, out)
	}
}

// TestNewDaemonSetLimitsAreNotDecidedOffline: a new DaemonSet's maxUnavailable resolves
// against the nodes it will run on (the API server clears its status; an absolute value is
// capped at them too), which only the cluster knows: offline, the strategy rule is named
// undecided, never passed. A strategy rule that reads no count is decided from the objects.
func TestNewDaemonSetLimitsAreNotDecidedOffline(t *testing.T) {
	policy := func(strategy string) string {
		return writeTemp(t, "policy.yaml", `apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: agents}
spec:
  targets: {kinds: [DaemonSet]}
  rules:
    strategy: `+strategy+`
`)
	}
	ds := func(maxUnavailable string) string {
		return writeTemp(t, "ds.yaml", `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent, namespace: kube-system}
spec:
  selector: {matchLabels: {app: agent}}
  updateStrategy: {type: RollingUpdate, rollingUpdate: {maxUnavailable: `+maxUnavailable+`}}
  template:
    metadata: {labels: {app: agent}}
    spec: {containers: [{name: agent, image: "agent:1", readinessProbe: {grpc: {port: 8080}}}]}
`)
	}
	for _, tc := range []struct{ policy, maxUnavailable, want string }{
		{"{maxUnavailable: 1}", `"100%"`, "undecided"},
		{"{maxUnavailable: 1}", "5", "undecided"},
		{"{readinessProbe: true}", `"100%"`, "allow"},
	} {
		out, code := run(t, &Options{Policies: []string{policy(tc.policy)}, Files: []string{ds(tc.maxUnavailable)}, Output: "text"}, "")
		if code != 0 || !strings.Contains(out, "CREATE DaemonSet kube-system/agent: "+tc.want+"\n") ||
			(tc.want == "undecided" && !strings.Contains(out, "[agents/strategy] strategy reads how many nodes")) {
			t.Errorf("strategy %s, maxUnavailable %s: exit %d, output:\n%s", tc.policy, tc.maxUnavailable, code, out)
		}
	}
}
