package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// newTestHandler serves decisions from an in-memory store with one enforcing
// --server-count policy and the namespace tenant-a.
func newTestHandler(t testing.TB) *Handler {
	t.Helper()
	s := informer.NewScheme()
	reader := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&appsv1.ReplicaSet{}, informer.OwnerIndex, informer.ControllerUID).
		WithIndex(&appsv1.ControllerRevision{}, informer.OwnerIndex, informer.ControllerUID).
		WithIndex(&corev1.Pod{}, informer.OwnerIndex, informer.ControllerUID).
		WithObjects(
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}},
			utiltesting.MakeRolloutPolicy("server-count").ArgMatchesReplicas("konnectivity-server", "--server-count").Obj(),
		).Build()
	return &Handler{Reader: reader, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now())}
}

func request(op admissionv1.Operation, kind string, obj, old []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:       "1",
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: "tenant-a", Name: "kube-apiserver",
		Operation: op,
		Object:    runtime.RawExtension{Raw: obj},
		OldObject: runtime.RawExtension{Raw: old},
	}}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestHandlerStatusCodes(t *testing.T) {
	h := newTestHandler(t)
	good := mustJSON(t, konnectivity(3, "3").Obj())
	bad := mustJSON(t, konnectivity(3, "1").Obj())
	cases := map[string]struct {
		req      admission.Request
		allowed  bool
		code     int32
		warnings int
	}{
		"matching create":       {req: request(admissionv1.Create, "Deployment", good, nil), allowed: true, code: http.StatusOK},
		"mismatched create":     {req: request(admissionv1.Create, "Deployment", bad, nil), code: http.StatusForbidden},
		"mismatched update":     {req: request(admissionv1.Update, "Deployment", bad, good), code: http.StatusForbidden},
		"update without old":    {req: request(admissionv1.Update, "Deployment", bad, nil), code: http.StatusBadRequest},
		"malformed object":      {req: request(admissionv1.Create, "Deployment", []byte(`{"spec":`), nil), code: http.StatusBadRequest},
		"object of wrong shape": {req: request(admissionv1.Create, "Deployment", []byte(`{"spec":{"replicas":"three"}}`), nil), code: http.StatusBadRequest},
		"unknown kind":          {req: request(admissionv1.Create, "ReplicaSet", good, nil), code: http.StatusBadRequest},
		"delete is not guarded": {req: request(admissionv1.Delete, "Deployment", nil, good), allowed: true, code: http.StatusOK},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), tc.req)
			if resp.Allowed != tc.allowed {
				t.Errorf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
			if resp.Result == nil || resp.Result.Code != tc.code {
				t.Errorf("result = %+v, want code %d", resp.Result, tc.code)
			}
		})
	}
}

func TestHandlerDenialNamesRuleAndField(t *testing.T) {
	resp := newTestHandler(t).Handle(context.Background(),
		request(admissionv1.Create, "Deployment", mustJSON(t, konnectivity(3, "1").Obj()), nil))
	if resp.Result.Reason != metav1.StatusReasonForbidden || resp.Result.Details == nil || len(resp.Result.Details.Causes) != 1 {
		t.Fatalf("result = %+v, want one Forbidden cause", resp.Result)
	}
	c := resp.Result.Details.Causes[0]
	if c.Type != CauseType || c.Field != "spec.template.spec.containers[1].args[1]" {
		t.Errorf("cause = %+v", c)
	}
}

// FuzzRolloutHandler feeds arbitrary objects to the handler: it must never panic, and it
// must never allow what the typed decision denies.
func FuzzRolloutHandler(f *testing.F) {
	h := newTestHandler(f)
	f.Add(mustJSON(f, konnectivity(3, "3").Obj()), mustJSON(f, konnectivity(3, "1").Obj()), "Deployment")
	f.Add(mustJSON(f, konnectivity(3, "1").Obj()), []byte(nil), "StatefulSet")
	f.Add([]byte(`{"spec":{"replicas":2,"template":{"spec":{"containers":[{"name":"konnectivity-server","args":["--server-count"]}]}}}}`), []byte(`{}`), "DaemonSet")
	f.Add([]byte(`null`), []byte(`[]`), "Deployment")
	f.Fuzz(func(t *testing.T, obj, old []byte, kind string) {
		op := admissionv1.Update
		if old == nil {
			op = admissionv1.Create
		}
		resp := h.Handle(context.Background(), request(op, kind, obj, old))
		if resp.Result == nil {
			t.Fatal("response without a result")
		}
		if !resp.Allowed {
			return
		}
		// Whatever was admitted must be decodable and free of violations under the policy.
		in, _, err := h.decode(context.Background(), request(op, kind, obj, old), true)
		if err != nil {
			t.Fatalf("admitted an undecodable request: %v", err)
		}
		if in.New != nil {
			pols := newPolicies(t, h)
			in.Policies = pols
			in.Now = time.Now()
			d, err := Decide(in)
			if err != nil {
				t.Fatalf("admitted a request whose template does not decode: %v", err)
			}
			if len(d.Violations) > 0 {
				t.Fatalf("admitted a request with violations %v", d.Violations)
			}
		}
	})
}

