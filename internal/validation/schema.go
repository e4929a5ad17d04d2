package validation

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/api/operation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/features"
	"k8s.io/apiserver/pkg/storage/names"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"sigs.k8s.io/yaml"
)

// crdFiles are copies of config/crd/bases that `make manifests` writes (go:embed cannot
// reach config/ from here); `make verify` and TestEmbeddedCRDsAreConfigs fail when they
// differ.
//
//go:embed crds/*.yaml
var crdFiles embed.FS

// served is what the API server builds from a CRD to serve one version of its kind, built
// as the API server builds it (customresource_handler.go): the structural schema with its
// defaults pruned, for pruning, defaulting and the CEL rules, and the OpenAPI validator.
type served struct {
	gvk        schema.GroupVersionKind
	namespaced bool
	structural *structuralschema.Structural
	schema     apiservervalidation.SchemaValidator
	cel        *cel.Validator
}

// schemas are the CRDs' served versions by kind, compiled once per process: what they
// hold is built from the embedded files and never written.
var schemas = sync.OnceValues(func() (map[schema.GroupVersionKind]*served, error) {
	return compile(crdFiles)
})

// compile builds every served version of the CRDs in files.
func compile(files fs.FS) (map[schema.GroupVersionKind]*served, error) {
	paths, err := fs.Glob(files, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	out := map[schema.GroupVersionKind]*served{}
	for _, p := range paths {
		raw, err := fs.ReadFile(files, p)
		if err != nil {
			return nil, err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served || v.Schema == nil {
				continue
			}
			s, err := compileVersion(v.Schema)
			if err != nil {
				return nil, fmt.Errorf("%s, version %s: %w", p, v.Name, err)
			}
			s.gvk = schema.GroupVersionKind{Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind}
			s.namespaced = crd.Spec.Scope == apiextensionsv1.NamespaceScoped
			out[s.gvk] = s
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRD in %v", paths)
	}
	return out, nil
}

func compileVersion(v *apiextensionsv1.CustomResourceValidation) (*served, error) {
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v, internal, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	s = s.DeepCopy()
	if err := structuraldefaulting.PruneDefaults(s); err != nil {
		return nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	return &served{structural: s, schema: validator, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}, nil
}

// servedFor is the served version of u's kind; the errors are the API server's for an
// apiVersion or kind it does not serve.
func servedFor(u *unstructured.Unstructured) (*served, field.ErrorList) {
	all, err := schemas()
	if err != nil {
		return nil, field.ErrorList{field.InternalError(nil, err)}
	}
	gvk := u.GroupVersionKind()
	if s := all[gvk]; s != nil {
		return s, nil
	}
	var kinds, versions []string
	knownKind := false
	for k := range all {
		kinds = append(kinds, k.Kind)
		versions = append(versions, k.GroupVersion().String())
		knownKind = knownKind || k.Kind == gvk.Kind
	}
	if knownKind {
		return nil, field.ErrorList{field.NotSupported(field.NewPath("apiVersion"), u.GetAPIVersion(), slices.Compact(slices.Sorted(slices.Values(versions))))}
	}
	return nil, field.ErrorList{field.NotSupported(field.NewPath("kind"), u.GetKind(), slices.Sorted(slices.Values(kinds)))}
}

// decode does to u what the API server's decoder does to a custom resource it reads from
// a create request with strict field validation (kubectl's default): the object's metadata
// is coerced, fields the schema does not know are pruned, nulls the schema does not allow
// are dropped, then defaults are applied. An unknown field is an error (the API server
// answers 400 and validates nothing more), reported at its path.
func (s *served) decode(u *unstructured.Unstructured) field.ErrorList {
	kind, apiVersion := u.GetKind(), u.GetAPIVersion()
	meta, hasMeta, unknown, err := objectmeta.GetObjectMetaWithOptions(u.Object, objectmeta.ObjectMetaOptions{ReturnUnknownFieldPaths: true})
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata"), u.Object["metadata"], err.Error())}
	}
	unknown = append(unknown, pruning.PruneWithOptions(u.Object, s.structural, true,
		structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})...)
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(u.Object, s.structural)
	ferr, paths := objectmeta.CoerceWithOptions(nil, u.Object, s.structural, false, objectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
	if ferr != nil {
		return field.ErrorList{ferr}
	}
	unknown = append(unknown, paths...)
	u.SetKind(kind)
	u.SetAPIVersion(apiVersion)
	if hasMeta {
		if err := objectmeta.SetObjectMeta(u.Object, meta); err != nil {
			return field.ErrorList{field.Invalid(field.NewPath("metadata"), u.Object["metadata"], err.Error())}
		}
	}
	if len(unknown) > 0 {
		var errs field.ErrorList
		for _, p := range unknown {
			errs = append(errs, unknownField(s.structural, p))
		}
		return errs
	}
	structuraldefaulting.Default(u.Object, s.structural)
	return nil
}

// prepareForCreate does to u what the API server does before it validates a create: a
// cluster-scoped object's namespace is cleared, a name is generated from generateName,
// and the status is dropped (the status subresource alone writes it).
func (s *served) prepareForCreate(u *unstructured.Unstructured) {
	if !s.namespaced {
		u.SetNamespace("")
	}
	if u.GetName() == "" && u.GetGenerateName() != "" {
		u.SetName(names.SimpleNameGenerator.GenerateName(u.GetGenerateName()))
	}
	delete(u.Object, "status")
}

// validate is the API server's validation of a custom resource on create (the CRD
// strategy's Validate, then the common metadata checks), in its order: type and object
// metadata, the OpenAPI schema, list sets and maps, then the CEL rules, which the API
// server skips (saying so in one more error) when an error makes them unreliable.
func (s *served) validate(ctx context.Context, u *unstructured.Unstructured) field.ErrorList {
	meta, hasMeta, err := objectmeta.GetObjectMeta(u.Object, false)
	if err != nil {
		return field.ErrorList{field.Invalid(field.NewPath("metadata"), u.Object["metadata"], err.Error())}
	}
	if !hasMeta {
		meta = &metav1.ObjectMeta{}
	}
	errs := apimachineryvalidation.ValidateObjectMetaDeclaratively(ctx, operation.Create, meta, nil, s.namespaced,
		apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"), utilfeature.DefaultFeatureGate.Enabled(features.DeclarativeValidationBeta))
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, u.Object, s.schema)...)
	errs = append(errs, objectmeta.Validate(ctx, nil, u.Object, s.structural, false)...)
	errs = append(errs, listtype.ValidateListSetsAndMaps(nil, s.structural, u.Object)...)
	if blocking(errs) {
		errs = append(errs, field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"))
	} else {
		celErrs, _ := s.cel.Validate(ctx, nil, s.structural, u.Object, nil, celconfig.RuntimeCELCostBudget)
		errs = append(errs, celErrs...)
	}
	if len(errs) == 0 {
		errs = apimachineryvalidation.ValidateObjectMetaAccessor(meta, s.namespaced, path.ValidatePathSegmentName, field.NewPath("metadata"))
	}
	return errs
}

// blocking says whether errs hold an error after which the API server does not evaluate
// the CEL rules (customresource.hasBlockingErr): a missing, unsupported, too long, too
// many or mistyped value.
func blocking(errs field.ErrorList) bool {
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return true
		}
	}
	return false
}

