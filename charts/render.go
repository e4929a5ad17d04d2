// Package charts renders the Helm chart in charts/holdfast with Helm's own library, for
// the chart tests and for applying the chart to a test cluster.
package charts

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Dir is the chart's directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "holdfast")
}

// ConfigDir is the kustomize configuration's directory, config/ at the repository root.
func ConfigDir() string {
	return filepath.Join(filepath.Dir(Dir()), "..", "config")
}

// Kustomize builds a kustomization under config/ (for example "default") as
// `kubectl kustomize` would, with kustomize's own library.
func Kustomize(dir string) ([]*unstructured.Unstructured, error) {
	return kustomize(filepath.Join(ConfigDir(), dir))
}

// Overlay writes kustomization into dir as an overlay of config/ ({config} in its text is
// config/'s path from dir, since kustomize refuses absolute paths to other kustomizations)
// and builds it.
func Overlay(dir, kustomization string) ([]*unstructured.Unstructured, error) {
	config, err := filepath.Abs(ConfigDir())
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rel, err := filepath.Rel(abs, config)
	if err != nil {
		return nil, err
	}
	text := strings.ReplaceAll(kustomization, "{config}", filepath.ToSlash(rel))
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(text), 0o644); err != nil {
		return nil, err
	}
	return kustomize(dir)
}

// kustomize builds the kustomization in dir.
func kustomize(dir string) ([]*unstructured.Unstructured, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		// Through YAML, so numbers have the types Render gives them.
		y, err := r.AsYAML()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(y, &u.Object); err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

// CRDs returns the CustomResourceDefinitions the chart renders with values (nil: the
// defaults), as `helm install` and `helm upgrade` apply them.
func CRDs(values map[string]any) ([]*unstructured.Unstructured, error) {
	objs, err := Render("holdfast-system", values)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			out = append(out, u)
		}
	}
	return out, nil
}

// Render renders the chart as `helm install holdfast --namespace ns` would, validating
// values against values.schema.json, and returns the objects sorted by file and order.
func Render(ns string, values map[string]any) ([]*unstructured.Unstructured, error) {
	c, err := loader.Load(Dir())
	if err != nil {
		return nil, err
	}
	return renderChart(c, "holdfast", ns, values)
}

// RenderChart renders the chart in dir, another project's (cert-manager's, for its CRDs),
// as `helm install name --namespace ns` would.
func RenderChart(dir, name, ns string, values map[string]any) ([]*unstructured.Unstructured, error) {
	c, err := loader.Load(dir)
	if err != nil {
		return nil, err
	}
	return renderChart(c, name, ns, values)
}

// renderChart renders c (and the dependencies its values enable) as `helm install name
// --namespace ns` would.
func renderChart(c *chart.Chart, name, ns string, values map[string]any) ([]*unstructured.Unstructured, error) {
	if err := chartutil.ProcessDependenciesWithMerge(c, values); err != nil {
		return nil, err
	}
	vals, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: name, Namespace: ns, IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(c, vals)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, name := range names {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range strings.Split(files[name], "\n---") {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(doc), "---")), &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if len(u.Object) > 0 {
				out = append(out, u)
			}
		}
	}
	return out, nil
}
