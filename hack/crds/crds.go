// Package crds reads the CRDs controller-gen writes to config/crd/bases, for the
// generators that work from them (crdbounds, docgen) and the tests that hold the chart,
// the API server and the validation to them.
package crds

import (
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Dir is where controller-gen writes the CRDs, from the repository's root.
var Dir = filepath.Join("config", "crd", "bases")

// File is one CRD and the file it was read from.
type File struct {
	Path string
	CRD  apiextensionsv1.CustomResourceDefinition
}

// Read decodes, strictly, every CRD in dir, in the order of their file names; a
// directory without any is an error.
func Read(dir string) ([]File, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no CRDs in %s: %v", dir, err)
	}
	files := make([]File, len(paths))
	for i, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		files[i].Path = p
		if err := yaml.UnmarshalStrict(raw, &files[i].CRD); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
	}
	return files, nil
}
