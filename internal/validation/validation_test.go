package validation

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// fieldError is what the tests compare of a field.Error: its type and path, not its words.
type fieldError struct {
	Type  field.ErrorType
	Field string
}

func fieldErrors(errs field.ErrorList) []fieldError {
	var out []fieldError
	for _, e := range errs {
		out = append(out, fieldError{e.Type, e.Field})
	}
	return out
}

// notChecked is the error the API server adds when an error keeps it from running the
// CEL rules.
var notChecked = fieldError{field.ErrorTypeInvalid, "<nil>"}

// object decodes a YAML document as the API server decodes JSON: integers as int64.
func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	raw, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

func rolloutPolicy(spec string) string {
	return "apiVersion: holdfast.dev/v1alpha1\nkind: RolloutPolicy\nmetadata: {name: p}\nspec:\n" + spec
}

func disruptionPolicy(spec string) string {
	return "apiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {name: p}\nspec:\n" + spec
}

// validationCase is one policy and the errors ValidateObject finds in it. rule names the
// CEL rule it exercises ("<kind> <path>"), for TestEveryCELRuleHasCases.
type validationCase struct {
	rule string
	doc  string
	want []fieldError
}

var validationCases = map[string]validationCase{
	// RolloutPolicy spec.rules: at least one rule.
	"no rules": {rule: "RolloutPolicy spec.rules", doc: rolloutPolicy("  targets: {}\n  rules: {}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.rules"}}},
	"only concurrency is a rule": {rule: "RolloutPolicy spec.rules", doc: rolloutPolicy("  targets: {}\n  rules: {concurrency: {maxInFlight: 1}}\n")},
	"only sharedBudget is a rule": {rule: "RolloutPolicy spec.rules",
		doc: rolloutPolicy("  targets: {}\n  rules: {sharedBudget: {disruptionPolicy: agents}}\n")},
	"an empty argsMatchReplicas is no rule": {rule: "RolloutPolicy spec.rules", doc: rolloutPolicy("  targets: {}\n  rules: {argsMatchReplicas: []}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.rules"}}},

	// RolloutPolicy spec.rules.concurrency.maxInFlight: a positive count or a percentage.
	"maxInFlight 0": {rule: "RolloutPolicy spec.rules.concurrency.maxInFlight",
		doc:  rolloutPolicy("  targets: {}\n  rules: {concurrency: {maxInFlight: 0}}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.rules.concurrency.maxInFlight"}}},
	"maxInFlight in words": {rule: "RolloutPolicy spec.rules.concurrency.maxInFlight",
		doc:  rolloutPolicy("  targets: {}\n  rules: {concurrency: {maxInFlight: ten}}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.rules.concurrency.maxInFlight"}}},
	"maxInFlight 10%": {rule: "RolloutPolicy spec.rules.concurrency.maxInFlight",
		doc: rolloutPolicy("  targets: {}\n  rules: {concurrency: {maxInFlight: 10%}}\n")},

	// RolloutPolicy spec.rules.strategy.maxUnavailable: a non-negative count or a percentage.
	"strategy maxUnavailable -1": {rule: "RolloutPolicy spec.rules.strategy.maxUnavailable",
		doc:  rolloutPolicy("  targets: {}\n  rules: {strategy: {maxUnavailable: -1}}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.rules.strategy.maxUnavailable"}}},
	"strategy maxUnavailable 0": {rule: "RolloutPolicy spec.rules.strategy.maxUnavailable",
		doc: rolloutPolicy("  targets: {}\n  rules: {strategy: {maxUnavailable: 0}}\n")},

	// Both kinds' selectors: In and NotIn with values, Exists and DoesNotExist without.
	"rollout selector In without values": {rule: "RolloutPolicy spec.targets.selector",
		doc:  rolloutPolicy("  targets: {selector: {matchExpressions: [{key: app, operator: In}]}}\n  rules: {minInterval: 1m}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.selector"}}},
	"rollout selector Exists": {rule: "RolloutPolicy spec.targets.selector",
		doc: rolloutPolicy("  targets: {selector: {matchExpressions: [{key: app, operator: Exists}]}}\n  rules: {minInterval: 1m}\n")},
	"rollout namespaceSelector Exists with values": {rule: "RolloutPolicy spec.targets.namespaceSelector",
		doc:  rolloutPolicy("  targets: {namespaceSelector: {matchExpressions: [{key: team, operator: Exists, values: [a]}]}}\n  rules: {minInterval: 1m}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.namespaceSelector"}}},
	"rollout namespaceSelector NotIn with values": {rule: "RolloutPolicy spec.targets.namespaceSelector",
		doc: rolloutPolicy("  targets: {namespaceSelector: {matchExpressions: [{key: team, operator: NotIn, values: [a]}]}}\n  rules: {minInterval: 1m}\n")},
	"disruption selector operator Near": {rule: "DisruptionPolicy spec.targets.selector",
		doc:  disruptionPolicy("  targets: {selector: {matchExpressions: [{key: app, operator: Near, values: [a]}]}}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.selector"}}},
	"topologyBudget key with a space": {rule: "DisruptionPolicy spec.topologyBudget.key",
		doc:  disruptionPolicy("  targets: {}\n  topologyBudget: {key: 'topology zone'}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.topologyBudget.key"}}},
	"topologyBudget key a label key": {rule: "DisruptionPolicy spec.topologyBudget.key",
		doc: disruptionPolicy("  targets: {}\n  topologyBudget: {key: topology.kubernetes.io/zone, maxDisruptedDomains: 2}\n")},
	"disruption selector In with values": {rule: "DisruptionPolicy spec.targets.selector",
		doc: disruptionPolicy("  targets: {selector: {matchExpressions: [{key: app, operator: In, values: [a]}]}}\n")},
	"disruption namespaceSelector DoesNotExist with values": {rule: "DisruptionPolicy spec.targets.namespaceSelector",
		doc:  disruptionPolicy("  targets: {namespaceSelector: {matchExpressions: [{key: team, operator: DoesNotExist, values: [a]}]}}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.namespaceSelector"}}},
	"disruption namespaceSelector DoesNotExist": {rule: "DisruptionPolicy spec.targets.namespaceSelector",
		doc: disruptionPolicy("  targets: {namespaceSelector: {matchExpressions: [{key: team, operator: DoesNotExist}]}}\n")},

	// DisruptionPolicy spec.maxUnavailable: a non-negative count or a percentage.
	"disruption maxUnavailable half": {rule: "DisruptionPolicy spec.maxUnavailable", doc: disruptionPolicy("  targets: {}\n  maxUnavailable: half\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.maxUnavailable"}}},
	"disruption maxUnavailable 25%": {rule: "DisruptionPolicy spec.maxUnavailable", doc: disruptionPolicy("  targets: {}\n  maxUnavailable: 25%\n")},

	// DisruptionPolicy afterMaxHold Release needs a maxHold; a requester's deadline needs a clock.
	"disruption afterMaxHold Release without maxHold": {rule: "DisruptionPolicy spec.afterMaxHold",
		doc:  disruptionPolicy("  targets: {}\n  afterMaxHold: Release\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.afterMaxHold"}}},
	"disruption afterMaxHold Release after maxHold": {rule: "DisruptionPolicy spec.afterMaxHold",
		doc: disruptionPolicy("  targets: {}\n  maxHold: 30m\n  afterMaxHold: Release\n")},
	"disruption requester deadline without a clock": {rule: "DisruptionPolicy spec.requesters[0].deadline",
		doc:  disruptionPolicy("  targets: {}\n  requesters: [{users: [ca], deadline: {then: GiveUp}}]\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.requesters[0].deadline"}}},
	"disruption requester deadline nodeClaim": {rule: "DisruptionPolicy spec.requesters[0].deadline",
		doc: disruptionPolicy("  targets: {}\n  requesters: [{serviceAccounts: [kube-system/karpenter], deadline: {nodeClaim: true}}]\n")},

	// Fields the schema does not know, as strict field validation refuses them: nothing
	// else is checked.
	"a misspelt rule": {doc: rolloutPolicy("  mode: Enforse\n  targets: {}\n  rules: {setle: {}}\n"),
		want: []fieldError{{field.ErrorTypeForbidden, "spec.rules.setle"}}},
	"an unknown field in a list and in metadata": {
		doc:  "apiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {name: p, label: x}\nspec:\n  targets: {}\n  windows: [{schedule: '0 9 * * *', duration: 1h, action: Deny, zone: UTC}]\n",
		want: []fieldError{{field.ErrorTypeForbidden, "metadata.label"}, {field.ErrorTypeForbidden, "spec.windows[0].zone"}}},
	"an unknown field with a dot in its name": {doc: disruptionPolicy("  targets: {}\n  pdb: {generate: true, min.replicas: 2}\n"),
		want: []fieldError{{field.ErrorTypeForbidden, "spec.pdb.min.replicas"}}},

	// The schema: enums, patterns, required fields, lists; an error of a missing or
	// unsupported value keeps the API server from running the CEL rules.
	"a misspelt mode": {doc: rolloutPolicy("  mode: Enforse\n  targets: {}\n  rules: {minInterval: 1m}\n"),
		want: []fieldError{{field.ErrorTypeNotSupported, "spec.mode"}, notChecked}},
	"a kind holdfast does not guard": {doc: rolloutPolicy("  targets: {kinds: [ReplicaSet]}\n  rules: {minInterval: 1m}\n"),
		want: []fieldError{{field.ErrorTypeNotSupported, "spec.targets.kinds[0]"}, notChecked}},
	"a kind twice": {doc: rolloutPolicy("  targets: {kinds: [Deployment, Deployment]}\n  rules: {minInterval: 1m}\n"),
		want: []fieldError{{field.ErrorTypeDuplicate, "spec.targets.kinds[1]"}}},
	"a flag twice": {doc: rolloutPolicy("  targets: {}\n  rules: {argsMatchReplicas: [{container: c, flag: --n}, {container: c, flag: --n}]}\n"),
		want: []fieldError{{field.ErrorTypeDuplicate, "spec.rules.argsMatchReplicas[1]"}}},
	"a duration in words": {doc: rolloutPolicy("  targets: {}\n  rules: {minInterval: soon}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.rules.minInterval"}}},
	"a service account without its namespace": {doc: disruptionPolicy("  targets: {}\n  exemptions: {serviceAccounts: [kamaji]}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.exemptions.serviceAccounts[0]"}}},
	"no rules at all": {doc: rolloutPolicy("  targets: {}\n"),
		want: []fieldError{{field.ErrorTypeRequired, "spec.rules"}, notChecked}},
	"a window without an action": {doc: disruptionPolicy("  targets: {}\n  windows: [{schedule: '0 9 * * *', duration: 1h}]\n"),
		want: []fieldError{{field.ErrorTypeRequired, "spec.windows[0].action"}, notChecked}},
	"a count beyond int32": {doc: disruptionPolicy("  targets: {}\n  minReadySeconds: 10000000000\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "<nil>"}}},

	// Metadata, type and kind, as the API server checks them.
	"a name with capitals": {doc: "apiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {name: Agents}\nspec: {targets: {}}\n",
		want: []fieldError{{field.ErrorTypeInvalid, "metadata.name"}}},
	"no name": {doc: "apiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {}\nspec: {targets: {}}\n",
		want: []fieldError{{field.ErrorTypeRequired, "metadata.name"}, notChecked}},
	"a generated name":       {doc: "apiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {generateName: agents-}\nspec: {targets: {}}\n"},
	"a namespace is dropped": {doc: "apiVersion: holdfast.dev/v1alpha1\nkind: DisruptionPolicy\nmetadata: {name: p, namespace: kube-system}\nspec: {targets: {}}\n"},
	"another kind": {doc: "apiVersion: holdfast.dev/v1alpha1\nkind: FreezePolicy\nmetadata: {name: p}\nspec: {}\n",
		want: []fieldError{{field.ErrorTypeNotSupported, "kind"}}},
	"another version": {doc: "apiVersion: holdfast.dev/v1\nkind: RolloutPolicy\nmetadata: {name: p}\nspec: {}\n",
		want: []fieldError{{field.ErrorTypeNotSupported, "apiVersion"}}},

	// holdfast's own checks, as its policy webhook makes them.
	"a schedule that does not parse": {doc: disruptionPolicy("  targets: {}\n  windows: [{schedule: '0 25 * * *', duration: 1h, action: Deny}]\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.windows[0].schedule"}}},
	"an unknown time zone": {doc: rolloutPolicy("  targets: {}\n  rules: {minInterval: 1m}\n  windows: [{schedule: '0 9 * * *', duration: 1h, action: Deny, timeZone: Mars/Olympus}]\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.windows[0].timeZone"}}},
	"a window longer than its period": {doc: disruptionPolicy("  targets: {}\n  windows: [{schedule: '0 9 * * *', duration: 1h, action: Deny}, {schedule: '0 * * * *', duration: 2h, action: Allow}]\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.windows[1].duration"}}},
	"a valid window": {doc: rolloutPolicy("  targets: {}\n  rules: {minInterval: 1m}\n  windows: [{schedule: '0 9 * * 1-5', duration: 8h, action: Deny, timeZone: Europe/Berlin}]\n")},
	"a label value with a space": {doc: rolloutPolicy("  targets: {selector: {matchLabels: {app: kube apiserver}}}\n  rules: {minInterval: 1m}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.selector.matchLabels"}}},
	"a label key kube cannot parse": {doc: disruptionPolicy("  targets: {namespaceSelector: {matchLabels: {'bad key!': x}}}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.namespaceSelector.matchLabels"}}},
	"a requirement value kube cannot parse": {doc: disruptionPolicy("  targets: {selector: {matchExpressions: [{key: app, operator: In, values: ['a b']}]}}\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.selector.matchExpressions"}}},
	"a duration beyond holdfast's": {doc: disruptionPolicy("  targets: {}\n  cooldown: 99999999999999h\n"),
		want: []fieldError{{field.ErrorTypeInvalid, "spec.cooldown"}}},
}