func newPolicies(t *testing.T, h *Handler) []v1alpha1.RolloutPolicy {
	var list v1alpha1.RolloutPolicyList
	if err := h.Reader.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// TestScaleAndFullUpdateDecideAlike holds scenario 13 to I5: scaling a Deployment whose
// maxUnavailable is a percentage from 2 to 6 makes it take 3 pods down at once, more than
// a limit of 1. The scale subresource and a full update with the same replicas must both
// refuse it, naming the fix.
func TestScaleAndFullUpdateDecideAlike(t *testing.T) {
	s := informer.NewScheme()
	d := utiltesting.MakeDeployment("tenant-a", "kube-apiserver").Replicas(2).Obj()
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromString("50%")), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	p := utiltesting.MakeRolloutPolicy("careful").Obj()
	p.Spec.Rules = v1alpha1.RolloutRules{Strategy: &v1alpha1.StrategyRule{MaxUnavailable: ptr.To(intstr.FromInt32(1))}}
	h := &Handler{Reader: utiltesting.NewMemReader(nil, p, d, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}),
		Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now())}

	scaled := d.DeepCopy()
	scaled.Spec.Replicas = ptr.To[int32](6)
	full := request(admissionv1.Update, "Deployment", mustJSON(t, scaled), mustJSON(t, d))
	sub := request(admissionv1.Update, "Scale", mustJSON(t, &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "kube-apiserver"},
		Spec: autoscalingv1.ScaleSpec{Replicas: 6}}), nil)
	sub.Kind = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
	sub.SubResource = "scale"
	for name, req := range map[string]admission.Request{"full update": full, "scale subresource": sub} {
		resp := h.Handle(context.Background(), req)
		if resp.Allowed || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "set maxUnavailable: 1") {
			t.Errorf("%s: %+v, want 403 naming the fix", name, resp.Result)
		}
	}
	fine := d.DeepCopy()
	fine.Spec.Replicas = ptr.To[int32](3) // 50% of 3 is 1
	if resp := h.Handle(context.Background(), request(admissionv1.Update, "Deployment", mustJSON(t, fine), mustJSON(t, d))); !resp.Allowed {
		t.Errorf("a scale that keeps the strategy within the limit: %+v", resp.Result)
	}
}

// TestRelabelThroughStatusIsJudged: kube's status strategies for StatefulSets and
// DaemonSets keep the old spec and nothing else (statefulSetStatusStrategy.PrepareForUpdate,
// pkg/registry/apps/statefulset/strategy.go), so an update of statefulsets/status may
// relabel the workload. It is judged as the same relabel through the workload is: out of
// the selection refused, into it judged on the stored status (oldObject's), whatever status
// the writer sends along.
func TestRelabelThroughStatusIsJudged(t *testing.T) {
	s := informer.NewScheme()
	guarded := map[string]string{"tier": "control-plane"}
	p := utiltesting.MakeRolloutPolicy("hosted").Obj()
	p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: guarded}
	p.Spec.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindStatefulSet}
	sts := etcdTierControlPlane()
	reader := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&appsv1.ControllerRevision{}, informer.OwnerIndex, informer.ControllerUID).
		WithIndex(&corev1.Pod{}, informer.OwnerIndex, informer.ControllerUID).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}, p).Build()
	h := &Handler{Reader: reader, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now())}
	status := func(obj, old *appsv1.StatefulSet) admission.Request {
		r := request(admissionv1.Update, "StatefulSet", mustJSON(t, obj), mustJSON(t, old))
		r.Resource.Resource, r.SubResource = "statefulsets", "status"
		return r
	}

	out := sts.DeepCopy()
	delete(out.Labels, "tier")
	if resp := h.Handle(context.Background(), status(out, sts)); resp.Allowed || resp.Result.Code != http.StatusForbidden ||
		!strings.Contains(resp.Result.Message, RuleSelection) {
		t.Errorf("a relabel out of the selection through statefulsets/status: %+v, want 403 by the selection rule", resp.Result)
	}

	// Into the selection while its controller has not acted on the last change (stored
	// observedGeneration 1 < 2): refused, though the writer claims an observed status.
	unobserved := out.DeepCopy()
	unobserved.Status.ObservedGeneration = 1
	claimed := sts.DeepCopy()
	if resp := h.Handle(context.Background(), status(claimed, unobserved)); resp.Allowed || resp.Result.Code != http.StatusForbidden ||
		!strings.Contains(resp.Result.Message, "not finished") {
		t.Errorf("a relabel into the selection through statefulsets/status with a forged status: %+v, want 403", resp.Result)
	}
	// A finished rollout enters.
	if resp := h.Handle(context.Background(), status(sts, out)); !resp.Allowed {
		t.Errorf("a finished StatefulSet relabelled into the selection through its status: %+v", resp.Result)
	}
}

