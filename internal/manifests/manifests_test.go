package manifests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEachNamesEveryDocument(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"b.yaml":    "kind: B1\n---\n---\nkind: B2\n",
		"a.json":    `{"kind": "A1"}`,
		"notes.txt": "kind: ignored\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := Each([]string{dir, "-"}, strings.NewReader("kind: S1\n"), func(source string, raw []byte) error {
		got = append(got, source+": "+strings.TrimSpace(string(raw)))
		return nil
	})
	want := []string{
		filepath.Join(dir, "a.json") + `, document 1: {"kind": "A1"}`,
		filepath.Join(dir, "b.yaml") + `, document 1: {"kind":"B1"}`,
		filepath.Join(dir, "b.yaml") + `, document 2: {"kind":"B2"}`, // an empty document is not counted
		`stdin, document 1: {"kind":"S1"}`,
	}
	if err != nil || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("err %v, documents:\n%s\nwant:\n%s", err, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestEachNamesWhatDoesNotParse(t *testing.T) {
	err := Each([]string{"-"}, strings.NewReader("kind: A\n---\nkind: [unclosed\n"), func(string, []byte) error { return nil })
	if err == nil || !strings.HasPrefix(err.Error(), "stdin, document 2: ") {
		t.Errorf("error %v, want one naming stdin, document 2", err)
	}
	if err := Each([]string{"missing.yaml"}, nil, func(string, []byte) error { return nil }); err == nil {
		t.Error("a missing file read without error")
	}
}
