package controller

import (
	"context"
	"slices"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/memstore"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/policyreport"
	"github.com/holdfast-dev/holdfast/test/util/golden"
)

// The objects these tests write are those testdata/previous/ holds as release 5648181 wrote
// them: the same anchor, policies and workloads.
const holdfastNamespace = "holdfast-system"

// agentsRollouts selects the konnectivity agents' DaemonSets by app, which the rollout
// entry's object selector carries; agentsEvictions the pods of kube-system.
func agentsRollouts(app string) v1alpha1.RolloutPolicy {
	return v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents-rollouts"}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet},
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}
}

var agentsEvictions = v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
	Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "kube-system"}}}}}

// guards is the scoped configuration's controller on a store holding the installed
// (anchor) configuration "holdfast".
func guards(store *memstore.Store) *WebhookConfiguration {
	store.Put(&admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "holdfast", UID: "5e6f7081-92a3-44b5-c6d7-e8f90a1b2c34"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "policies.holdfast.dev", ClientConfig: admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: holdfastNamespace, Name: "holdfast-webhook", Path: ptr.To("/validate-policy")},
			CABundle: []byte("-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n")}}},
	})
	return &WebhookConfiguration{Client: memstore.Writer{Store: store}, Name: interception.Name("holdfast"), Anchor: "holdfast",
		Namespace: holdfastNamespace, Rollout: entryDefaults, Eviction: entryDefaults, NarrowAfter: 2 * time.Second, Clock: clock.RealClock{}}
}

// entryDefaults are the chart's: failurePolicy Ignore, 3 s.
var entryDefaults = interception.Defaults{FailurePolicy: admissionregistrationv1.Ignore, TimeoutSeconds: 3}

func scoped(t *testing.T, store *memstore.Store) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := store.Get(context.Background(), client.ObjectKey{Name: "holdfast-guards"}, c); err != nil {
		t.Fatal(err)
	}
	return c
}

// written is obj as holdfast wrote it: without the UID and resourceVersion the store (the
// API server) sets.
func written[T client.Object](obj T, typ metav1.TypeMeta) T {
	obj.SetUID("")
	obj.SetResourceVersion("")
	obj.GetObjectKind().SetGroupVersionKind(typ.GroupVersionKind())
	return obj
}

var vwcType = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}

// TestScopedWebhookConfigurationStoredForm pins the scoped configuration the leader writes:
// its name (the anchor's and -guards), labels, owner, the entries' names and content, and
// the annotation that says when it was widened, whose time is RFC 3339 with nanoseconds.
func TestScopedWebhookConfigurationStoredForm(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	r := guards(store)
	if _, _, err := r.sync(ctx, []v1alpha1.RolloutPolicy{agentsRollouts("konnectivity-agent")}, []v1alpha1.DisruptionPolicy{agentsEvictions}); err != nil {
		t.Fatal(err)
	}
	golden.AssertJSON(t, "testdata/guards-configuration.golden", written(scoped(t, store), vwcType))

	before := time.Now()
	if _, _, err := r.sync(ctx, []v1alpha1.RolloutPolicy{agentsRollouts("konnectivity-agent-v2")}, []v1alpha1.DisruptionPolicy{agentsEvictions}); err != nil {
		t.Fatal(err)
	}
	widened := scoped(t, store)
	at, err := time.Parse(time.RFC3339Nano, widened.Annotations[WidenedAt])
	if err != nil || at.Before(before.Add(-time.Second)) || at.Location() != time.UTC {
		t.Fatalf("%s = %q (%v), want the UTC time of the widening", WidenedAt, widened.Annotations[WidenedAt], err)
	}
	widened.Annotations[WidenedAt] = "(the time of the widening)"
	golden.AssertJSON(t, "testdata/guards-configuration-widened.golden", written(widened, vwcType))
}

