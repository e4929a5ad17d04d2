//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/interception"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// countingServer is holdfast's webhook server with a count of the requests the API server
// sent it, by namespace: the tests of scoped interception count what never arrives.
type countingServer struct {
	webhook.Server
	mu    sync.Mutex
	calls map[string][]string
}

func (s *countingServer) Register(path string, h http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			var review admissionv1.AdmissionReview
			if json.Unmarshal(body, &review) == nil && review.Request != nil {
				rq := review.Request
				res := rq.Resource.Resource
				if rq.SubResource != "" {
					res += "/" + rq.SubResource
				}
				s.mu.Lock()
				if s.calls == nil {
					s.calls = map[string][]string{}
				}
				s.calls[rq.Namespace] = append(s.calls[rq.Namespace], string(rq.Operation)+" "+res+" "+rq.Name)
				s.mu.Unlock()
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
}

// callsIn returns the requests about objects in namespace ns that reached holdfast.
func callsIn(ns string) []string {
	s := webhookServer
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls[ns])
}

// scopedEntries reads the webhook configuration holdfast's leader keeps.
func scopedEntries(t *testing.T) []admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Name: interception.Name("holdfast")}, vwc); err != nil {
		t.Fatal(err)
	}
	return vwc.Webhooks
}

// entriesOf returns the scoped entries named after the policy.
func entriesOf(t *testing.T, policy string) []admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	var out []admissionregistrationv1.ValidatingWebhook
	for _, w := range scopedEntries(t) {
		if strings.HasPrefix(w.Name, policy+"-") {
			out = append(out, w)
		}
	}
	return out
}

// TestScopeUnguardedNeverReachesHoldfast is the promise of scoped interception: a
// workload, scale or eviction no policy can select is never sent to holdfast; what a policy
// selects is, a relabel out of a policy included.
func TestScopeUnguardedNeverReachesHoldfast(t *testing.T) {
	ctx := context.Background()
	guarded := createNamespace(t, nil)
	unguarded := createNamespace(t, nil)
	applyPolicy(t, guarded, utiltesting.MakeRolloutPolicy("scoped").Selector(map[string]string{"tier": "control-plane"}).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj())
	disruptionPolicy(t, guarded, nil)

	// Every kind, created, changed and scaled, in a namespace no policy selects; and a
	// Deployment in the guarded namespace that the policy's selector leaves out.
	exercise := func(ns, prefix string, labels map[string]string) {
		t.Helper()
		d := utiltesting.MakeDeployment(ns, prefix+"deploy").Obj()
		tmpl := d.Spec.Template
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "sts"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: d.Spec.Selector, Template: tmpl}}
		ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: prefix + "ds"},
			Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: tmpl}}
		for _, obj := range []client.Object{d, sts, ds} {
			obj.SetLabels(labels)
			if err := k8s.Create(ctx, obj); err != nil {
				t.Fatalf("creating %s: %v", obj.GetName(), err)
			}
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/main:2"
		sts.Spec.Template.Spec.Containers[0].Image = "registry.example/main:2"
		ds.Spec.Template.Spec.Containers[0].Image = "registry.example/main:2"
		for _, obj := range []client.Object{d, sts, ds} {
			update(t, obj)
		}
		for _, obj := range []client.Object{d, sts} {
			scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
			if err := k8s.SubResource("scale").Update(ctx, obj, client.WithSubResourceBody(scale)); err != nil {
				t.Fatalf("scaling %s: %v", obj.GetName(), err)
			}
		}
	}
	exercise(unguarded, "", map[string]string{"tier": "control-plane"})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: unguarded, Name: "agent", Labels: map[string]string{"app": "agent"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "registry.example/main:1"}}}}
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := evict(t, unguarded, pod.Name, false); err != nil {
		t.Fatalf("evicting a pod no policy selects: %v", err)
	}
	if got := callsIn(unguarded); len(got) != 0 {
		t.Errorf("holdfast was called for a namespace no policy selects: %v", got)
	}

	before := len(callsIn(guarded))
	exercise(guarded, "other-", map[string]string{"tier": "web"})
	workloadCalls := 0
	for _, c := range callsIn(guarded)[before:] {
		if !strings.Contains(c, "/scale") {
			workloadCalls++
		}
	}
	if workloadCalls != 0 {
		t.Errorf("holdfast was called for workloads the policy's selector leaves out: %v", callsIn(guarded)[before:])
	}
	// Scales carry no labels: in a namespace a policy with argsMatchReplicas selects, they
	// are sent (and allowed for a workload the policy does not select).
	if got := len(callsIn(guarded)) - before; got != 2 {
		t.Errorf("holdfast got %d requests for the other workloads, want the 2 scales: %v", got, callsIn(guarded)[before:])
	}

	// A guarded workload is sent: its CREATE, its change, and the first step of a relabel out.
	before = len(callsIn(guarded))
	d := konnectivity(guarded, 3, "3")
	d.Labels["tier"] = "control-plane"
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	waitCached(t, d)
	d.Spec.Template.Spec.Containers[1].Args = []string{"--server-count=2"}
	assertHoldfastDenied(t, k8s.Update(ctx, d), rollout.RuleArgsMatchReplicas, "spec.template.spec.containers[1].args[0]")
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	d.Labels["tier"] = "web"
	if err := k8s.Update(ctx, d); !apierrors.IsForbidden(err) {
		t.Errorf("a relabel out of an Enforce policy: got %v, want 403", err)
	}
	if got := len(callsIn(guarded)) - before; got != 3 {
		t.Errorf("holdfast got %d requests for the guarded Deployment, want 3 (create, change, relabel): %v", got, callsIn(guarded)[before:])
	}

	// An eviction in the namespace the DisruptionPolicy selects is sent.
	before = len(callsIn(guarded))
	pod = pod.DeepCopy()
	pod.Namespace, pod.ResourceVersion = guarded, ""
	if err := k8s.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	_ = evict(t, guarded, pod.Name, true)
	if got := callsIn(guarded)[before:]; !slices.Contains(got, "CREATE pods/eviction agent") {
		t.Errorf("the eviction in the guarded namespace did not reach holdfast: %v", got)
	}
}