// The selectors' label keys and values, both kinds, both selectors: each CEL rule
// refuses a key or value kube cannot parse, at the field it names.
func init() {
	for _, kind := range []string{"RolloutPolicy", "DisruptionPolicy"} {
		doc, rules := disruptionPolicy, ""
		if kind == "RolloutPolicy" {
			doc, rules = rolloutPolicy, "  rules: {minInterval: 1m}\n"
		}
		for _, sel := range []string{"namespaceSelector", "selector"} {
			at := "spec.targets." + sel
			for name, c := range map[string]struct {
				field, selector string
				refused         bool
			}{
				"a label key kube cannot parse":      {"matchLabels", `{matchLabels: {"-bad": x}}`, true},
				"a label value kube cannot parse":    {"matchLabels", `{matchLabels: {app: "a b"}}`, true},
				"prefixed keys and an empty value":   {"matchLabels", `{matchLabels: {"example.com/tier": cp, e: ""}}`, false},
				"a requirement key with two slashes": {"matchExpressions", `{matchExpressions: [{key: "a/b/c", operator: Exists}]}`, true},
				"a requirement value with a space":   {"matchExpressions", `{matchExpressions: [{key: app, operator: In, values: [ok, "a b"]}]}`, true},
				"a requirement naming namespaces":    {"matchExpressions", `{matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]}`, false},
			} {
				vc := validationCase{rule: kind + " " + at + "." + c.field, doc: doc("  targets: {" + sel + ": " + c.selector + "}\n" + rules)}
				if c.refused {
					vc.want = []fieldError{{field.ErrorTypeInvalid, at + "." + c.field}}
				}
				validationCases[kind+" "+sel+": "+name] = vc
			}
		}
	}
}

