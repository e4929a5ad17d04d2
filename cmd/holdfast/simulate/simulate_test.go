package simulate

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/simulate/sim"
)

const storm = "../../../scenarios/operator-storm.yaml"

func shipped(name string) string { return filepath.Join("..", "..", "..", "scenarios", name+".yaml") }

func run(t *testing.T, o *Options, stdin string) (string, int) {
	t.Helper()
	var out bytes.Buffer
	err := Run(&out, strings.NewReader(stdin), o)
	var ee *app.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String() + ee.Error(), ee.Code
	}
	t.Fatalf("Run: %v", err)
	return "", 0
}

// execute runs the command as the binary does, with its flag parsing.
func execute(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := NewCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	var ee *app.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &ee):
		return out.String(), ee.Code
	}
	return out.String() + err.Error(), -1
}

// withoutPolicies writes the shipped scenario without its RolloutPolicies and
// DisruptionPolicies: the same timeline and expectations, unguarded.
func withoutPolicies(t *testing.T, name string) string {
	t.Helper()
	raw, err := os.ReadFile(shipped(name))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		if !strings.Contains(doc, "\nkind: RolloutPolicy\n") && !strings.Contains(doc, "\nkind: DisruptionPolicy\n") {
			kept = append(kept, doc)
		}
	}
	p := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(p, []byte(strings.Join(kept, "\n---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSimulatePrintsTimelineAndFigures(t *testing.T) {
	out, code := run(t, &Options{Files: []string{storm}, Output: "text"}, "")
	for _, want := range []string{
		"scenario operator-storm:",
		"    0.0s  CREATE   Deployment tenant-a/kube-apiserver by operator: admitted",
		"    1.5s  UPDATE   Deployment tenant-a/kube-apiserver by operator: refused (403) [hosted-control-plane/minInterval]",
		"  Deployment tenant-a/kube-apiserver: revisions=2 peakRevisionsWithPods=2",
		"converged=true",
		"  met   spec.expect.maxRevisions: Deployment tenant-a/kube-apiserver: 2 revisions made, want at most 2\n",
		"3 of 3 expectations met\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
	}
}

// Each shipped scenario meets what it expects (exit 0); without its policies it does not
// (exit 1), and the output names each unmet expectation on a line of its own.
func TestShippedScenariosGateCI(t *testing.T) {
	for name, unmet := range map[string]string{
		"operator-storm":       "  UNMET spec.expect.maxTemplatesWithLivePods: Deployment tenant-a/kube-apiserver: 4 templates with live pods at once, want at most 2\n",
		"agent-drain":          "  UNMET spec.expect.maxUnavailable: Deployment agents/konnectivity-agent: 4 pods unavailable at once, want at most 1\n",
		"kiam-node-group-swap": "  UNMET spec.expect.minReady: Deployment kiam/kiam-server: 0 pods Ready at the fewest, want at least 2\n",
	} {
		t.Run(name, func(t *testing.T) {
			if out, code := execute(t, "-f", shipped(name)); code != 0 || strings.Contains(out, "UNMET") {
				t.Errorf("as shipped: exit %d, want 0:\n%s", code, out)
			}
			out, code := execute(t, "-f", withoutPolicies(t, name))
			if code != 1 || !strings.Contains(out, unmet) {
				t.Errorf("without policies: exit %d, want 1 and %q:\n%s", code, unmet, out)
			}
		})
	}
}

func TestSimulateJSON(t *testing.T) {
	out, code := run(t, &Options{Files: []string{storm}, Output: "json"}, "")
	var res sim.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if w := res.Workload("Deployment tenant-a/kube-apiserver"); w == nil || w.Revisions != 2 || len(res.Timeline) == 0 {
		t.Errorf("figures %+v, %d timeline entries", w, len(res.Timeline))
	}
	if len(res.Expectations) != 3 || len(res.Unmet()) != 0 {
		t.Errorf("expectations %+v, want three, all met", res.Expectations)
	}

	var buf bytes.Buffer
	err := Run(&buf, nil, &Options{Files: []string{withoutPolicies(t, "agent-drain")}, Output: "json"})
	if ee := (*app.ExitError)(nil); !errors.As(err, &ee) || ee.Code != 1 {
		t.Fatalf("unguarded: %v, want exit 1", err)
	}
	res = sim.Result{}
	if err := json.Unmarshal(buf.Bytes(), &res); err != nil {
		t.Fatalf("%v:\n%s", err, buf.String())
	}
	if u := res.Unmet(); len(u) == 0 || u[0].Expectation != "spec.expect.maxUnavailable" || u[0].Got != "4 pods unavailable at once" {
		t.Errorf("unmet %+v", u)
	}
}

// -o junit: a test case per expectation, failed when unmet.
func TestSimulateJUnit(t *testing.T) {
	out, code := execute(t, "-f", withoutPolicies(t, "agent-drain"), "-o", "junit")
	var suite app.JUnitSuite
	if err := xml.Unmarshal([]byte(out), &suite); err != nil || code != 1 {
		t.Fatalf("exit %d, %v:\n%s", code, err, out)
	}
	if suite.Name != "holdfast simulate agent-drain" || suite.Tests != 3 || suite.Failures != 2 || len(suite.Cases) != 3 {
		t.Fatalf("suite %+v", suite)
	}
	c := suite.Cases[0]
	if c.Classname != "Deployment agents/konnectivity-agent" || c.Name != "spec.expect.maxUnavailable" || c.Failure == nil ||
		c.Failure.Message != "want at most 1" || !strings.Contains(c.Failure.Text, "4 pods unavailable at once") {
		t.Errorf("first case %+v, failure %+v", c, c.Failure)
	}
	if d := suite.Cases[2]; d.Name != "spec.expect.drained" || d.Failure != nil {
		t.Errorf("the drain still finishes unguarded: %+v", d)
	}
}

func TestSimulateBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		o     Options
		stdin string
		want  string
	}{
		"output":      {Options{Files: []string{storm}, Output: "yaml"}, "", `--output "yaml": want one of text, json, junit`},
		"missing":     {Options{Files: []string{"nope.yaml"}, Output: "text"}, "", "nope.yaml: no such file"},
		"no scenario": {Options{Files: []string{"-"}, Output: "text"}, "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n", "no Scenario document"},
		"not a scenario object": {Options{Files: []string{"-"}, Output: "text"},
			"apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n", "stdin, document 1: a Secret: a scenario holds"},
		"misspelt expectation": {Options{Files: []string{"-"}, Output: "text"},
			"apiVersion: scenario.holdfast.dev/v1alpha1\nkind: Scenario\nmetadata: {name: s}\nspec:\n  timeline: []\n  expect: {maxUnavailble: 1}\n",
			`stdin, document 1: Scenario.scenario.holdfast.dev "s" is invalid: spec.expect.maxUnavailble: Forbidden: unknown field`},
	} {
		t.Run(name, func(t *testing.T) {
			out, code := run(t, &tc.o, tc.stdin)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output %q; want exit 2 and %q", code, out, tc.want)
			}
		})
	}
}

// cobra's own errors are usage errors: exit 2, never 1, which CI reads as unmet.
func TestSimulateUsageErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"no -f":         {},
		"unknown flag":  {"-f", storm, "--speed", "2"},
		"an argument":   {"-f", storm, "extra"},
		"flag no value": {"-f"},
	} {
		t.Run(name, func(t *testing.T) {
			if out, code := execute(t, args...); code != 2 {
				t.Errorf("exit %d, want 2:\n%s", code, out)
			}
		})
	}
}
