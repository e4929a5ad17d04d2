package app

import (
	"bufio"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/holdfast-dev/holdfast/"

// architecture is the doc TestImportFloors holds the code to.
const architecture = "../../../docs/architecture.md"

// docLayout is what docs/architecture.md says of the production packages: each one's
// floor (the block under "## Floors") and what it imports (the "Imports" sentence of its
// entry under "## Packages").
type docLayout struct {
	floors  map[string]int
	imports map[string][]string
}

var (
	// A floor line: an optional floor number, the package, two spaces, its description.
	floorLine = regexp.MustCompile(`^(\d+)?\s+([a-z0-9/]+)\s{2,}\S`)
	// An entry: **`path`** — text.
	entryLine = regexp.MustCompile("^\\*\\*`([a-z0-9/]+)`\\*\\*")
	backticks = regexp.MustCompile("`([^`]+)`")
)

// readLayout parses the doc.
func readLayout(t *testing.T) docLayout {
	t.Helper()
	f, err := os.Open(architecture)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	l := docLayout{floors: map[string]int{}, imports: map[string][]string{}}
	var section, entry string
	var paragraph strings.Builder
	inBlock, floor := false, -1
	endEntry := func() {
		if entry != "" {
			l.imports[entry] = importsSentence(t, entry, paragraph.String())
		}
		entry = ""
		paragraph.Reset()
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			endEntry()
			section = strings.TrimPrefix(line, "## ")
			continue
		}
		switch section {
		case "Floors":
			if strings.HasPrefix(line, "```") {
				inBlock = !inBlock
				continue
			}
			if m := floorLine.FindStringSubmatch(line); inBlock && m != nil {
				if m[1] != "" {
					floor, _ = strconv.Atoi(m[1])
				}
				l.floors[m[2]] = floor
			}
		case "Packages":
			if m := entryLine.FindStringSubmatch(line); m != nil {
				endEntry()
				entry = m[1]
			}
			if strings.TrimSpace(line) == "" {
				endEntry()
			} else if entry != "" {
				paragraph.WriteString(line + " ")
			}
		}
	}
	endEntry()
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(l.floors) == 0 || len(l.imports) == 0 {
		t.Fatalf("%s: found %d floors and %d package entries", architecture, len(l.floors), len(l.imports))
	}
	return l
}

// importsSentence is the packages an entry's "Imports …" sentence names; "Imports
// nothing of holdfast's" names none. An entry without the sentence is an error: the doc
// must say which way each package's arrows go.
func importsSentence(t *testing.T, entry, text string) []string {
	_, rest, ok := strings.Cut(text, "Imports ")
	if !ok {
		t.Errorf("%s: the entry of %s has no \"Imports\" sentence", architecture, entry)
		return nil
	}
	sentence, _, _ := strings.Cut(rest, ". ")
	var out []string
	for _, m := range backticks.FindAllStringSubmatch(sentence, -1) {
		out = append(out, m[1])
	}
	return out
}

// resolve names a package as the floors do: a full path, or its last element when that
// is unique ("api" is api/v1alpha1, the policy API).
func (l docLayout) resolve(name string) (string, bool) {
	if name == "api" {
		name = "api/v1alpha1"
	}
	if _, ok := l.floors[name]; ok {
		return name, true
	}
	found := ""
	for pkg := range l.floors {
		if path.Base(pkg) == name {
			if found != "" {
				return "", false
			}
			found = pkg
		}
	}
	return found, found != ""
}

// TestImportFloors holds the production packages to docs/architecture.md: every package
// has a floor and an entry, imports only from floors below its own (so the webhooks never
// import each other or the controllers), and imports exactly what its entry says, no
// more and no less. No production package imports test code; e2e/ (tests only) may.
func TestImportFloors(t *testing.T) {
	l := readLayout(t)
	prod, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(prod)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok || strings.HasPrefix(pkg, "test/") || strings.HasPrefix(pkg, "hack/") || pkg == "charts" || pkg == "e2e" {
			continue
		}
		seen[pkg] = true
		floor, known := l.floors[pkg]
		if !known {
			t.Errorf("package %s has no floor in %s", pkg, architecture)
			continue
		}
		var code []string
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if strings.HasPrefix(dep, "test/") {
				t.Errorf("%s imports test code %s", pkg, dep)
				continue
			}
			code = append(code, dep)
			if f, ok := l.floors[dep]; ok && f >= floor {
				t.Errorf("%s (floor %d) imports %s (floor %d): imports go down only", pkg, floor, dep, f)
			}
		}
		names, documented := l.imports[pkg]
		if !documented {
			t.Errorf("package %s has no entry under \"Packages\" in %s", pkg, architecture)
			continue
		}
		var doc []string
		for _, n := range names {
			dep, ok := l.resolve(n)
			if !ok {
				t.Errorf("%s: the entry of %s names %q, which is no package on the floors (or not only one)", architecture, pkg, n)
				continue
			}
			doc = append(doc, dep)
		}
		for _, dep := range code {
			if !slices.Contains(doc, dep) {
				t.Errorf("%s imports %s; its entry in %s does not say so", pkg, dep, architecture)
			}
		}
		for _, dep := range doc {
			if !slices.Contains(code, dep) {
				t.Errorf("the entry of %s in %s says it imports %s; it does not", pkg, architecture, dep)
			}
		}
	}
	for pkg := range l.floors {
		if !seen[pkg] {
			t.Errorf("%s puts %s on a floor; go list did not report it", architecture, pkg)
		}
	}
	for pkg := range l.imports {
		if !seen[pkg] {
			t.Errorf("%s has an entry for %s; go list did not report it", architecture, pkg)
		}
	}
}
