package simulate

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/sim"
)

const storm = "../../../scenarios/operator-storm.yaml"

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

func TestSimulatePrintsTimelineAndFigures(t *testing.T) {
	out, code := run(t, &Options{Files: []string{storm}, Output: "text"}, "")
	for _, want := range []string{
		"scenario operator-storm:",
		"    0.0s  CREATE   Deployment tenant-a/kube-apiserver by operator: admitted",
		"    1.5s  UPDATE   Deployment tenant-a/kube-apiserver by operator: refused (403) [hosted-control-plane/minInterval]",
		"  Deployment tenant-a/kube-apiserver: revisions=2 peakRevisionsWithPods=2",
		"converged=true",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d, want 0", code)
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
}

func TestSimulateBadInput(t *testing.T) {
	for name, tc := range map[string]struct {
		o     Options
		stdin string
		want  string
	}{
		"output":      {Options{Files: []string{storm}, Output: "yaml"}, "", `--output "yaml": want text or json`},
		"missing":     {Options{Files: []string{"nope.yaml"}, Output: "text"}, "", "nope.yaml: no such file"},
		"no scenario": {Options{Files: []string{"-"}, Output: "text"}, "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n", "no Scenario document"},
		"not a scenario object": {Options{Files: []string{"-"}, Output: "text"},
			"apiVersion: v1\nkind: Secret\nmetadata: {name: a}\n", "stdin, document 1: a Secret: a scenario holds"},
	} {
		t.Run(name, func(t *testing.T) {
			out, code := run(t, &tc.o, tc.stdin)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output %q; want exit 2 and %q", code, out, tc.want)
			}
		})
	}
}