// TestWidensThePreviousReleasesWebhookConfiguration: this release's rollout entries also
// send relabels through statefulsets/status and daemonsets/status, so for policies that
// target StatefulSets or DaemonSets they differ (content and names) from the ones release
// 5648181 wrote. Read as the API server returns them (defaults filled in), they are
// widened, never replaced: every entry the previous release had in force stays until this
// release's own have stood beside it, and only then is the configuration narrowed. A
// leader of each release alternating during an upgrade rewrites the entries each time, but
// never leaves a request of a selected workload unsent.
func TestWidensThePreviousReleasesWebhookConfiguration(t *testing.T) {
	ctx := context.Background()
	evictions := []v1alpha1.DisruptionPolicy{agentsEvictions}
	for name, c := range map[string]struct {
		fixture, selects string
		stamp            func(stored string) string
	}{
		"in force": {fixture: "testdata/previous/guards-configuration.json", selects: "konnectivity-agent"},
		// agents-rollouts now selects app=konnectivity-agent-v2: the previous release held
		// the entries in force beside their replacement and stamped the widening, long ago
		// (the fixture's stamp) or just now.
		"stood":      {fixture: "testdata/previous/guards-configuration-widened.json", selects: "konnectivity-agent-v2", stamp: func(stored string) string { return stored }},
		"just stood": {fixture: "testdata/previous/guards-configuration-widened.json", selects: "konnectivity-agent-v2", stamp: func(string) string { return time.Now().UTC().Format(time.RFC3339Nano) }},
	} {
		t.Run(name, func(t *testing.T) {
			rollouts := []v1alpha1.RolloutPolicy{agentsRollouts(c.selects)}
			want, _ := interception.Entries(rollouts, evictions, interception.Settings{Namespace: holdfastNamespace, Rollout: entryDefaults, Eviction: entryDefaults})
			store := memstore.New(nil)
			prev := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			golden.Load(t, c.fixture, prev)
			if c.stamp != nil {
				// The key as the previous release stored it, not this release's constant.
				prev.Annotations["holdfast.dev/widened-at"] = c.stamp(prev.Annotations["holdfast.dev/widened-at"])
			}
			store.Put(prev.DeepCopy())
			r := guards(store)
			_, res, err := r.sync(ctx, rollouts, evictions)
			if err != nil {
				t.Fatal(err)
			}
			got := scoped(t, store)
			for _, n := range append(namesOf(prev.Webhooks), namesOf(want)...) {
				if !slices.Contains(namesOf(got.Webhooks), n) {
					t.Errorf("entries %v lack %s: the previous release's entries stay beside this release's until they stood", namesOf(got.Webhooks), n)
				}
			}
			if got.Annotations[WidenedAt] == "" || res.RequeueAfter <= 0 {
				t.Fatalf("%s %q, requeue after %v; want the widening stamped and looked at again", WidenedAt, got.Annotations[WidenedAt], res.RequeueAfter)
			}
			// Once the widening has stood, only this release's entries remain.
			got.Annotations[WidenedAt] = "2026-11-30T12:00:00.123456789Z"
			store.Put(got)
			if _, _, err := r.sync(ctx, rollouts, evictions); err != nil {
				t.Fatal(err)
			}
			if got = scoped(t, store); !equalNames(namesOf(got.Webhooks), namesOf(want)) || got.Annotations[WidenedAt] != "" {
				t.Errorf("entries %v, %s %q once the widening stood; want narrowed to %v", namesOf(got.Webhooks), WidenedAt, got.Annotations[WidenedAt], namesOf(want))
			}
		})
	}
}

func equalNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// reportStore is the store as an API server that serves the PolicyReport CRD.
type reportStore struct{ memstore.Writer }

func (reportStore) RESTMapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(policyreport.GVK, meta.RESTScopeNamespace)
	return m
}

var kasViolation = decision.Violations{{Policy: "kas-rollouts", Rule: "argsMatchReplicas", Action: decision.Deny,
	Message: "Deployment tenant-a/kube-apiserver: container konnectivity-server runs --server-count=2 with 3 replicas; set it to 3"}}

// kasReport is the audit of tenant-a at now: kube-apiserver violates kasViolation (and
// more, when given), kube-scheduler passes.
func kasReport(now time.Time, more ...decision.Violation) map[string]*policyReport {
	rep := &policyReport{}
	kas := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "kube-apiserver", UID: "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"}}
	rep.add(v1alpha1.KindDeployment, kas, append(kasViolation[:1:1], more...), now)
	rep.add(v1alpha1.KindDeployment, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "kube-scheduler"}}, nil, now)
	return map[string]*policyReport{"tenant-a": rep}
}

