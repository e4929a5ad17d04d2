// Package golden holds what holdfast stores in the cluster to files under a package's
// testdata/: a test builds the stored form with the code that writes it and compares it
// byte for byte with the file. `go test ./internal/budget -update` rewrites the files with
// what the code writes now; the diff of testdata/ is then the change to review. What is
// stored is an API: the previous release, running beside this one during a rolling
// upgrade, reads it, so a change must be additive or migrated.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ with what the code writes now")

// Assert fails t when got differs from the file at path; with -update it writes got there
// instead.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("the stored form differs from %s (-file +now):\n%s\n"+
			"The previous release reads what this one stores: make the change additive (or migrate it), "+
			"add a test that the previous release's form still reads, then rewrite the file with -update",
			path, cmp.Diff(string(want), string(got)))
	}
}

// AssertJSON is Assert of v as indented JSON with a final newline.
func AssertJSON(t testing.TB, path string, v any) {
	t.Helper()
	Assert(t, path, JSON(t, v))
}

// JSON is v as indented JSON with a final newline, the form of the golden files.
func JSON(t testing.TB, v any) []byte {
	t.Helper()
	raw, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(raw, '\n')
}

// Load decodes the JSON file at path into v: a fixture of what a release stored. A field
// v's type lacks fails t, so that a misspelt fixture is not read as a shorter one.
func Load(t testing.TB, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
