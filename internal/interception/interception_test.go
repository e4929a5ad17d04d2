package interception

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/cel-go/cel"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

var settings = Settings{
	Namespace: "holdfast-system",
	Client: admissionregistrationv1.WebhookClientConfig{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: "holdfast-system", Name: "holdfast-webhook", Path: ptr.To("/validate-policy")},
		CABundle: []byte("ca")},
	Rollout:  Defaults{FailurePolicy: admissionregistrationv1.Ignore, TimeoutSeconds: 3},
	Eviction: Defaults{FailurePolicy: admissionregistrationv1.Fail, TimeoutSeconds: 5},
}

func rolloutPolicy(name string, mut func(*v1alpha1.RolloutPolicySpec)) v1alpha1.RolloutPolicy {
	p := v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "true"}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": "kube-apiserver"}}},
		Rules: v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}}}}
	if mut != nil {
		mut(&p.Spec)
	}
	return p
}

func names(ws []admissionregistrationv1.ValidatingWebhook) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

func byType(ws []admissionregistrationv1.ValidatingWebhook, typ string) []admissionregistrationv1.ValidatingWebhook {
	return slices.DeleteFunc(slices.Clone(ws), func(w admissionregistrationv1.ValidatingWebhook) bool { return !strings.HasSuffix(w.Name, "."+typ) })
}

func TestNoPolicyNoEntry(t *testing.T) {
	ws, outcomes := Entries(nil, nil, settings)
	if len(ws) != 0 || len(outcomes) != 0 {
		t.Errorf("with no policy: %+v, %+v", ws, outcomes)
	}
	suspended := rolloutPolicy("off", func(s *v1alpha1.RolloutPolicySpec) { s.Suspend = true })
	if ws, _ := Entries([]v1alpha1.RolloutPolicy{suspended}, nil, settings); len(ws) != 0 {
		t.Errorf("a suspended policy has entries: %+v", ws)
	}
}

func TestRolloutEntrySelectsWhatThePolicySelects(t *testing.T) {
	p := rolloutPolicy("hosted-control-planes", func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}
	})
	all, outcomes := Entries([]v1alpha1.RolloutPolicy{p}, nil, settings)
	if len(byType(all, TypeNamespace)) != 1 {
		t.Errorf("want the namespace relabel entry of a policy with a namespaceSelector: %+v", all)
	}
	ws := byType(all, TypeRollout)
	if len(ws) != 1 || len(byType(all, TypeScale)) != 0 {
		t.Fatalf("want one workload entry (no rule reads the replicas, so no scale entry), got %+v", all)
	}
	w := ws[0]
	if !strings.HasPrefix(w.Name, "hosted-control-planes-") || !strings.HasSuffix(w.Name, "."+TypeRollout) {
		t.Errorf("name %q", w.Name)
	}
	if errs := validation.IsDNS1123Subdomain(w.Name); len(errs) > 0 {
		t.Errorf("name %q: %v", w.Name, errs)
	}
	if got := w.Rules[0].Resources; !slices.Equal(got, []string{"deployments"}) {
		t.Errorf("resources %v, want the policy's kinds", got)
	}
	if w.ObjectSelector.MatchLabels["app"] != "kube-apiserver" {
		t.Errorf("objectSelector %+v", w.ObjectSelector)
	}
	if w.NamespaceSelector.MatchLabels["tenant"] != "true" || !slices.ContainsFunc(w.NamespaceSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
		return r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpNotIn && slices.Equal(r.Values, []string{"holdfast-system"})
	}) {
		t.Errorf("namespaceSelector %+v: the policy's, and never holdfast's namespace", w.NamespaceSelector)
	}
	if p.Spec.Targets.NamespaceSelector.MatchExpressions != nil {
		t.Error("the policy's selector was changed in place")
	}
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.TimeoutSeconds != 3 || *w.SideEffects != admissionregistrationv1.SideEffectClassNoneOnDryRun {
		t.Errorf("failurePolicy %s timeout %d sideEffects %s", *w.FailurePolicy, *w.TimeoutSeconds, *w.SideEffects)
	}
	if len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, "labels") {
		t.Errorf("matchConditions %+v: label changes must still be sent", w.MatchConditions)
	}
	if w.ClientConfig.Service.Path == nil || *w.ClientConfig.Service.Path != RolloutPath || string(w.ClientConfig.CABundle) != "ca" {
		t.Errorf("clientConfig %+v", w.ClientConfig)
	}
	if *settings.Client.Service.Path != "/validate-policy" {
		t.Error("the anchor's client config was changed in place")
	}
	o := outcomes[Key{Kind: "RolloutPolicy", Name: p.Name}]
	if o == nil || !slices.Equal(o.Entries, []string{all[0].Name, w.Name}) || len(o.Invalid) != 0 {
		t.Errorf("outcome %+v", o)
	}
}