func TestValidateObject(t *testing.T) {
	for name, c := range validationCases {
		t.Run(name, func(t *testing.T) {
			got := fieldErrors(ValidateObject(object(t, c.doc)))
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEveryCELRuleHasCases: every x-kubernetes-validations rule of the CRDs has a case
// above that it refuses, at its field, and one it accepts.
func TestEveryCELRuleHasCases(t *testing.T) {
	all, err := schemas()
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for gvk, s := range all {
		walkRules(s.structural, nil, func(at *field.Path) { rules[gvk.Kind+" "+at.String()] = true })
	}
	if len(rules) == 0 {
		t.Fatal("found no CEL rules in the CRDs")
	}
	refused, accepted := map[string]bool{}, map[string]bool{}
	for name, c := range validationCases {
		if c.rule == "" {
			continue
		}
		if !rules[c.rule] {
			t.Errorf("case %q names the rule %q, which the CRDs do not have", name, c.rule)
		}
		kind, path, _ := strings.Cut(c.rule, " ")
		for _, e := range c.want {
			if strings.Contains(c.doc, "kind: "+kind) && e.Field == path {
				refused[c.rule] = true
			}
		}
		accepted[c.rule] = accepted[c.rule] || len(c.want) == 0
	}
	for r := range rules {
		if !refused[r] || !accepted[r] {
			t.Errorf("the CEL rule at %s has a refusing case: %t, an accepting case: %t; want both", r, refused[r], accepted[r])
		}
	}
}

// walkRules calls f with the field of every CEL rule in s; list items are at index 0.
func walkRules(s *structuralschema.Structural, at *field.Path, f func(*field.Path)) {
	if s == nil {
		return
	}
	for _, r := range s.XValidations {
		// A rule is named by the field its errors are at: the schema's and its fieldPath.
		if r.FieldPath == "" {
			f(at)
		} else {
			f(childPath(at, strings.TrimPrefix(r.FieldPath, ".")))
		}
	}
	for name, p := range s.Properties {
		walkRules(&p, childPath(at, name), f)
	}
	if s.Items != nil {
		walkRules(s.Items, at.Index(0), f)
	}
	if s.AdditionalProperties != nil {
		walkRules(s.AdditionalProperties.Structural, at.Key("*"), f)
	}
}

// TestDefaultsAreApplied: the policy is what the API server would store, defaults
// included, and its status dropped.
func TestDefaultsAreApplied(t *testing.T) {
	u := object(t, disruptionPolicy("  targets: {}\n  pdb: {generate: true}\nstatus: {pdbsManaged: 3}\n"))
	p, errs := Admit(u)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	want := v1alpha1.DisruptionPolicySpec{
		Mode:                       v1alpha1.ModeEnforce,
		MaxUnavailable:             ptr.To(intstr.FromInt32(1)),
		UnhealthyPodEvictionPolicy: ptr.To(policyv1.AlwaysAllow),
		PDB:                        &v1alpha1.PDBGeneration{Generate: true, MinReplicas: ptr.To[int32](2)},
	}
	dp, ok := p.(*v1alpha1.DisruptionPolicy)
	if !ok {
		t.Fatalf("Admit = %T, want a *DisruptionPolicy", p)
	}
	if diff := cmp.Diff(want, dp.Spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if _, has := u.Object["status"]; has || dp.Status.PDBsManaged != 0 {
		t.Errorf("the status was kept: %v", u.Object["status"])
	}
	if mode, _, _ := unstructured.NestedString(u.Object, "spec", "mode"); mode != "Enforce" {
		t.Errorf("u's spec.mode = %q, want the default applied into u", mode)
	}

	rp, errs := Admit(object(t, rolloutPolicy("  targets: {}\n  rules: {settle: {}}\n")))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	if got := rp.(*v1alpha1.RolloutPolicy).Spec; got.Mode != v1alpha1.ModeEnforce || got.Rules.Settle.StallAfter == nil || got.Rules.Settle.StallAfter.Duration != 10*time.Minute {
		t.Errorf("spec = %+v, want mode Enforce and settle.stallAfter 10m", got)
	}
}

// TestTypedValidators: the typed validators validate what a client would send of the
// policy, and leave it as it was.
func TestTypedValidators(t *testing.T) {
	valid := utiltesting.MakeRolloutPolicy("konnectivity-server-count").ArgMatchesReplicas("konnectivity-server", "--server-count")
	for name, c := range map[string]struct {
		p    *v1alpha1.RolloutPolicy
		want []fieldError
	}{
		"valid":            {p: valid.Clone().Obj()},
		"without TypeMeta": {p: func() *v1alpha1.RolloutPolicy { p := valid.Clone().Obj(); p.TypeMeta = metav1.TypeMeta{}; return p }()},
		"only concurrency": {p: func() *v1alpha1.RolloutPolicy {
			p := utiltesting.MakeRolloutPolicy("fleet").Obj()
			p.Spec.Rules.Concurrency = &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromString("10%")}
			return p
		}()},
		"no rules":   {p: utiltesting.MakeRolloutPolicy("empty").Obj(), want: []fieldError{{field.ErrorTypeInvalid, "spec.rules"}}},
		"a bad mode": {p: valid.Clone().Mode("Enforse").Obj(), want: []fieldError{{field.ErrorTypeNotSupported, "spec.mode"}, notChecked}},
		"a window without a duration": {p: func() *v1alpha1.RolloutPolicy {
			p := valid.Clone().Obj()
			p.Spec.Windows = []v1alpha1.Window{{Schedule: "0 9 * * *", Action: v1alpha1.WindowDeny}}
			return p
		}(), want: []fieldError{{field.ErrorTypeInvalid, "spec.windows[0].duration"}}},
		"a temporary exemption without its expiry": {p: func() *v1alpha1.RolloutPolicy {
			p := valid.Clone().Obj()
			p.Spec.Exemptions.Temporary = []v1alpha1.TemporaryExemption{{Users: []string{"alice"}, Reason: "INC-1"}}
			return p
		}(), want: []fieldError{{field.ErrorTypeRequired, "spec.exemptions.temporary[0].expires"}, notChecked}},
	} {
		t.Run(name, func(t *testing.T) {
			before := c.p.DeepCopy()
			got := fieldErrors(ValidateRolloutPolicy(c.p))
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, c.p); diff != "" {
				t.Errorf("the policy changed (-before +after):\n%s", diff)
			}
		})
	}

	dp := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromString("25%")), Requesters: []v1alpha1.Requester{
			{Users: []string{"cluster-autoscaler"}, MaxUnavailable: ptr.To(intstr.FromString("all"))}}}}
	want := []fieldError{{field.ErrorTypeInvalid, "spec.requesters[0].maxUnavailable"}}
	if diff := cmp.Diff(want, fieldErrors(ValidateDisruptionPolicy(dp))); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
	dp.Spec.Requesters[0].MaxUnavailable = ptr.To(intstr.FromString("10%"))
	if errs := ValidateDisruptionPolicy(dp); len(errs) > 0 {
		t.Errorf("a valid DisruptionPolicy: %v", errs)
	}
}

