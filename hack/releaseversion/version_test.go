package releaseversion

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReleaseVersion runs the script in a shallow clone of the checked-out commit: clean
// before the first tag (the chart's version as a pre-release of the commit), dirty with an
// untracked source file or an edit, and the tag itself once tagged.
func TestReleaseVersion(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Fatalf("not a git checkout (%v): the release version is git's", err)
	}
	dir := t.TempDir()
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	head := exec.Command("git", "rev-parse", "HEAD")
	head.Dir = root
	commit, err := head.Output()
	if err != nil {
		t.Fatal(err)
	}
	git("init", "-q")
	git("fetch", "-q", "--depth=1", "file://"+root, strings.TrimSpace(string(commit)))
	git("checkout", "-q", "FETCH_HEAD")
	// The script under test is the working tree's, committed in the clone.
	script, err := os.ReadFile(filepath.Join(root, "hack", "release-version.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hack", "release-version.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git("commit", "-q", "--allow-empty", "-am", "release-version.sh of the working tree")
	version := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("bash", append([]string{filepath.Join(dir, "hack", "release-version.sh")}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("release-version.sh %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	short := git("rev-parse", "--short=12", "HEAD")
	if got := version(); !regexp.MustCompile(`^v\d+\.\d+\.\d+-dev\.g` + short + `$`).MatchString(got) {
		t.Errorf("clean, untagged: %q, want v<chart version>-dev.g%s", got, short)
	}
	if err := os.WriteFile(filepath.Join(dir, "cmd", "new.go"), []byte("package main\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := version(); !strings.HasSuffix(got, "-dirty") {
		t.Errorf("with an untracked source file: %q, want -dirty", got)
	}
	if err := os.Remove(filepath.Join(dir, "cmd", "new.go")); err != nil {
		t.Fatal(err)
	}
	git("tag", "v9.8.7")
	if got, tag := version(), version("-t"); got != "v9.8.7" || tag != "9.8.7" {
		t.Errorf("tagged v9.8.7: %q and -t %q", got, tag)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := version("-t"); got != "9.8.7-dirty" {
		t.Errorf("tagged, README edited: -t %q, want 9.8.7-dirty", got)
	}
}
