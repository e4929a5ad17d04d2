// Command crdbounds bounds the label selectors of holdfast's CRDs, which controller-gen
// generates from metav1.LabelSelector with no limits (its fields take no markers here):
// the selectors' CEL rules (api/v1alpha1, format.qualifiedName and format.labelValue) are
// only accepted by the API server within its static cost budget, which it estimates from
// the largest value the schema allows. The bounds are far above any selector a policy
// needs and kube's own limits for what they hold (a qualified name is at most 253+1+63
// characters, a label value 63). `make manifests` runs it right after controller-gen, and
// `make verify` fails on any diff.
package main

import (
	"bytes"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/hack/crds"
)

const (
	maxLabels       = 64
	maxRequirements = 32
	maxValues       = 256
	maxKey          = 253 + 1 + 63
	maxValue        = 63
)

func main() {
	if err := run(crds.Dir); err != nil {
		fmt.Fprintln(os.Stderr, "crdbounds:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := crds.Read(dir)
	if err != nil {
		return err
	}
	for _, f := range files {
		crd := &f.CRD
		for _, v := range crd.Spec.Versions {
			if v.Schema != nil {
				bound(v.Schema.OpenAPIV3Schema)
			}
		}
		out, err := yaml.Marshal(crd)
		if err != nil {
			return err
		}
		// controller-gen's form: a document separator, and no status.
		out = append([]byte("---\n"), bytes.Replace(out, []byte("status:\n  acceptedNames:\n    kind: \"\"\n    plural: \"\"\n  conditions: null\n  storedVersions: null\n"), nil, 1)...)
		if err := os.WriteFile(f.Path, out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// bound sets the limits on every label selector in s.
func bound(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	if labels, ok := s.Properties["matchLabels"]; ok {
		if exprs, ok := s.Properties["matchExpressions"]; ok && exprs.Items != nil && exprs.Items.Schema != nil {
			labels.MaxProperties = ptr.To[int64](maxLabels)
			labels.AdditionalProperties.Schema.MaxLength = ptr.To[int64](maxValue)
			s.Properties["matchLabels"] = labels
			exprs.MaxItems = ptr.To[int64](maxRequirements)
			req := exprs.Items.Schema
			key := req.Properties["key"]
			key.MaxLength = ptr.To[int64](maxKey)
			req.Properties["key"] = key
			values := req.Properties["values"]
			values.MaxItems = ptr.To[int64](maxValues)
			values.Items.Schema.MaxLength = ptr.To[int64](maxValue)
			req.Properties["values"] = values
			s.Properties["matchExpressions"] = exprs
			return
		}
	}
	for name, p := range s.Properties {
		bound(&p)
		s.Properties[name] = p
	}
	if s.Items != nil {
		bound(s.Items.Schema)
	}
}
