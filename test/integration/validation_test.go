//go:build integration

package integration

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/hack/crds"
	"github.com/holdfast-dev/holdfast/internal/manifests"
	"github.com/holdfast-dev/holdfast/internal/validation"
)

// The labels of a corpus case: what it exercises ("cel:<path>" for a CEL rule,
// "schema:", "webhook:", "unknown-field:", "metadata:" and a path otherwise) and what the
// API server, with holdfast's policy webhook, answers ("accept" or "refuse").
const (
	exercisesLabel = "validation.test.holdfast.dev/exercises"
	wantLabel      = "validation.test.holdfast.dev/want"
)

// celRule is one x-kubernetes-validations rule of a CRD, at the path of the schema that
// holds it (list items as [*]).
type celRule struct {
	kind, path, rule, message string
}

// listItem is a list index in a field path.
var listItem = regexp.MustCompile(`\[[0-9]+\]`)

func (r celRule) String() string { return r.kind + " " + r.path }

// corpusCase is one policy of the corpus.
type corpusCase struct {
	source    string
	object    *unstructured.Unstructured
	exercises string
	want      string
}

// answer is a verdict and, for a refusal, the fields it names (sorted) and the causes'
// messages.
type answer struct {
	refused  bool
	fields   []string
	messages []string
}

// TestValidationAgreesWithTheAPIServer holds internal/validation to the real API server
// with holdfast's policy webhook: every policy of the corpus (testdata/validation and the
// sample policies) is created with a server-side dry run and strict field validation, as
// kubectl creates, and validated offline; both must accept it, or both refuse it at the
// same fields, and as the case's label says. Every CEL rule of the CRDs must have a case
// the API server refuses by that rule, and one it accepts.
func TestValidationAgreesWithTheAPIServer(t *testing.T) {
	rules := crdRules(t)
	cases := readCorpus(t)
	refusedBy, acceptedFor := map[string]bool{}, map[string]bool{}
	for _, c := range cases {
		t.Run(c.source+" "+c.object.GetName()+c.object.GetGenerateName(), func(t *testing.T) {
			server := serverAnswer(t, c.object.DeepCopy())
			offline := offlineAnswer(c.object.DeepCopy())
			if server.refused != offline.refused {
				t.Fatalf("the API server refused: %t %v; internal/validation refused: %t %v", server.refused, server.messages, offline.refused, offline.messages)
			}
			if server.refused && !slices.Equal(server.fields, offline.fields) {
				t.Errorf("refused at different fields: API server %q (%v), internal/validation %q (%v)", server.fields, server.messages, offline.fields, offline.messages)
			}
			if (c.want == "refuse") != server.refused {
				t.Fatalf("labelled %s, but the API server refused: %t %v", c.want, server.refused, server.messages)
			}
			what, at, _ := strings.Cut(c.exercises, ":")
			if server.refused && !slices.Contains(server.fields, at) {
				t.Errorf("labelled with %s, but refused at %q", c.exercises, server.fields)
			}
			if what != "cel" {
				return
			}
			// A rule under a list is keyed by its schema path (items as [*]); the API server
			// reports the item it refused ([0]).
			rule, ok := rules[c.object.GetKind()+" "+listItem.ReplaceAllString(at, "[*]")]
			if !ok {
				t.Fatalf("labelled with the CEL rule %s %s, which the CRDs do not have", c.object.GetKind(), at)
			}
			if !server.refused {
				acceptedFor[rule.String()] = true
				return
			}
			for i, f := range server.fields {
				if listItem.ReplaceAllString(f, "[*]") == rule.path && strings.Contains(server.messages[i], rule.message) {
					refusedBy[rule.String()] = true
				}
			}
			if !refusedBy[rule.String()] {
				t.Errorf("labelled with %s, but not refused by it (%q): %v", rule, rule.message, server.messages)
			}
		})
	}
	t.Run("every CEL rule has a refusing and an accepting case", func(t *testing.T) {
		var names []string
		for name := range rules {
			names = append(names, name)
		}
		sort.Strings(names)
		t.Logf("%d CEL rules in the CRDs, %d corpus cases", len(names), len(cases))
		for _, name := range names {
			if !refusedBy[name] {
				t.Errorf("no case in testdata/validation is refused by the CEL rule %s (%s): add one", name, rules[name].rule)
			}
			if !acceptedFor[name] {
				t.Errorf("no case in testdata/validation labelled with the CEL rule %s is accepted: add one", name)
			}
		}
	})
}