// TestScopeStatusRelabels: kube's status strategies for StatefulSets and DaemonSets keep
// the old spec and nothing else (PrepareForUpdate, pkg/registry/apps/*/strategy.go), so an
// update of statefulsets/status or daemonsets/status may relabel a workload out of a
// policy. The rollout entry sends exactly those: a relabel out is refused as through the
// workload itself, and a controller's status write never reaches holdfast.
func TestScopeStatusRelabels(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("status").Selector(map[string]string{"tier": "control-plane"}).Obj()
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
	applyPolicy(t, ns, p)
	tmpl := utiltesting.MakeDeployment(ns, "x").Obj().Spec
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "etcd", Labels: map[string]string{"tier": "control-plane"}},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: tmpl.Selector, Template: tmpl.Template}}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent", Labels: map[string]string{"tier": "control-plane"}},
		Spec: appsv1.DaemonSetSpec{Selector: tmpl.Selector, Template: tmpl.Template}}
	for _, obj := range []client.Object{sts, ds} {
		if err := k8s.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s: %v", obj.GetName(), err)
		}
	}
	before := len(callsIn(ns))
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
	ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: 1, CurrentNumberScheduled: 1, UpdatedNumberScheduled: 1, NumberAvailable: 1}
	for _, obj := range []client.Object{sts, ds} {
		if err := k8s.Status().Update(ctx, obj); err != nil {
			t.Fatalf("a controller's status write of %s: %v", obj.GetName(), err)
		}
	}
	if got := callsIn(ns)[before:]; len(got) != 0 {
		t.Errorf("status writes that keep the labels reached holdfast: %v", got)
	}
	for _, obj := range []client.Object{sts, ds} {
		out := obj.DeepCopyObject().(client.Object)
		out.SetLabels(map[string]string{"tier": "web"})
		assertHoldfastDenied(t, k8s.Status().Update(ctx, out), rollout.RuleSelection, "metadata.labels")
	}
	want := []string{"UPDATE statefulsets/status etcd", "UPDATE daemonsets/status agent"}
	if got := callsIn(ns)[before:]; !slices.Equal(got, want) {
		t.Errorf("holdfast got %v, want the two relabels through status: %v", got, want)
	}
}