// unknownField is the error of a field pruning found unknown, p as pruning writes it
// ("spec.windows[0].nmae"). The known prefix is read along the schema, so that an unknown
// name with a dot in it stays one name.
func unknownField(s *structuralschema.Structural, p string) *field.Error {
	at := (*field.Path)(nil)
	rest := p
	for rest != "" && s != nil {
		if strings.HasPrefix(rest, "[") {
			end := strings.Index(rest, "]")
			if end < 0 || s.Items == nil {
				break
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil {
				break
			}
			at, s, rest = at.Index(i), s.Items, strings.TrimPrefix(rest[end+1:], ".")
			continue
		}
		name := rest[:strings.IndexAny(rest+".", ".[")]
		prop, ok := s.Properties[name]
		if !ok {
			break
		}
		at, s, rest = childPath(at, name), &prop, strings.TrimPrefix(rest[len(name):], ".")
	}
	detail := "unknown field"
	if s != nil && len(s.Properties) > 0 {
		detail += "; the fields here are " + strings.Join(slices.Sorted(maps.Keys(s.Properties)), ", ")
	}
	return field.Forbidden(childPath(at, rest), detail)
}

func childPath(at *field.Path, name string) *field.Path {
	if at == nil {
		return field.NewPath(name)
	}
	return at.Child(name)
}
