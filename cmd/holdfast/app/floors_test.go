package app

import (
	"os/exec"
	"strings"
	"testing"
)

// floors are the layers of docs/architecture.md, lowest first: a package may import
// only from floors below its own (and api from none of holdfast's).
var floors = map[string]int{
	"api/v1alpha1":              0,
	"internal/apijson":          1,
	"internal/informer":         1,
	"internal/events":           1,
	"internal/enqueue":          1,
	"internal/ledger":           1,
	"internal/kubemodel":        1,
	"internal/memstore":         1,
	"internal/manifests":        1,
	"internal/version":          1,
	"internal/decision":         2,
	"internal/review":           2,
	"internal/workload":         2,
	"internal/history":          3,
	"internal/policy":           3,
	"internal/interception":     3,
	"internal/budget":           2,
	"internal/pdb":              4,
	"internal/journal":          4,
	"internal/controller":       5,
	"webhooks/rollout":          5,
	"webhooks/eviction":         5,
	"webhooks/policyvalidation": 5,
	"cmd/holdfast/app":          6,
	"internal/sim":              6,
	"cmd/holdfast/check":        7,
	"cmd/holdfast/simulate":     7,
	"cmd/holdfast":              8,
}

const module = "github.com/holdfast-dev/holdfast/"

// TestImportFloors holds the production packages to the floors: no package imports one on
// its own floor or above (so the webhooks never import each other or the controllers),
// and nothing outside test/ imports test code.
func TestImportFloors(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, "../../../...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok || strings.HasPrefix(pkg, "test/") || strings.HasPrefix(pkg, "hack/") || pkg == "charts" {
			continue
		}
		floor, known := floors[pkg]
		if !known {
			t.Errorf("package %s has no floor in docs/architecture.md (and this test)", pkg)
			continue
		}
		seen[pkg] = true
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			switch {
			case !ours:
			case strings.HasPrefix(dep, "test/"):
				t.Errorf("%s imports test code %s", pkg, dep)
			case floors[dep] >= floor:
				t.Errorf("%s (floor %d) imports %s (floor %d): imports go down only", pkg, floor, dep, floors[dep])
			}
		}
	}
	for pkg := range floors {
		if !seen[pkg] {
			t.Errorf("the floors name %s, which go list did not report", pkg)
		}
	}
}
