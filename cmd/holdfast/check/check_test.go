package check

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

const (
	samplePolicy = "../../../config/samples/rolloutpolicy_konnectivity_server_count.yaml"
	oldManifest  = "testdata/kube-apiserver-old.yaml"
	scaled       = "testdata/kube-apiserver-scaled.yaml"
)

func run(t *testing.T, o *Options, stdin string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	err := Run(&out, strings.NewReader(stdin), o, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
	var ee *ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String() + ee.Error(), ee.Code
	}
	t.Fatalf("Run: %v", err)
	return "", 0
}

func TestCheckPrintsTheWebhooksDenial(t *testing.T) {
	out, code := run(t, &Options{Policies: []string{samplePolicy}, Files: []string{oldManifest, scaled}, Output: "text"}, "")
	want := "[konnectivity-server-count/argsMatchReplicas] Deployment tenant-a/kube-apiserver: container \"konnectivity-server\" has " +
		"--server-count=3 but spec.replicas is 5; change replicas and --server-count together, to --server-count=5"
	if code != 1 || !strings.Contains(out, "UPDATE Deployment tenant-a/kube-apiserver: deny") || !strings.Contains(out, want) {
		t.Errorf("exit %d, output:\n%s\nwant exit 1 and %q", code, out, want)
	}

	out, code = run(t, &Options{Policies: []string{samplePolicy}, Files: []string{oldManifest}, Output: "json"}, "")
	var report Report
	if err := json.Unmarshal([]byte(out), &report); err != nil || code != 0 {
		t.Fatalf("exit %d, output %s: %v", code, out, err)
	}
	results := report.Results
	if len(results) != 1 || results[0].Operation != "CREATE" || results[0].Action != "allow" || len(results[0].Violations) != 0 {
		t.Errorf("results = %+v, want one allowed CREATE", results)
	}
}

