//go:build promtool

package charts

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestAlertRules runs the chart's rendered alerts through `promtool check rules` and the
// unit tests in testdata/alerts_test.yaml with `promtool test rules`. It needs PROMTOOL, the
// path of a promtool binary: `make lint` builds a pinned one (hack/promtool.sh) and runs
// this file's tests under the promtool build tag, so that `make test` neither needs
// promtool nor reports a skipped test.
func TestAlertRules(t *testing.T) {
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		t.Fatal("PROMTOOL is not set: run `make lint`, which builds promtool with hack/promtool.sh")
	}
	rules, _ := renderedRules(t)
	tests, err := os.ReadFile(alertTests)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(alertTests)), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", filepath.Base(alertTests)}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %v: %v\n%s\nrules.yaml:\n%s", args, err, out, rules)
		} else {
			t.Logf("promtool %v:\n%s", args, out)
		}
	}
}