func storedReport(t *testing.T, store *memstore.Store) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(policyreport.GVK)
	if err := store.Get(context.Background(), client.ObjectKey{Namespace: "tenant-a", Name: "holdfast-kas-rollouts"}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestPolicyReportStoredForm pins the PolicyReport the audit writes: its name, labels, and
// the results and summary in the wgpolicyk8s.io format.
func TestPolicyReportStoredForm(t *testing.T) {
	store := memstore.New(nil)
	r := &RolloutPolicyStatus{Client: reportStore{memstore.Writer{Store: store}}, Clock: clock.RealClock{}}
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kas-rollouts"}}
	if err := r.writeReports(context.Background(), p, kasReport(time.Date(2026, 11, 30, 11, 0, 0, 0, time.UTC))); err != nil {
		t.Fatal(err)
	}
	golden.AssertJSON(t, "testdata/policyreport.golden", written(storedReport(t, store),
		metav1.TypeMeta{APIVersion: policyreport.GVK.GroupVersion().String(), Kind: policyreport.GVK.Kind}))
}

// TestKeepsThePreviousReleasesPolicyReport: the PolicyReport release 5648181 wrote is the
// one this release writes for the policy and namespace: a result it still finds keeps the
// time the previous release first found it, and a report that says the same is not
// written again.
func TestKeepsThePreviousReleasesPolicyReport(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	prev := &unstructured.Unstructured{}
	golden.Load(t, "testdata/previous/policyreport.json", prev)
	store.Put(prev)
	r := &RolloutPolicyStatus{Client: reportStore{memstore.Writer{Store: store}}, Clock: clock.RealClock{}}
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "kas-rollouts"}}
	later := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	if err := r.writeReports(ctx, p, kasReport(later)); err != nil {
		t.Fatal(err)
	}
	if got := storedReport(t, store); got.GetResourceVersion() != "47321" {
		t.Errorf("the same findings rewrote the previous release's report: %v", got.Object["results"])
	}

	another := decision.Violation{Policy: "kas-rollouts", Rule: "minInterval", Action: decision.Deny, Message: "Deployment tenant-a/kube-apiserver: wait"}
	if err := r.writeReports(ctx, p, kasReport(later, another)); err != nil {
		t.Fatal(err)
	}
	results, _, _ := unstructured.NestedSlice(storedReport(t, store).Object, "results")
	if len(results) != 2 {
		t.Fatalf("results: %v", results)
	}
	for i, want := range []int64{1796036400, later.Unix()} {
		if got, _, _ := unstructured.NestedInt64(results[i].(map[string]any), "timestamp", "seconds"); got != want {
			t.Errorf("result %d found at %d, want %d", i, got, want)
		}
	}
}

// statusStore is the store as an API server that serves the status subresource.
type statusStore struct{ memstore.Writer }

func (s statusStore) Status() client.SubResourceWriter { return statusWriter{store: s.Writer} }

type statusWriter struct {
	client.SubResourceWriter // nil: only Update is called
	store                    memstore.Writer
}

func (w statusWriter) Update(ctx context.Context, obj client.Object, _ ...client.SubResourceUpdateOption) error {
	return w.store.Update(ctx, obj)
}

// TestDisruptionPolicyFinalizerStoredForm pins the finalizer a DisruptionPolicy that
// generates PDBs gets: the leader of any release removes its PDBs and then it.
func TestDisruptionPolicyFinalizerStoredForm(t *testing.T) {
	store := memstore.New(nil)
	store.Put(&v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents", Generation: 1}, Spec: v1alpha1.DisruptionPolicySpec{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), PDB: &v1alpha1.PDBGeneration{Generate: true}}})
	r := &DisruptionPolicyStatus{Client: statusStore{memstore.Writer{Store: store}}, Clock: clock.RealClock{}}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: "agents"}}); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.DisruptionPolicy{}
	if err := store.Get(context.Background(), client.ObjectKey{Name: "agents"}, p); err != nil {
		t.Fatal(err)
	}
	p.UID, p.ResourceVersion = "", ""
	golden.AssertJSON(t, "testdata/disruptionpolicy-metadata.golden", p.ObjectMeta)
}

// TestReleasesWhatThePreviousReleaseFinalized: a DisruptionPolicy deleted while release
// 5648181's finalizer holds it has the PDBs that release generated for it deleted by this
// release, and then its finalizer removed.
func TestReleasesWhatThePreviousReleaseFinalized(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(nil)
	policy, generated := &v1alpha1.DisruptionPolicy{}, &policyv1.PodDisruptionBudget{}
	golden.Load(t, "testdata/previous/disruptionpolicy.json", policy)
	golden.Load(t, "testdata/previous/pdb.json", generated)
	store.Put(policy)
	store.Put(generated)
	r := &DisruptionPolicyStatus{Client: statusStore{memstore.Writer{Store: store}}, Clock: clock.RealClock{}}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: "agents"}}); err != nil {
		t.Fatal(err)
	}
	if n := store.Len(&policyv1.PodDisruptionBudget{}); n != 0 {
		t.Errorf("%d PDBs left; want the one the previous release generated deleted", n)
	}
	if err := store.Get(ctx, client.ObjectKey{Name: "agents"}, policy); err != nil || len(policy.Finalizers) != 0 {
		t.Errorf("finalizers %v, %v; want none", policy.Finalizers, err)
	}
	if !pdb.Managed(generated) {
		t.Error("the previous release's PDB does not read as holdfast's")
	}
}