// TestNamespaceRelabelledInIsReadLive: a namespace relabelled into a policy's
// namespaceSelector a moment ago (HandleNamespace admitted it) may still show its old
// labels in this replica's cache. A workload there that the policy's selector matches is
// then judged with the namespace read from the API server: relabelled out of the selection
// by its own labels at once, it is refused, as a replica whose cache has caught up refuses
// it. The read is best effort: when the API server does not answer, the cache's labels
// decide, as before (another policy's entry may be what sent the request, and a 503 would
// refuse a change that policy admits).
func TestNamespaceRelabelledInIsReadLive(t *testing.T) {
	s := informer.NewScheme()
	p := utiltesting.MakeRolloutPolicy("hosted").Obj()
	p.Spec.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "control-plane"}}
	sts := etcdTierControlPlane()
	cache := fake.NewClientBuilder().WithScheme(s).
		WithIndex(&appsv1.ControllerRevision{}, informer.OwnerIndex, informer.ControllerUID).
		WithIndex(&corev1.Pod{}, informer.OwnerIndex, informer.ControllerUID).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}, p).Build()
	live := fake.NewClientBuilder().WithScheme(s).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{"env": "prod"}}}).Build()
	out := sts.DeepCopy()
	delete(out.Labels, "tier")
	req := request(admissionv1.Update, "StatefulSet", mustJSON(t, out), mustJSON(t, sts))
	req.Resource.Resource, req.Name = "statefulsets", "etcd"

	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	handler := func(live client.Reader) *Handler {
		return &Handler{Reader: cache, Live: live, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now()), Metrics: m}
	}
	if resp := handler(nil).Handle(context.Background(), req); !resp.Allowed {
		t.Fatalf("from the cache alone the namespace is outside the selection, so the relabel starts nothing: %+v", resp.Result)
	}
	if resp := handler(live).Handle(context.Background(), req); resp.Allowed || resp.Result.Code != http.StatusForbidden ||
		!strings.Contains(resp.Result.Message, RuleSelection) {
		t.Errorf("a relabel out of the selection in a namespace the cache shows outside it: %+v, want 403 by the selection rule", resp.Result)
	}
	failing := interceptor.NewClient(live.(client.WithWatch), interceptor.Funcs{Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
		return context.DeadlineExceeded
	}})
	if resp := handler(failing).Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("the namespace's live read failed: %+v, want judged on the cache's labels (admitted)", resp.Result)
	}
	// A workload the policy's selector does not match reads no namespace live.
	other := sts.DeepCopy()
	delete(other.Labels, "tier")
	plain := request(admissionv1.Update, "StatefulSet", mustJSON(t, other), mustJSON(t, other))
	plain.Resource.Resource, plain.Name = "statefulsets", "etcd"
	if resp := handler(failing).Handle(context.Background(), plain); !resp.Allowed {
		t.Errorf("an unselected workload's update read the namespace live: %+v", resp.Result)
	}
	if got := utiltesting.Counts(t, reg, "holdfast_rollout_namespace_live_reads_total"); got["result=read"] != 1 || got["result=failed"] != 1 {
		t.Errorf("namespaces read live: %v, want 1 read and 1 failed", got)
	}

	// A policy that selects another tenant's namespace by name leaves tenant-a out whatever
	// its labels: the API server keeps kubernetes.io/metadata.name equal to the name, so
	// no relabel brings tenant-a in and its workloads read no namespace live (a read per
	// review in every other tenant's namespace, where per-tenant policies select alike).
	for _, sel := range []*metav1.LabelSelector{
		{MatchLabels: map[string]string{corev1.LabelMetadataName: "tenant-b"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpIn, Values: []string{"tenant-b", "tenant-c"}}}},
		{MatchLabels: map[string]string{"env": "prod"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{"tenant-a"}}}},
	} {
		byName := utiltesting.MakeRolloutPolicy("tenant-b").Obj()
		byName.Spec.Targets.NamespaceSelector = sel
		byName.Spec.Targets.Selector = p.Spec.Targets.Selector
		cache := fake.NewClientBuilder().WithScheme(s).
			WithIndex(&appsv1.ControllerRevision{}, informer.OwnerIndex, informer.ControllerUID).
			WithIndex(&corev1.Pod{}, informer.OwnerIndex, informer.ControllerUID).
			WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{corev1.LabelMetadataName: "tenant-a"}}}, byName).Build()
		h := &Handler{Reader: cache, Live: failing, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now()), Metrics: m}
		if resp := h.Handle(context.Background(), req); !resp.Allowed {
			t.Errorf("namespace selector %v: %+v, want admitted (tenant-a is not selected)", sel, resp.Result)
		}
	}
	if got := utiltesting.Counts(t, reg, "holdfast_rollout_namespace_live_reads_total"); got["result=read"] != 1 || got["result=failed"] != 1 {
		t.Errorf("namespaces read live after the by-name policies: %v, want still 1 read and 1 failed", got)
	}
}