// TestEvaluable is what the policy webhook checks of what the API server admitted.
func TestEvaluable(t *testing.T) {
	for name, c := range map[string]struct {
		doc  string
		want []fieldError
	}{
		"valid":           {doc: disruptionPolicy("  targets: {selector: {matchLabels: {app: agent}}}\n")},
		"a bad selector":  {doc: disruptionPolicy("  targets: {selector: {matchLabels: {app: a b}}}\n"), want: []fieldError{{field.ErrorTypeInvalid, "spec.targets.selector.matchLabels"}}},
		"two bad windows": {doc: disruptionPolicy("  targets: {}\n  windows: [{schedule: '0 25 * * *', duration: 1h, action: Deny, timeZone: Mars/Olympus}]\n"), want: []fieldError{{field.ErrorTypeInvalid, "spec.windows[0].timeZone"}, {field.ErrorTypeInvalid, "spec.windows[0].schedule"}}},
		"a number beyond int32": {doc: disruptionPolicy("  targets: {}\n  pdb: {generate: true, minReplicas: 10000000000}\n"),
			want: []fieldError{{field.ErrorTypeInvalid, "spec.pdb.minReplicas"}}},
		// kube refuses a PDB of such a percentage: the generated floor could never be kept.
		"a budget over 100%": {doc: disruptionPolicy("  targets: {}\n  maxUnavailable: 150%\n"),
			want: []fieldError{{field.ErrorTypeInvalid, "spec.maxUnavailable"}}},
		"a budget of 100%": {doc: disruptionPolicy("  targets: {}\n  maxUnavailable: 100%\n")},
	} {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, fieldErrors(ValidateEvaluable(object(t, c.doc)))); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEmbeddedCRDsAreConfigs: the CRDs compiled here are config/'s, byte for byte.
func TestEmbeddedCRDsAreConfigs(t *testing.T) {
	configs, err := filepath.Glob(filepath.Join("..", "..", "config", "crd", "bases", "*.yaml"))
	if err != nil || len(configs) == 0 {
		t.Fatalf("config/crd/bases: %v %v", configs, err)
	}
	embedded, err := crdFiles.ReadDir("crds")
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) != len(configs) {
		t.Errorf("%d embedded CRDs, %d in config/crd/bases: run make manifests", len(embedded), len(configs))
	}
	for _, f := range configs {
		want, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := crdFiles.ReadFile("crds/" + filepath.Base(f))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("crds/%s is not %s (%v): run make manifests", filepath.Base(f), f, err)
		}
	}
}