func TestScaleEntryOnlyForRulesThatReadReplicas(t *testing.T) {
	args := rolloutPolicy("server-count", func(s *v1alpha1.RolloutPolicySpec) {
		s.Rules.ArgsMatchReplicas = []v1alpha1.ArgMatchesReplicas{{Container: "konnectivity-server", Flag: "--server-count"}}
	})
	ws, _ := Entries([]v1alpha1.RolloutPolicy{args}, nil, settings)
	scales := byType(ws, TypeScale)
	if len(scales) != 1 {
		t.Fatalf("want a scale entry, got %+v", ws)
	}
	if got := scales[0].Rules[0].Resources; !slices.Equal(got, []string{"deployments/scale", "statefulsets/scale"}) {
		t.Errorf("scale resources %v", got)
	}
	if scales[0].ObjectSelector != nil {
		t.Error("a Scale carries no labels: its entry must not select by them")
	}
	daemonsets := rolloutPolicy("agents", func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet}
		s.Rules.Strategy = &v1alpha1.StrategyRule{}
	})
	if ws, _ := Entries([]v1alpha1.RolloutPolicy{daemonsets}, nil, settings); len(byType(ws, TypeScale)) != 0 {
		t.Errorf("DaemonSets have no scale subresource: %+v", ws)
	}
}

func TestEvictionEntrySelectsNamespaces(t *testing.T) {
	p := v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
		FailurePolicy: ptr.To(v1alpha1.FailurePolicyIgnore),
		Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}}}}}
	ws, _ := Entries(nil, []v1alpha1.DisruptionPolicy{p}, settings)
	if len(ws) != 1 || !strings.HasSuffix(ws[0].Name, "."+TypeEviction) {
		t.Fatalf("%+v", ws)
	}
	w := ws[0]
	if w.Rules[0].Resources[0] != "pods/eviction" || w.ObjectSelector != nil || w.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "kube-system" {
		t.Errorf("%+v", w)
	}
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.TimeoutSeconds != 5 || *w.ClientConfig.Service.Path != EvictionPath {
		t.Errorf("the policy's failure policy over the default, the eviction timeout and path: %+v", w)
	}
}

// TestFloorEntryForGeneratingPolicies: a policy that generates PDBs has the floor's entry,
// PDB CREATEs and spec UPDATEs in the namespaces it selects, failing open whatever the
// policy's failurePolicy; one that generates none has no such entry.
func TestFloorEntryForGeneratingPolicies(t *testing.T) {
	p := v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
		FailurePolicy: ptr.To(v1alpha1.FailurePolicyFail), PDB: &v1alpha1.PDBGeneration{Generate: true},
		Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}}}}}
	ws, outcomes := Entries(nil, []v1alpha1.DisruptionPolicy{p}, settings)
	floor := byType(ws, TypeFloor)
	if len(floor) != 1 || len(byType(ws, TypeEviction)) != 1 {
		t.Fatalf("want one eviction and one floor entry: %+v", ws)
	}
	w := floor[0]
	if r := w.Rules[0]; r.APIGroups[0] != "policy" || r.Resources[0] != "poddisruptionbudgets" || len(r.Operations) != 2 {
		t.Errorf("rule %+v, want policy/v1 poddisruptionbudgets CREATE and UPDATE", r)
	}
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.ClientConfig.Service.Path != FloorPath || w.ObjectSelector != nil ||
		w.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "kube-system" || len(w.MatchConditions) != 1 {
		t.Errorf("entry %+v: want Ignore, the floor's path, the policy's namespaces and the spec condition", w)
	}
	if !slices.Contains(outcomes[Key{Kind: "DisruptionPolicy", Name: "agents"}].Entries, w.Name) {
		t.Errorf("the policy's outcome does not name the floor entry: %+v", outcomes)
	}
	p.Spec.PDB.Generate = false
	if ws, _ := Entries(nil, []v1alpha1.DisruptionPolicy{p}, settings); len(byType(ws, TypeFloor)) != 0 {
		t.Errorf("a policy that generates no PDB has a floor entry: %+v", ws)
	}
}

