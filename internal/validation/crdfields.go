package validation

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// CRDs are the CRDs this build embeds (config/crd/bases when it was built): the schema
// its types read and write.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		raw, err := fs.ReadFile(crdFiles, p)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// MissingFields lists what the installed CRD lacks of want's served versions: a version it
// does not serve ("v1alpha1"), or a field its schema does not have ("v1alpha1
// spec.pdb.minReplicas"; "[*]" stands for a list's items and a map's values), in order.
// The API server prunes a field its schema lacks from every object it stores or returns,
// without an error, so a holdfast newer than its installed CRDs would never see what a
// policy sets there. Below a field the installed schema keeps unknown fields of
// (x-kubernetes-preserve-unknown-fields), nothing is missing. Validation rules, defaults
// and types are not compared: only what the API server would drop.
func MissingFields(installed, want *apiextensionsv1.CustomResourceDefinition) []string {
	have := map[string]*apiextensionsv1.JSONSchemaProps{}
	for _, v := range installed.Spec.Versions {
		if v.Served {
			have[v.Name] = &apiextensionsv1.JSONSchemaProps{}
			if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
				have[v.Name] = v.Schema.OpenAPIV3Schema
			}
		}
	}
	var out []string
	for _, v := range want.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		h, ok := have[v.Name]
		if !ok {
			out = append(out, v.Name)
			continue
		}
		var fields []string
		missingFields("", h, v.Schema.OpenAPIV3Schema, &fields)
		for _, f := range fields {
			out = append(out, v.Name+" "+f)
		}
	}
	return out
}

// missingFields appends the paths below path of the fields want has and have lacks.
func missingFields(path string, have, want *apiextensionsv1.JSONSchemaProps, out *[]string) {
	if have.XPreserveUnknownFields != nil && *have.XPreserveUnknownFields {
		return
	}
	for _, name := range slices.Sorted(maps.Keys(want.Properties)) {
		p := name
		if path != "" {
			p = path + "." + name
		}
		h, ok := have.Properties[name]
		if !ok {
			*out = append(*out, p)
			continue
		}
		w := want.Properties[name]
		missingFields(p, &h, &w, out)
	}
	if want.Items != nil && want.Items.Schema != nil {
		h := &apiextensionsv1.JSONSchemaProps{}
		if have.Items != nil && have.Items.Schema != nil {
			h = have.Items.Schema
		}
		missingFields(path+"[*]", h, want.Items.Schema, out)
	}
	if want.AdditionalProperties != nil && want.AdditionalProperties.Schema != nil {
		h := &apiextensionsv1.JSONSchemaProps{}
		if have.AdditionalProperties != nil && have.AdditionalProperties.Schema != nil {
			h = have.AdditionalProperties.Schema
		}
		missingFields(path+"[*]", h, want.AdditionalProperties.Schema, out)
	}
}