// TestCRDsAreAcceptedByTheAPIServer: the CRDs pass the API server's own validation of a
// CRD (apiextensions' ValidateCustomResourceDefinition), the CEL rules' estimated cost
// within its budget included, so an install or upgrade never fails on them.
func TestCRDsAreAcceptedByTheAPIServer(t *testing.T) {
	files, err := crdFiles.ReadDir("crds")
	if err != nil || len(files) == 0 {
		t.Fatalf("no embedded CRDs: %v", err)
	}
	for _, f := range files {
		raw, err := crdFiles.ReadFile("crds/" + f.Name())
		if err != nil {
			t.Fatal(err)
		}
		var v1 apiextensionsv1.CustomResourceDefinition
		if err := yaml.UnmarshalStrict(raw, &v1); err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		var crd apiextensions.CustomResourceDefinition
		if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&v1, &crd, nil); err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		// The API server records the storage version on create (its strategy's PrepareForCreate).
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				crd.Status.StoredVersions = append(crd.Status.StoredVersions, v.Name)
			}
		}
		if errs := apiextensionsvalidation.ValidateCustomResourceDefinition(context.Background(), &crd); len(errs) > 0 {
			t.Errorf("%s: the API server would refuse it: %v", f.Name(), errs.ToAggregate())
		}
	}
}