func TestPoliciesSelectingAlikeShareAnEntry(t *testing.T) {
	a, b := rolloutPolicy("a", nil), rolloutPolicy("b", nil)
	ws, outcomes := Entries([]v1alpha1.RolloutPolicy{a, b}, nil, settings)
	if len(ws) != 5 || len(byType(ws, TypeRollout)) != 1 || len(byType(ws, TypeNamespace)) != 1 ||
		len(byType(ws, TypeEviction)) != 1 || len(byType(ws, TypeDelete)) != 1 || len(byType(ws, TypeRelabel)) != 1 {
		t.Fatalf("want one shared rollout, namespace, eviction, delete and relabel entry each, got %d", len(ws))
	}
	if !slices.Equal(outcomes[Key{"RolloutPolicy", "a"}].Entries, outcomes[Key{"RolloutPolicy", "b"}].Entries) {
		t.Errorf("outcomes %+v", outcomes)
	}
	b.Spec.FailurePolicy = ptr.To(v1alpha1.FailurePolicyFail)
	if ws, _ := Entries([]v1alpha1.RolloutPolicy{a, b}, nil, settings); len(byType(ws, TypeRollout)) != 2 || len(byType(ws, TypeNamespace)) != 1 ||
		len(byType(ws, TypeEviction)) != 1 || len(byType(ws, TypeDelete)) != 1 || len(byType(ws, TypeRelabel)) != 1 {
		t.Errorf("policies that fail differently need rollout entries of their own (the namespace, eviction, delete and relabel entries always fail open): %d", len(ws))
	}
}

func TestNamesFollowTheSelectionNotTheCABundle(t *testing.T) {
	p := rolloutPolicy("p", nil)
	before, _ := Entries([]v1alpha1.RolloutPolicy{p}, nil, settings)
	before = byType(before, TypeRollout)
	rotated := settings
	rotated.Client.CABundle = []byte("rotated")
	after, _ := Entries([]v1alpha1.RolloutPolicy{p}, nil, rotated)
	after = byType(after, TypeRollout)
	if before[0].Name != after[0].Name {
		t.Errorf("a rotated CA renamed the entry: %s → %s", before[0].Name, after[0].Name)
	}
	p.Spec.Targets.Selector.MatchLabels["app"] = "konnectivity-server"
	changed, _ := Entries([]v1alpha1.RolloutPolicy{p}, nil, settings)
	changed = byType(changed, TypeRollout)
	if changed[0].Name == before[0].Name {
		t.Error("a changed selection kept the entry's name: it could not be widened before it is narrowed")
	}
}

// TestPoliciesWithInvalidSelectorsGetNoEntry: a policy stored with selectors holdfast
// cannot evaluate (while the policy webhook was down) selects nothing, so the API server is
// sent nothing for it, rather than every request of every namespace; its outcome names
// the fields for its Intercepted condition. A valid policy beside it keeps its entry.
func TestPoliciesWithInvalidSelectorsGetNoEntry(t *testing.T) {
	p := rolloutPolicy("bad", func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "not a label value"}}
		s.Targets.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: "Near"}}}
	})
	dp := v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "bad-agents"}, Spec: v1alpha1.DisruptionPolicySpec{
		Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}}}}
	ws, outcomes := Entries([]v1alpha1.RolloutPolicy{p, rolloutPolicy("good", nil)}, []v1alpha1.DisruptionPolicy{dp}, settings)
	if len(ws) != 5 || !slices.Equal(outcomes[Key{"RolloutPolicy", "good"}].Entries, names(ws)) {
		t.Fatalf("want only the valid policy's entries: %+v", ws)
	}
	o := outcomes[Key{"RolloutPolicy", "bad"}]
	if o == nil || len(o.Entries) != 0 || !slices.Equal(o.Invalid, []string{"spec.targets.namespaceSelector", "spec.targets.selector"}) ||
		!strings.Contains(o.String(), "selects nothing") {
		t.Errorf("outcome %+v: %s", o, o)
	}
	if o := outcomes[Key{"DisruptionPolicy", "bad-agents"}]; o == nil || !slices.Equal(o.Invalid, []string{"spec.targets.namespaceSelector"}) {
		t.Errorf("eviction outcome %+v", o)
	}
}