// TestHistoryReadLiveSharesTheRequestsDeadline: a workload's history that no synced watch
// holds (a workload entering a selection, a watch still syncing) is read from the API
// server, and that read shares the request's one deadline: an API server too busy to
// answer it in time gets "retry" from holdfast before the webhook's timeout, never a
// request left to the API server's timeout (refused under failurePolicy Fail, let through
// under Ignore).
func TestHistoryReadLiveSharesTheRequestsDeadline(t *testing.T) {
	s := informer.NewScheme()
	p := utiltesting.MakeRolloutPolicy("hosted").Obj()
	p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "control-plane"}}
	sts := etcdTierControlPlane()
	busy := revisionsGoLive{fake.NewClientBuilder().WithScheme(s).
		WithIndex(&appsv1.ControllerRevision{}, informer.OwnerIndex, informer.ControllerUID).
		WithIndex(&corev1.Pod{}, informer.OwnerIndex, informer.ControllerUID).
		WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}, p).Build()}
	changed := sts.DeepCopy()
	changed.Spec.Template.Spec.Containers[0].Image = "registry.example/etcd:B"
	req := request(admissionv1.Update, "StatefulSet", mustJSON(t, changed), mustJSON(t, sts))
	req.Resource.Resource, req.Name = "statefulsets", "etcd"
	h := &Handler{Reader: busy, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now()),
		Ledgers: &budget.Ledgers{Timeout: 100 * time.Millisecond}}
	began := time.Now()
	resp := h.Handle(context.Background(), req)
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("answered after %s, want within the request's deadline of 100ms", took)
	}
	if resp.Allowed || resp.Result.Code != http.StatusInternalServerError || !strings.Contains(resp.Result.Message, "retry") {
		t.Errorf("the history's read cut short: %+v, want 500 and retry", resp.Result)
	}
}

// etcdTierControlPlane is tenant-a's StatefulSet etcd, labelled tier: control-plane, its
// rollout of 3 pods finished.
func etcdTierControlPlane() *appsv1.StatefulSet {
	labels := map[string]string{"app": "etcd"}
	return &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "etcd", Labels: map[string]string{"app": "etcd", "tier": "control-plane"}, Generation: 2},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "etcd", Image: "registry.example/etcd:A"}}}}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, UpdatedReplicas: 3,
			CurrentRevision: "a", UpdateRevision: "a"}}
}

