package validation

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
)

// TestMissingFields compares an installed CRD with the embedded one as the start-up check
// does: what the installed schema would prune is reported, by version and path; what it
// keeps (the same field, a field only it has, a subtree it preserves) is not.
func TestMissingFields(t *testing.T) {
	crds, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	var want *apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Name == "disruptionpolicies.holdfast.dev" {
			want = c
		}
	}
	if want == nil || len(crds) != 2 {
		t.Fatalf("embedded CRDs %d, want both, with disruptionpolicies.holdfast.dev", len(crds))
	}
	spec := func(s *apiextensionsv1.JSONSchemaProps) *apiextensionsv1.JSONSchemaProps {
		p := s.Properties["spec"]
		return &p
	}
	// edit returns a copy of want with f applied to its v1alpha1 schema's spec.
	edit := func(f func(spec *apiextensionsv1.JSONSchemaProps)) *apiextensionsv1.CustomResourceDefinition {
		c := want.DeepCopy()
		root := c.Spec.Versions[0].Schema.OpenAPIV3Schema
		s := spec(root)
		f(s)
		root.Properties["spec"] = *s
		return c
	}
	for _, tc := range []struct {
		name      string
		installed *apiextensionsv1.CustomResourceDefinition
		want      []string
	}{
		{"the same", want.DeepCopy(), nil},
		{"a spec field", edit(func(s *apiextensionsv1.JSONSchemaProps) { delete(s.Properties, "maxHold") }), []string{"v1alpha1 spec.maxHold"}},
		{"a field of a list's items", edit(func(s *apiextensionsv1.JSONSchemaProps) {
			r := s.Properties["requesters"]
			delete(r.Items.Schema.Properties, "cooldown")
			s.Properties["requesters"] = r
		}), []string{"v1alpha1 spec.requesters[*].cooldown"}},
		{"a list without an item schema", edit(func(s *apiextensionsv1.JSONSchemaProps) {
			r := s.Properties["requesters"]
			r.Items = nil
			s.Properties["requesters"] = r
		}), func() []string {
			var out []string
			for _, f := range []string{"cooldown", "deadline", "groups", "maxUnavailable", "serviceAccounts", "users"} {
				out = append(out, "v1alpha1 spec.requesters[*]."+f)
			}
			return out
		}()},
		{"two fields, in order", edit(func(s *apiextensionsv1.JSONSchemaProps) {
			delete(s.Properties, "windows")
			delete(s.Properties, "cooldown")
		}), []string{"v1alpha1 spec.cooldown", "v1alpha1 spec.windows"}},
		{"a field only the installed CRD has", edit(func(s *apiextensionsv1.JSONSchemaProps) {
			s.Properties["retired"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}), nil},
		{"a subtree the installed CRD preserves", edit(func(s *apiextensionsv1.JSONSchemaProps) {
			*s = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
		}), nil},
		{"a version not served", func() *apiextensionsv1.CustomResourceDefinition {
			c := want.DeepCopy()
			c.Spec.Versions[0].Name = "v1alpha0"
			return c
		}(), []string{"v1alpha1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MissingFields(tc.installed, want)); diff != "" {
				t.Errorf("missing (-want +got):\n%s", diff)
			}
		})
	}
}