func TestCheckReadsStdinAndNamespaces(t *testing.T) {
	raw, err := os.ReadFile(scaled)
	if err != nil {
		t.Fatal(err)
	}
	mismatched := strings.Replace(string(raw), "--server-count=3", "--server-count=1", 1)
	// Without its Namespace, check cannot tell whether the sample policy, which selects
	// hosted control planes by a namespace label, applies: undecided, never a pass.
	out, code := run(t, &Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"}, mismatched)
	if code != 0 || !strings.Contains(out, "CREATE Deployment tenant-a/kube-apiserver: undecided") ||
		!strings.Contains(out, "[konnectivity-server-count/targets] targets reads the labels of the workload's namespace") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
	namespace := "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant-a\n  labels:\n    holdfast.dev/hosted-control-plane: \"true\"\n---\n"
	out, code = run(t, &Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"}, namespace+mismatched)
	if code != 1 || !strings.Contains(out, "has --server-count=1 but spec.replicas is 5") {
		t.Errorf("exit %d, output:\n%s", code, out)
	}
}

func TestCheckRefusesInputItCannotRead(t *testing.T) {
	noRules := "apiVersion: holdfast.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: empty}\nspec: {targets: {}, rules: {}}\n"
	badSelector := "apiVersion: holdfast.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: bad}\n" +
		"spec: {targets: {selector: {matchLabels: {'bad key!': x}}}, rules: {minInterval: 1m}}\n"
	cases := map[string]struct {
		o     *Options
		stdin string
		want  string // in the error
	}{
		"missing file":   {&Options{Policies: []string{samplePolicy}, Files: []string{"testdata/none.yaml"}, Output: "text"}, "", "testdata/none.yaml"},
		"unknown output": {&Options{Policies: []string{samplePolicy}, Files: []string{oldManifest}, Output: "xml"}, "", "--output"},
		"a policy as a workload": {&Options{Policies: []string{samplePolicy}, Files: []string{samplePolicy}, Output: "text"}, "",
			"rolloutpolicy_konnectivity_server_count.yaml, document 1: a RolloutPolicy is a policy: give policies with -p"},
		"not a Kubernetes object": {&Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"}, "foo: bar\n", "stdin, document 1: not a Kubernetes object"},
		"no apiVersion":           {&Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"}, "kind: Service\n", "stdin, document 1: not a Kubernetes object"},
		"an old apps version": {&Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"},
			"apiVersion: apps/v1beta2\nkind: Deployment\nmetadata: {name: d}\n", "holdfast judges apps/v1 workloads"},
		"not a policy":     {&Options{Policies: []string{oldManifest}, Files: []string{oldManifest}, Output: "text"}, "", "kube-apiserver-old.yaml, document 1: a *v1.Namespace is not a policy"},
		"three of a kind":  {&Options{Policies: []string{samplePolicy}, Files: []string{oldManifest, scaled, scaled}, Output: "text"}, "", "kube-apiserver-scaled.yaml, document 1: Deployment tenant-a/kube-apiserver is given a third time"},
		"undecodable YAML": {&Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"}, "---\nkind: [\n", "stdin, document 1"},
		"a policy without rules": {&Options{Policies: []string{"-"}, Files: []string{oldManifest}, Output: "text"}, noRules,
			"stdin, document 1: RolloutPolicy.holdfast.dev \"empty\" is invalid: spec.rules: Invalid value: rules must enable at least one of"},
		"a policy whose selector kube cannot parse": {&Options{Policies: []string{"-"}, Files: []string{oldManifest}, Output: "text"}, badSelector, "spec.targets.selector"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if out, code := run(t, tc.o, tc.stdin); code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output %q; want 2 and %q", code, out, tc.want)
			}
		})
	}
}

// TestCheckValidatesPoliciesAsTheAPIServer: check reads a policy exactly when the API
// server, with holdfast's policy webhook, would store it (internal/validation), and says
// which file, document and field, and what the field must be.
func TestCheckValidatesPoliciesAsTheAPIServer(t *testing.T) {
	policy := func(spec string) string {
		return "apiVersion: holdfast.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: p}\nspec:\n" + spec
	}
	cases := map[string]struct {
		policy string
		want   string // "" reads the policy; otherwise in the exit-2 error
	}{
		"only concurrency":  {policy: policy("  targets: {}\n  rules: {concurrency: {maxInFlight: 1}}\n")},
		"only sharedBudget": {policy: policy("  targets: {}\n  rules: {sharedBudget: {disruptionPolicy: agents}}\n")},
		"a misspelt mode": {policy: policy("  mode: Enforse\n  targets: {}\n  rules: {minInterval: 1m}\n"),
			want: `stdin, document 1: RolloutPolicy.holdfast.dev "p" is invalid: [spec.mode: Unsupported value: "Enforse": supported values: "Enforce", "Warn", "Audit"`},
		"a misspelt field": {policy: policy("  targets: {}\n  rules: {minIntervall: 1m}\n"),
			want: "stdin, document 1: RolloutPolicy.holdfast.dev \"p\" is invalid: spec.rules.minIntervall: Forbidden: unknown field; the fields here are argsMatchReplicas, concurrency"},
		"a schedule that does not parse": {policy: policy("  targets: {}\n  rules: {minInterval: 1m}\n  windows: [{schedule: '0 25 * * *', duration: 1h, action: Deny}]\n"),
			want: `spec.windows[0].schedule: Invalid value: "0 25 * * *"`},
		"an unknown time zone": {policy: policy("  targets: {}\n  rules: {minInterval: 1m}\n  windows: [{schedule: '0 9 * * *', duration: 1h, action: Deny, timeZone: Mars/Olympus}]\n"),
			want: `spec.windows[0].timeZone: Invalid value: "Mars/Olympus": unknown time zone`},
		"a DisruptionPolicy with a bad budget": {policy: "apiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {name: d}\nspec:\n  targets: {}\n  maxUnavailable: half\n",
			want: `DisruptionPolicy.holdfast.dev "d" is invalid: spec.maxUnavailable: Invalid value: "half": must be a non-negative number of pods or a percentage such as 25%`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, code := run(t, &Options{Policies: []string{"-"}, Files: []string{oldManifest}, Output: "text"}, tc.policy)
			switch {
			case tc.want == "" && code != 0:
				t.Errorf("exit %d, output %q; want the policy read", code, out)
			case tc.want != "" && (code != 2 || !strings.Contains(out, tc.want)):
				t.Errorf("exit %d, output %q; want 2 and %q", code, out, tc.want)
			}
		})
	}
}

// namespacedPolicy selects Deployments in namespace ns by its name label, in mode, and
// refuses a konnectivity-server whose --server-count is not spec.replicas.
func namespacedPolicy(ns, mode string) string {
	return "apiVersion: holdfast.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: in-" + ns + "}\nspec:\n  mode: " + mode +
		"\n  targets: {kinds: [Deployment], namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: " + ns + "}}}\n" +
		"  rules: {argsMatchReplicas: [{container: konnectivity-server, flag: --server-count}]}\n"
}

// mismatched is the scaled kube-apiserver with --server-count=1 (5 replicas), without
// metadata.namespace.
func mismatched(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(scaled)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(raw), "--server-count=3", "--server-count=1", 1)
	return strings.Replace(s, "  namespace: tenant-a\n", "", 1)
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := t.TempDir() + "/" + name
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const otherKinds = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\n" +
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\n" +
	"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n---\n"

// TestCheckJudgesWhatCIGivesIt: a kustomize stream mixes workloads with kinds check does
// not judge (skipped and counted); workloads without a namespace are judged in -n's; Warn
// fails only with --fail-on-warn.
func TestCheckJudgesWhatCIGivesIt(t *testing.T) {
	workload := mismatched(t)
	cases := map[string]struct {
		policy     string
		namespace  string
		failOnWarn bool
		stream     string
		wantCode   int
		wantObject string
		wantAction string
		wantSkip   map[string]int
	}{
		"skips a Service and ConfigMaps among workloads": {policy: namespacedPolicy("default", "Enforce"), stream: otherKinds + workload + "---\n" + otherKinds,
			wantCode: 1, wantObject: "Deployment default/kube-apiserver", wantAction: "deny", wantSkip: map[string]int{"ConfigMap": 4, "Service": 2}},
		"judged in -n's namespace": {policy: namespacedPolicy("tenant-b", "Enforce"), namespace: "tenant-b", stream: workload,
			wantCode: 1, wantObject: "Deployment tenant-b/kube-apiserver", wantAction: "deny"},
		"judged in default without -n, not in the policy's namespace": {policy: namespacedPolicy("tenant-b", "Enforce"), stream: workload,
			wantCode: 0, wantObject: "Deployment default/kube-apiserver", wantAction: "allow"},
		"a warning passes": {policy: namespacedPolicy("default", "Warn"), stream: workload,
			wantCode: 0, wantObject: "Deployment default/kube-apiserver", wantAction: "warn"},
		"a warning fails with --fail-on-warn": {policy: namespacedPolicy("default", "Warn"), failOnWarn: true, stream: workload,
			wantCode: 1, wantObject: "Deployment default/kube-apiserver", wantAction: "warn"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			policies := writeTemp(t, "policy.yaml", tc.policy)
			for _, format := range []string{"json", "yaml"} {
				o := &Options{Policies: []string{policies}, Files: []string{"-"}, Output: format, Namespace: tc.namespace, FailOnWarn: tc.failOnWarn}
				var out bytes.Buffer
				err := Run(&out, strings.NewReader(tc.stream), o, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC))
				if code := exitCode(t, err); code != tc.wantCode {
					t.Errorf("%s: exit %d (%v), want %d", format, code, err, tc.wantCode)
				}
				var report Report
				if err := yaml.Unmarshal(out.Bytes(), &report); err != nil { // YAML reads JSON too
					t.Fatalf("%s: %v in\n%s", format, err, out.String())
				}
				if len(report.Results) != 1 || report.Results[0].Object != tc.wantObject || report.Results[0].Action != tc.wantAction {
					t.Errorf("%s: results %+v, want one %s: %s", format, report.Results, tc.wantObject, tc.wantAction)
				}
				want := 0
				for _, n := range tc.wantSkip {
					want += n
				}
				if report.Skipped != want || !cmp.Equal(report.SkippedKinds, tc.wantSkip) {
					t.Errorf("%s: skipped %d %v, want %d %v", format, report.Skipped, report.SkippedKinds, want, tc.wantSkip)
				}
			}
		})
	}

	out, _ := run(t, &Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"}, otherKinds+workload)
	if want := "skipped 3 documents of kinds holdfast does not judge: ConfigMap (2), Service (1)\n"; !strings.HasSuffix(out, want) {
		t.Errorf("text output:\n%s\nwant it to end with %q", out, want)
	}
}

// TestCheckJUnit: one test case per change and policy, failed when refused, skipped for
// each document of a kind check does not judge, with the suite's counts.
func TestCheckJUnit(t *testing.T) {
	policies := writeTemp(t, "policies.yaml", namespacedPolicy("default", "Enforce")+"---\n"+namespacedPolicy("kube-system", "Enforce")+"---\n"+
		strings.Replace(namespacedPolicy("default", "Warn"), "name: in-default", "name: warn-default", 1))
	type counts struct{ Tests, Failures, Skipped, Cases, FailedCases, SkippedCases int }
	cases := map[string]struct {
		failOnWarn bool
		want       counts
	}{
		// Two workloads in default: each judged by in-default and warn-default.
		"refusals fail":                     {want: counts{Tests: 7, Failures: 2, Skipped: 3, Cases: 7, FailedCases: 2, SkippedCases: 3}},
		"warnings fail with --fail-on-warn": {failOnWarn: true, want: counts{Tests: 7, Failures: 4, Skipped: 3, Cases: 7, FailedCases: 4, SkippedCases: 3}},
	}
	workload := mismatched(t)
	stream := otherKinds + workload + "---\n" + strings.Replace(workload, "name: kube-apiserver\n", "name: other\n", 1)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			o := &Options{Policies: []string{policies}, Files: []string{"-"}, Output: "junit", FailOnWarn: tc.failOnWarn}
			if code := exitCode(t, Run(&out, strings.NewReader(stream), o, time.Now())); code != 1 {
				t.Errorf("exit %d, want 1", code)
			}
			var suite JUnitSuite
			if err := xml.Unmarshal(out.Bytes(), &suite); err != nil {
				t.Fatalf("%v in\n%s", err, out.String())
			}
			got := counts{Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Cases: len(suite.Cases)}
			for _, c := range suite.Cases {
				if c.Failure != nil {
					got.FailedCases++
					if c.Name == "in-kube-system" {
						t.Errorf("a failure for a policy that does not select the workload: %+v", c)
					}
				}
				if c.Skipped != nil {
					got.SkippedCases++
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || suite.Name != "holdfast check" {
				t.Errorf("suite %q (-want +got):\n%s", suite.Name, diff)
			}
		})
	}
}

// TestCheckExitCodesOnTheCommandLine: cobra's usage errors exit 2, as bad input does, and
// never 1, which CI reads as a refusal.
func TestCheckExitCodesOnTheCommandLine(t *testing.T) {
	cases := map[string]struct {
		args []string
		want int
	}{
		"pass":             {args: []string{"-p", samplePolicy, "-f", oldManifest}, want: 0},
		"refused":          {args: []string{"-p", samplePolicy, "-f", oldManifest, "-f", scaled}, want: 1},
		"unknown flag":     {args: []string{"-p", samplePolicy, "-f", oldManifest, "--bogus"}, want: 2},
		"bad flag value":   {args: []string{"-p", samplePolicy, "-f", oldManifest, "--fail-on-warn=maybe"}, want: 2},
		"unknown -o":       {args: []string{"-p", samplePolicy, "-f", oldManifest, "-o", "xml"}, want: 2},
		"an argument":      {args: []string{"-p", samplePolicy, "-f", oldManifest, "extra"}, want: 2},
		"no policies flag": {args: []string{"-f", oldManifest}, want: 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cmd := NewCommand()
			cmd.SetArgs(tc.args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			if code := exitCode(t, cmd.Execute()); code != tc.want {
				t.Errorf("exit %d, want %d", code, tc.want)
			}
		})
	}
}

// exitCode is the process exit code main gives err.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.Code
	}
	t.Fatalf("an error without an exit code ends the process with 1: %v", err)
	return 1
}
