package charts

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/holdfast-dev/holdfast/hack/crds"
)

// TestRenderCRDs: the chart renders holdfast's CRDs as templates, so that `helm upgrade`
// applies their new schemas, each exactly as config/crd/bases has it and marked
// `helm.sh/resource-policy: keep`, so that `helm uninstall` leaves them and every policy;
// crds.install=false renders none, for clusters that manage the CRDs elsewhere.
func TestRenderCRDs(t *testing.T) {
	files, err := crds.Read(filepath.Join(ConfigDir(), "crd", "bases"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		want[f.CRD.Name] = f.CRD
	}

	rendered, err := CRDs(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, u := range rendered {
		var crd apiextensionsv1.CustomResourceDefinition
		typed(t, u, &crd)
		got[crd.Name] = true
		w, ok := want[crd.Name]
		if !ok {
			t.Errorf("the chart renders CRD %s, which config/crd/bases lacks", crd.Name)
			continue
		}
		if diff := cmp.Diff(w.Spec, crd.Spec); diff != "" {
			t.Errorf("CRD %s spec (-config +chart):\n%s", crd.Name, diff)
		}
		if crd.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s annotations %v: helm uninstall would delete it, and every policy with it", crd.Name, crd.Annotations)
		}
		if crd.Labels["app.kubernetes.io/managed-by"] != "Helm" || crd.Labels["app.kubernetes.io/instance"] != "holdfast" {
			t.Errorf("CRD %s labels %v", crd.Name, crd.Labels)
		}
	}
	for name := range want {
		if !got[name] {
			t.Errorf("the chart does not render CRD %s", name)
		}
	}

	none, err := CRDs(map[string]any{"crds": map[string]any{"install": false}})
	if err != nil {
		t.Fatal(err)
	}
	if len(none) != 0 {
		t.Errorf("crds.install=false renders %d CRDs", len(none))
	}
	if _, err := os.Stat(filepath.Join(Dir(), "crds")); !os.IsNotExist(err) {
		t.Errorf("the chart has a crds/ directory (%v): Helm would install its CRDs besides the templated ones, and never upgrade them", err)
	}
}