func TestURLClientKeepsItsHost(t *testing.T) {
	s := settings
	s.Client = admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/validate-policy")}
	ws, _ := Entries([]v1alpha1.RolloutPolicy{rolloutPolicy("p", nil)}, nil, s)
	if got := *byType(ws, TypeRollout)[0].ClientConfig.URL; got != "https://127.0.0.1:9443"+RolloutPath {
		t.Errorf("URL %s", got)
	}
}

func TestLongPolicyNamesMakeValidEntryNames(t *testing.T) {
	name := strings.Repeat("a", 39) + "-" + strings.Repeat("b", 200)
	ws, _ := Entries([]v1alpha1.RolloutPolicy{rolloutPolicy(name, nil)}, nil, settings)
	if errs := validation.IsDNS1123Subdomain(ws[0].Name); len(errs) > 0 || len(strings.Split(ws[0].Name, ".")) < 3 {
		t.Errorf("name %q: %v", ws[0].Name, errs)
	}
}

// TestEntriesDoNotDependOnListOrder: the cache lists policies in any order; a shared
// entry keeps its name, or every reconcile would rewrite the configuration.
func TestEntriesDoNotDependOnListOrder(t *testing.T) {
	a, b := rolloutPolicy("a", nil), rolloutPolicy("b", nil)
	ab, _ := Entries([]v1alpha1.RolloutPolicy{a, b}, nil, settings)
	ba, _ := Entries([]v1alpha1.RolloutPolicy{b, a}, nil, settings)
	if len(ab) != 5 || !slices.Equal(names(ab), names(ba)) {
		t.Errorf("entries %v and %v", ab, ba)
	}
}

// TestSelectsCELIsTheLabelSelector: the namespace entry's condition, evaluated by CEL as
// the API server evaluates matchConditions, selects exactly the labels the policy's
// namespaceSelector does, absent keys and absent labels included.
func TestSelectsCELIsTheLabelSelector(t *testing.T) {
	env, err := cel.NewEnv(cel.Variable("object", cel.DynType), cel.OptionalTypes())
	if err != nil {
		t.Fatal(err)
	}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"tenant": "true"}, MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"gold", "silver"}},
		{Key: "frozen", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"yes"}},
		{Key: "owner", Operator: metav1.LabelSelectorOpExists},
		{Key: "legacy", Operator: metav1.LabelSelectorOpDoesNotExist},
	}}
	ast, iss := env.Compile(SelectsCEL(sel, "object"))
	if iss.Err() != nil {
		t.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := metav1.LabelSelectorAsSelector(sel)
	base := map[string]string{"tenant": "true", "tier": "gold", "owner": "a"}
	with := func(k, v string) map[string]string {
		m := maps.Clone(base)
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	for _, l := range []map[string]string{nil, {}, base, with("tier", "bronze"), with("tier", ""), with("frozen", "yes"), with("frozen", "no"),
		with("owner", ""), with("legacy", "1"), with("tenant", "false"), with("tenant", "")} {
		meta := map[string]any{"name": "ns"}
		if l != nil {
			labels := map[string]any{}
			for k, v := range l {
				labels[k] = v
			}
			meta["labels"] = labels
		}
		out, _, err := prg.Eval(map[string]any{"object": map[string]any{"metadata": meta}})
		if err != nil {
			t.Fatalf("%v: %v", l, err)
		}
		if got := out.Value().(bool); got != want.Matches(k8slabels.Set(l)) {
			t.Errorf("labels %v: CEL says %t, the selector %t", l, got, !got)
		}
	}
}