// TestHeldStatefulSetCreateReadsWhatItAdoptsLive: tenant-a's StatefulSet etcd, OnDelete,
// was deleted; its three pods of revision etcd-a are in this replica's cache, without a
// controller. It is created again, held, on template B: kube creates B's pods only for the
// ordinals it finds no orphan of, so the CREATE is a start exactly when fewer than three
// pods are kept. Whether they are is read from the API server, as the controller will find
// them: pods deleted a moment ago, or still controlled by the deleted set (a cascading
// delete the garbage collector has not finished: they go), are replaced from B while A
// still has pods, and a Deny window refuses that start; orphans are kept, and the CREATE
// starts nothing. A read that fails is an error to retry.
func TestHeldStatefulSetCreateReadsWhatItAdoptsLive(t *testing.T) {
	s := informer.NewScheme()
	p := utiltesting.MakeRolloutPolicy("hosted").Obj()
	p.Spec.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "etcd"}}
	p.Spec.Windows = []v1alpha1.Window{{Name: "freeze", Schedule: "0 * * * *", Duration: metav1.Duration{Duration: time.Hour}, Action: v1alpha1.WindowDeny}}
	labels := map[string]string{"app": "etcd"}
	revA := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "etcd-a", Labels: labels}, Revision: 1,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"etcd"}},"spec":{"containers":[{"name":"etcd","image":"registry.example/etcd:A"}]}}}}`)}}
	pods := func(owner *metav1.OwnerReference) []client.Object {
		var out []client.Object
		for i := range 3 {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: fmt.Sprintf("etcd-%d", i),
				Labels: map[string]string{"app": "etcd", appsv1.ControllerRevisionHashLabelKey: "etcd-a"}, CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
				Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
			if owner != nil {
				pod.OwnerReferences = []metav1.OwnerReference{*owner}
			}
			out = append(out, pod)
		}
		return out
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}
	cache := fake.NewClientBuilder().WithScheme(s).WithObjects(append(pods(nil), ns, p, revA)...).Build()
	deleted := &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "etcd", UID: "deleted", Controller: ptr.To(true)}

	sts := etcdTierControlPlane()
	sts.Status = appsv1.StatefulSetStatus{}
	sts.Generation = 0
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType}
	sts.Spec.Template.Spec.Containers[0].Image = "registry.example/etcd:B"
	req := request(admissionv1.Create, "StatefulSet", mustJSON(t, sts), nil)
	req.Resource.Resource, req.Name = "statefulsets", "etcd"
	// A pod of another name labelled with B's revision is no member of etcd: kube creates
	// B's first pods all the same.
	revB := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "etcd-b", Labels: labels}, Revision: 2,
		Data: runtime.RawExtension{Raw: []byte(`{"spec":{"template":{"$patch":"replace","metadata":{"labels":{"app":"etcd"}},"spec":{"containers":[{"name":"etcd","image":"registry.example/etcd:B"}]}}}}`)}}
	decoy := pods(nil)[0].(*corev1.Pod)
	decoy.Name, decoy.Labels[appsv1.ControllerRevisionHashLabelKey] = "decoy", "etcd-b"
	for name, tc := range map[string]struct {
		cache client.Reader
		live  client.Reader
		start bool
	}{
		"the cache still shows the pods controlled by the deleted set; orphans since": {
			cache: fake.NewClientBuilder().WithScheme(s).WithObjects(append(pods(deleted), ns, p, revA)...).Build(),
			live:  fake.NewClientBuilder().WithScheme(s).WithObjects(append(pods(nil), revA)...).Build()},
		"a pod of another name carries B's revision": {
			live: fake.NewClientBuilder().WithScheme(s).WithObjects(pods(nil)[0], pods(nil)[1], decoy, revA, revB).Build(), start: true},
		"no live reader: the cache's orphans are kept":    {},
		"the orphans as the API server has them are kept": {live: fake.NewClientBuilder().WithScheme(s).WithObjects(append(pods(nil), revA)...).Build()},
		"two of the pods were deleted a moment ago":       {live: fake.NewClientBuilder().WithScheme(s).WithObjects(pods(nil)[0], revA).Build(), start: true},
		"the pods go with the deleted set (cascade)":      {live: fake.NewClientBuilder().WithScheme(s).WithObjects(append(pods(deleted), revA)...).Build(), start: true},
	} {
		t.Run(name, func(t *testing.T) {
			reader := tc.cache
			if reader == nil {
				reader = cache
			}
			h := &Handler{Reader: reader, Live: tc.live, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now())}
			resp := h.Handle(context.Background(), req)
			if tc.start && (resp.Allowed || !strings.Contains(resp.Result.Message, "freeze")) {
				t.Errorf("a CREATE whose template kube gives pods: %+v, want refused by the window", resp.Result)
			}
			if !tc.start && !resp.Allowed {
				t.Errorf("a CREATE adopting as many orphans as its replicas: %+v, want admitted", resp.Result)
			}
		})
	}
	// A read that fails is retried, never decided on the cache.
	failing := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).Build(), interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return context.DeadlineExceeded
		}})
	h := &Handler{Reader: cache, Live: failing, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now())}
	if resp := h.Handle(context.Background(), req); resp.Allowed || resp.Result.Code < 500 || !strings.Contains(resp.Result.Message, "retry") {
		t.Errorf("the API server did not answer: %+v, want an error that says retry", resp.Result)
	}
}
