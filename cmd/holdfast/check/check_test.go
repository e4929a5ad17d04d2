package check

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
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
	var results []Result
	if err := json.Unmarshal([]byte(out), &results); err != nil || code != 0 {
		t.Fatalf("exit %d, output %s: %v", code, out, err)
	}
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
	// Without its Namespace, tenant-a has only its name label: the sample policy, which
	// selects hosted control planes by a namespace label, does not apply.
	out, code := run(t, &Options{Policies: []string{samplePolicy}, Files: []string{"-"}, Output: "text"}, mismatched)
	if code != 0 || !strings.Contains(out, "CREATE Deployment tenant-a/kube-apiserver: allow") {
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
		"missing file":     {&Options{Policies: []string{samplePolicy}, Files: []string{"testdata/none.yaml"}, Output: "text"}, "", "testdata/none.yaml"},
		"unknown output":   {&Options{Policies: []string{samplePolicy}, Files: []string{oldManifest}, Output: "yaml"}, "", "--output"},
		"not a workload":   {&Options{Policies: []string{samplePolicy}, Files: []string{samplePolicy}, Output: "text"}, "", "rolloutpolicy_konnectivity_server_count.yaml, document 1"},
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
