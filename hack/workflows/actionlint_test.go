package workflows

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
)

const repoRoot = "../.."

// linter runs actionlint's own checks (expressions, contexts and their types, step ids,
// permissions, action inputs, job needs); shellcheck and pyflakes, which it would call as
// external programs, are left out so the result does not depend on what is installed.
func linter(t *testing.T) *actionlint.Linter {
	t.Helper()
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestWorkflowsLintClean(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot, ".github", "workflows", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no workflow under .github/workflows")
	}
	errs, err := linter(t).LintFiles(files, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range errs {
		t.Errorf("%s:%d:%d: %s [%s]", e.Filepath, e.Line, e.Column, e.Message, e.Kind)
	}
}

// TestReleaseWorkflowLintCatchesMistakes proves the lint above can fail: each edit of the
// real release workflow is a mistake actionlint must report.
func TestReleaseWorkflowLintCatchesMistakes(t *testing.T) {
	path := filepath.Join(repoRoot, ".github", "workflows", "release.yml")
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, kind string }{
		{"a step id that does not exist", "steps.image.outputs.digest", "steps.img.outputs.digest", "expression"},
		{"an unknown permission value", "id-token: write", "id-token: sign", "permissions"},
		{"an unknown context", "secrets.GITHUB_TOKEN", "secret.GITHUB_TOKEN", "expression"},
		{"a trigger that does not exist", "push:\n    tags:", "pushed:\n    tags:", "events"},
		{"an input the action does not have", "go-version-file:", "go-version-files:", "action"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(src), tc.old) {
				t.Fatalf("release.yml no longer contains %q: update the case", tc.old)
			}
			broken := strings.Replace(string(src), tc.old, tc.new, 1)
			errs, err := linter(t).Lint(path, []byte(broken), nil)
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, e := range errs {
				kinds = append(kinds, e.Kind)
			}
			if len(errs) == 0 {
				t.Fatalf("actionlint accepted the workflow with %s", tc.name)
			}
			found := false
			for _, k := range kinds {
				found = found || k == tc.kind
			}
			if !found {
				t.Errorf("actionlint reported %v, want a %q error", kinds, tc.kind)
			}
		})
	}
}