// TestScopeFollowsPolicies checks that the leader's configuration follows policies within
// seconds as they are added, changed and deleted, widening before it narrows, and reverts
// a hand edit.
func TestScopeFollowsPolicies(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("follows").Selector(map[string]string{"app": "a"}).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	applyPolicy(t, ns, p)
	if n := len(entriesOf(t, p.Name)) - len(guards(t, p.Name)); n != 1 {
		t.Errorf("want one namespace relabel entry for a policy with a namespaceSelector, got %d", n)
	}
	entries := guards(t, p.Name)
	if len(entries) != 2 {
		t.Fatalf("want a workload and a scale entry for the policy, got %+v", entries)
	}
	for _, w := range entries {
		if w.FailurePolicy == nil || *w.FailurePolicy != admissionregistrationv1.Fail {
			t.Errorf("%s: failurePolicy %v, want the default Fail", w.Name, w.FailurePolicy)
		}
		if !slices.ContainsFunc(w.NamespaceSelector.MatchExpressions, func(r metav1.LabelSelectorRequirement) bool {
			return r.Key == corev1.LabelMetadataName && r.Operator == metav1.LabelSelectorOpNotIn && slices.Contains(r.Values, holdfastNamespace)
		}) {
			t.Errorf("%s never reaches into holdfast's namespace? %+v", w.Name, w.NamespaceSelector)
		}
		if strings.HasSuffix(w.Name, "."+interception.TypeRollout) && (w.ObjectSelector == nil || w.ObjectSelector.MatchLabels["app"] != "a") {
			t.Errorf("%s: objectSelector %+v, want the policy's", w.Name, w.ObjectSelector)
		}
	}
	cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionIntercepted)
	if cond.Reason != v1alpha1.ReasonScoped || !strings.Contains(cond.Message, entries[0].Name) {
		t.Errorf("Intercepted = %+v, want Scoped naming its entries", cond)
	}

	// A changed selector: the old entries go, the new ones come, and for a moment both are
	// in force.
	old := entries
	start := time.Now()
	widened := false
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Targets.Selector.MatchLabels["app"] = "b"
		p.Spec.FailurePolicy = ptr.To(v1alpha1.FailurePolicyIgnore)
		return k8s.Update(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the entries follow the changed selector", func() bool {
		cur := guards(t, p.Name)
		if len(cur) == 4 {
			widened = true
		}
		return len(cur) == 2 && !slices.ContainsFunc(cur, func(w admissionregistrationv1.ValidatingWebhook) bool {
			return slices.ContainsFunc(old, func(o admissionregistrationv1.ValidatingWebhook) bool { return o.Name == w.Name })
		})
	})
	t.Logf("the configuration followed a changed policy in %v", time.Since(start).Round(10*time.Millisecond))
	if !widened {
		t.Error("the configuration never held the old and the new entries together")
	}
	for _, w := range guards(t, p.Name) {
		if *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("%s: failurePolicy %s, want the policy's Ignore", w.Name, *w.FailurePolicy)
		}
	}

	// A hand edit is reverted.
	vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: interception.Name("holdfast")}, vwc); err != nil {
		t.Fatal(err)
	}
	vwc.Webhooks = slices.DeleteFunc(vwc.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return strings.HasPrefix(w.Name, p.Name+"-") })
	if err := k8s.Update(ctx, vwc); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the hand edit reverted", func() bool { return len(guards(t, p.Name)) == 2 })

	// A suspended policy has no entry, and says so.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Suspend = true
		return k8s.Update(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}
	intercepted(t, p)
	if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionIntercepted); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonNotGuarding {
		t.Errorf("Intercepted of a suspended policy = %+v", c)
	}
	eventually(t, "a suspended policy's entries removed", func() bool { return len(guards(t, p.Name)) == 0 })

	// A deleted policy takes its entries along.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Suspend = false
		return k8s.Update(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}
	intercepted(t, p)
	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a deleted policy's entries removed", func() bool { return len(guards(t, p.Name)) == 0 })
}

// TestScopeRefusesWhatCannotBeASelector: a selector value that is not a label value
// cannot be a webhook's objectSelector, and holdfast could not evaluate it: such a policy
// is refused when holdfast answers (one created while it did not selects nothing and gets
// no entry: internal/interception's TestPoliciesWithInvalidSelectorsGetNoEntry).
func TestScopeRefusesWhatCannotBeASelector(t *testing.T) {
	p := utiltesting.MakeRolloutPolicy("broad").Mode(v1alpha1.ModeAudit).
		Selector(map[string]string{"app": "not a label value"}).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	err := k8s.Create(context.Background(), p)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.targets.selector") {
		t.Fatalf("creating a policy whose selector cannot be evaluated: %v, want 422 naming spec.targets.selector", err)
	}
}

// TestScopeTwoEntriesOneEviction: two DisruptionPolicies select one namespace differently
// (by name, and by a label), so two entries match one eviction and holdfast decides it
// twice. It is admitted, and recorded once.
func TestScopeTwoEntriesOneEviction(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, map[string]string{"tier": "agents"})
	disruptionPolicy(t, ns, nil)
	second := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-by-label"},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Targets: v1alpha1.PodTargets{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "agents"}},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), second) })
	intercepted(t, second)
	pods := agentGroup(t, ns, 3)

	before := len(callsIn(ns))
	if err := evict(t, ns, pods[0].Name, false); err != nil {
		t.Fatalf("the first eviction of the group: %v", err)
	}
	if got := len(callsIn(ns)) - before; got != 2 {
		t.Errorf("holdfast decided the eviction %d times, want 2 (one per matching entry): %v", got, callsIn(ns)[before:])
	}
	var leases coordinationv1.LeaseList
	if err := k8s.List(ctx, &leases, client.InNamespace(holdfastNamespace)); err != nil {
		t.Fatal(err)
	}
	records := 0
	for _, l := range leases.Items {
		if raw := l.Annotations["holdfast.dev/evictions"]; raw != "" && strings.Contains(raw, string(pods[0].UID)) {
			records += strings.Count(raw, string(pods[0].UID))
		}
	}
	if records != 1 {
		t.Errorf("the eviction is recorded %d times, want once", records)
	}
}

// guards are the policy's entries but its namespace relabel entry (which selects
// namespaces by an objectSelector and always fails open).
func guards(t *testing.T, policy string) []admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	return slices.DeleteFunc(entriesOf(t, policy), func(w admissionregistrationv1.ValidatingWebhook) bool {
		return strings.HasSuffix(w.Name, "."+interception.TypeNamespace)
	})
}