// serverAnswer creates obj with a server-side dry run and strict field validation.
func serverAnswer(t *testing.T, obj *unstructured.Unstructured) answer {
	t.Helper()
	err := k8s.Create(context.Background(), obj, client.DryRunAll, client.FieldValidation(metav1.FieldValidationStrict))
	if err == nil {
		return answer{}
	}
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		t.Fatalf("creating: %v", err)
	}
	st := status.Status()
	a := answer{refused: true}
	switch {
	case st.Code == 422 && st.Details != nil:
		for _, c := range st.Details.Causes {
			a.fields = append(a.fields, c.Field)
			a.messages = append(a.messages, c.Message)
		}
	case apierrors.IsBadRequest(err) && strings.Contains(st.Message, "strict decoding error"):
		// The API server names unknown fields in the message only.
		for _, m := range unknownFieldMessage.FindAllStringSubmatch(st.Message, -1) {
			a.fields = append(a.fields, m[1])
			a.messages = append(a.messages, m[0])
		}
	default:
		t.Fatalf("creating: %v (%+v): want 422 with causes, or 400 naming unknown fields", err, st)
	}
	return a.sorted()
}

var unknownFieldMessage = regexp.MustCompile(`unknown field "([^"]+)"`)

func offlineAnswer(obj *unstructured.Unstructured) answer {
	errs := validation.ValidateObject(obj)
	a := answer{refused: len(errs) > 0}
	for _, e := range errs {
		a.fields = append(a.fields, e.Field)
		a.messages = append(a.messages, e.Error())
	}
	return a.sorted()
}

// sorted orders the fields, keeping each message with its field.
func (a answer) sorted() answer {
	idx := make([]int, len(a.fields))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return a.fields[idx[i]] < a.fields[idx[j]] })
	out := answer{refused: a.refused}
	for _, i := range idx {
		out.fields = append(out.fields, a.fields[i])
		out.messages = append(out.messages, a.messages[i])
	}
	return out
}

// crdRules walks the CRDs the API server serves (config/crd/bases, as the suite installs
// them) for their CEL rules, by "<kind> <path>".
func crdRules(t *testing.T) map[string]celRule {
	t.Helper()
	files, err := crds.Read(filepath.Join("..", "..", crds.Dir))
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]celRule{}
	for _, f := range files {
		crd := f.CRD
		for _, v := range crd.Spec.Versions {
			if v.Schema == nil {
				continue
			}
			walkSchema(v.Schema.OpenAPIV3Schema, "", func(path string, s *apiextensionsv1.JSONSchemaProps) {
				for _, r := range s.XValidations {
					// A rule is named by the field its errors are at: the schema's path and
					// the rule's fieldPath.
					rule := celRule{kind: crd.Spec.Names.Kind, path: path + r.FieldPath, rule: r.Rule, message: r.Message}
					if rule.message == "" {
						rule.message = "failed rule: " + r.Rule
					}
					if _, twice := rules[rule.String()]; twice {
						// Two rules at one field would need labels that tell them apart.
						t.Fatalf("%s: two rules at %s: the corpus labels name a rule by its field", f.Path, rule.path)
					}
					rules[rule.String()] = rule
				}
			})
		}
	}
	if len(rules) == 0 {
		t.Fatal("found no CEL rules in the CRDs")
	}
	return rules
}

// walkSchema calls f with every schema in s and its path ("" for the root).
func walkSchema(s *apiextensionsv1.JSONSchemaProps, path string, f func(string, *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	f(path, s)
	join := func(name string) string {
		if path == "" {
			return name
		}
		return path + "." + name
	}
	for name, p := range s.Properties {
		walkSchema(&p, join(name), f)
	}
	if s.Items != nil {
		walkSchema(s.Items.Schema, path+"[*]", f)
		for i := range s.Items.JSONSchemas {
			walkSchema(&s.Items.JSONSchemas[i], path+"[*]", f)
		}
	}
	if s.AdditionalProperties != nil {
		walkSchema(s.AdditionalProperties.Schema, path+"[*]", f)
	}
	for _, group := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range group {
			walkSchema(&group[i], path, f)
		}
	}
	walkSchema(s.Not, path, f)
}

// readCorpus reads testdata/validation and the sample policies (which must be accepted).
func readCorpus(t *testing.T) []corpusCase {
	t.Helper()
	samples, err := filepath.Glob(filepath.Join("..", "..", "config", "samples", "*policy_*.yaml"))
	if err != nil || len(samples) == 0 {
		t.Fatalf("config/samples: %v %v", samples, err)
	}
	var cases []corpusCase
	err = manifests.Each(append([]string{filepath.Join("testdata", "validation")}, samples...), nil, func(source string, raw []byte) error {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		c := corpusCase{source: filepath.Base(source), object: u, exercises: u.GetAnnotations()[exercisesLabel], want: u.GetAnnotations()[wantLabel]}
		if slices.Contains(samples, strings.Split(source, ",")[0]) {
			c.exercises, c.want = "sample:", "accept"
		}
		if c.exercises == "" || (c.want != "accept" && c.want != "refuse") {
			return fmt.Errorf("%s: label the case with %s and %s (accept or refuse)", source, exercisesLabel, wantLabel)
		}
		cases = append(cases, c)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return cases
}
