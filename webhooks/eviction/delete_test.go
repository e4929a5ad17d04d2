package eviction

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestDecideDelete: a DELETE of a selected pod is decided by the same budget and cooldown
// as its eviction, against the same records both ways, only under a policy with
// guardDeletes, and never held for a pod that serves nothing or on a lost node.
func TestDecideDelete(t *testing.T) {
	guarded := func(mut func(*v1alpha1.DisruptionPolicySpec)) v1alpha1.DisruptionPolicy {
		return dp(func(s *v1alpha1.DisruptionPolicySpec) {
			s.GuardDeletes = true
			s.Cooldown = &metav1.Duration{Duration: time.Minute}
			if mut != nil {
				mut(s)
			}
		})
	}
	spent := func(g *workload.Group) { g.Pods[0].Ready = false }
	evicted := []budget.Eviction{{Pod: "gone", UID: "ux", At: now.Add(-10 * time.Second)}}
	deleted := []budget.Eviction{{Pod: "gone", UID: "ux", At: now.Add(-10 * time.Second), Via: budget.ViaDelete}}
	cases := map[string]struct {
		policy   v1alpha1.DisruptionPolicy
		eviction bool // the eviction rather than the delete
		mutGroup func(*workload.Group)
		mutPod   func(*workload.Pod)
		records  []budget.Eviction
		nodeLost bool
		user     string
		want     []string
		never    bool
		counts   bool
	}{
		"a delete under a policy without guardDeletes is not guarded": {policy: dp(nil), mutGroup: spent},
		"a delete within the budget is admitted and counts":           {policy: guarded(nil), counts: true},
		"a delete when the budget is spent is held":                   {policy: guarded(nil), mutGroup: spent, want: []string{RuleMaxUnavailable}, counts: true},
		"a delete inside the cooldown after an eviction is held": {policy: guarded(nil), records: evicted,
			want: []string{RuleCooldown}, counts: true},
		"an eviction inside the cooldown after a delete is held": {policy: guarded(nil), records: deleted, eviction: true,
			want: []string{RuleCooldown}, counts: true},
		"an eviction inside the cooldown after a delete, under a policy without guardDeletes, is held too": {
			policy:  dp(func(s *v1alpha1.DisruptionPolicySpec) { s.Cooldown = &metav1.Duration{Duration: time.Minute} }),
			records: deleted, eviction: true, want: []string{RuleCooldown}, counts: true},
		"a delete of a not-Ready pod is never held, under IfHealthyBudget either": {
			policy: guarded(func(s *v1alpha1.DisruptionPolicySpec) {
				s.UnhealthyPodEvictionPolicy = ptr.To(policyv1.IfHealthyBudget)
			}),
			mutGroup: func(g *workload.Group) { g.Pods[0].Ready, g.Pods[1].Ready = false, false }},
		"a delete of a pod on a lost node is never held": {policy: guarded(nil), mutGroup: spent, nodeLost: true},
		"a delete of a terminating pod is never held": {policy: guarded(nil), mutGroup: spent,
			mutPod: func(p *workload.Pod) { p.Terminating = true }},
		"a delete by an exempt identity is admitted and counts": {
			policy:   guarded(func(s *v1alpha1.DisruptionPolicySpec) { s.Exemptions.Users = []string{"break-glass"} }),
			mutGroup: spent, user: "break-glass", counts: true},
		"a delete under a budget of zero is refused for good": {
			policy: guarded(func(s *v1alpha1.DisruptionPolicySpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(0)) }),
			want:   []string{RuleMaxUnavailable}, never: true, counts: true},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := group("Deployment", 4)
			if c.mutGroup != nil {
				c.mutGroup(g)
			}
			pod := g.Pods[1]
			if c.mutPod != nil {
				c.mutPod(&pod)
			}
			in := Input{Pod: pod, PodLabels: map[string]string{"app": "agent"}, Group: g, Records: c.records,
				Policies: []v1alpha1.DisruptionPolicy{c.policy}, User: authenticationv1.UserInfo{Username: cmpOr(c.user, "alice")},
				Now: now, Delete: !c.eviction, NodeLost: c.nodeLost}
			d := Decide(in)
			var rules []string
			for _, v := range d.Violations {
				rules = append(rules, v.Rule)
			}
			if diff := cmp.Diff(c.want, rules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if len(c.want) > 0 && (d.Action() != decision.Deny || d.Never() != c.never) {
				t.Errorf("action %v, never %t; want Deny, never %t", d.Action(), d.Never(), c.never)
			}
			if d.Counts != c.counts {
				t.Errorf("Counts = %t, want %t", d.Counts, c.counts)
			}
		})
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// deleteScene is a guarded group of two Ready agents, one of them not Ready (the budget
// of one is spent), and a DELETE of the Ready one.
func deleteScene(tb testing.TB, guard bool, taints ...corev1.Taint) (*Handler, admission.Request) {
	tb.Helper()
	p := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "agents"}, Spec: v1alpha1.DisruptionPolicySpec{
		Mode: v1alpha1.ModeEnforce, MaxUnavailable: ptr.To(intstr.FromInt32(1)), GuardDeletes: guard,
		Targets: v1alpha1.PodTargets{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}}}}
	objs, pod := agentGroup(taints)
	h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, p)...),
		Clock: clock.RealClock{}, Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}}
	raw, err := json.Marshal(pod)
	if err != nil {
		tb.Fatal(err)
	}
	return h, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name: pod.Name, Namespace: pod.Namespace, Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: raw},
		UserInfo: authenticationv1.UserInfo{Username: "alice"}, DryRun: ptr.To(true),
		Options: runtime.RawExtension{Raw: []byte(`{"kind":"DeleteOptions","apiVersion":"meta.k8s.io/v1"}`)}}}
}

// agentGroup is a DaemonSet of two agents on node-0, agent-0 not Ready: the budget of one
// is spent, and agent-1 is the pod deleted.
func agentGroup(taints []corev1.Taint) ([]client.Object, *corev1.Pod) {
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: "ds"},
		Spec:   appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 2}}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}, Spec: corev1.NodeSpec{Taints: taints}}
	objs := []client.Object{ds, node,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", Labels: map[string]string{corev1.LabelMetadataName: "kube-system"}}}}
	var last *corev1.Pod
	for i, ready := range []corev1.ConditionStatus{corev1.ConditionFalse, corev1.ConditionTrue} {
		last = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: fmt.Sprintf("agent-%d", i), UID: types.UID(fmt.Sprintf("u%d", i)),
			Labels:          map[string]string{"app": "agent"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}},
			Spec: corev1.PodSpec{NodeName: "node-0"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready,
				LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}}}
		objs = append(objs, last)
	}
	return objs, last
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// TestDeleteRefusalShape: a held delete is 429 without a retry-after (client-go would
// retry one that carries it ten times inside the DELETE call), with holdfast's cause and
// a message that names the policy and says to evict instead; an unguarded delete and one
// of a pod on a lost node pass.
func TestDeleteRefusalShape(t *testing.T) {
	h, req := deleteScene(t, true)
	resp := h.Handle(context.Background(), req)
	if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusTooManyRequests {
		t.Fatalf("response = %+v, want 429", resp.Result)
	}
	if d := resp.Result.Details; d == nil || d.RetryAfterSeconds != 0 || len(d.Causes) != 1 || d.Causes[0].Type != CauseType {
		t.Errorf("details = %+v, want no retry-after and holdfast's cause", resp.Result.Details)
	}
	for _, want := range []string{"agents", "evict the pod instead", "kubectl drain without --disable-eviction"} {
		if !contains(resp.Result.Message, want) {
			t.Errorf("message %q does not say %q", resp.Result.Message, want)
		}
	}
	if h, req := deleteScene(t, false); !h.Handle(context.Background(), req).Allowed {
		t.Error("a delete under a policy without guardDeletes was held")
	}
	// A node this replica's cache has not seen yet (one that joined a moment ago) is no
	// lost node: its pods serve.
	h, req = deleteScene(t, true)
	objs, _ := agentGroup(nil)
	objs = slices.DeleteFunc(objs, func(o client.Object) bool { _, node := o.(*corev1.Node); return node })
	p := &v1alpha1.DisruptionPolicy{}
	if err := h.Reader.Get(context.Background(), client.ObjectKey{Name: "agents"}, p); err != nil {
		t.Fatal(err)
	}
	h.Reader = utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, p)...)
	if resp := h.Handle(context.Background(), req); resp.Allowed {
		t.Error("a delete of a pod on a node missing from the cache was let through")
	}
	for _, taint := range []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady, corev1.TaintNodeOutOfService} {
		h, req := deleteScene(t, true, corev1.Taint{Key: taint, Effect: corev1.TaintEffectNoExecute})
		if !h.Handle(context.Background(), req).Allowed {
			t.Errorf("a delete of a pod on a node tainted %s was held", taint)
		}
	}
}

// TestBadDeleteRequests: a DELETE whose old object is not the pod named is 400.
func TestBadDeleteRequests(t *testing.T) {
	h := &Handler{Clock: clock.RealClock{}}
	_, req := deleteScene(t, true)
	req.Name = "another"
	if resp := h.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("response = %+v, want 400", resp.Result)
	}
	req.OldObject.Raw = []byte(`{"metadata":`)
	if resp := h.Handle(context.Background(), req); resp.Allowed || resp.Result.Code != http.StatusBadRequest {
		t.Errorf("response = %+v, want 400", resp.Result)
	}
}

// TestDecodeDeleteReadsAsWhole holds decodeDelete, which decodes only what decisions read
// of the deleted pod, to the pod decoded whole, on a pod as the kubelet and its managers
// leave it: every field decisions read is read the same.
func TestDecodeDeleteReadsAsWhole(t *testing.T) {
	_, pod := agentGroup(nil)
	pod = pod.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	pod.ResourceVersion, pod.Annotations = "42", map[string]string{"kubectl.kubernetes.io/default-container": "agent"}
	pod.DeletionTimestamp = ptr.To(metav1.NewTime(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)))
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1",
		Subresource: "status", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{}}}`)}}}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
	pod.Spec.Containers = []corev1.Container{{Name: "agent", Image: "registry.k8s.io/agent:v1", Args: []string{"--v=2"},
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", Ready: true, RestartCount: 2}}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	var whole corev1.Pod
	if err := json.Unmarshal(raw, &whole); err != nil {
		t.Fatal(err)
	}
	got, err := decodeDelete(admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name: pod.Name, Namespace: pod.Namespace, Operation: admissionv1.Delete, OldObject: runtime.RawExtension{Raw: raw}}})
	if err != nil {
		t.Fatal(err)
	}
	// What decisions read: identity, labels, ownership, creation and deletion, node, grace
	// period, phase and conditions.
	want := &corev1.Pod{TypeMeta: whole.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: whole.Name, Namespace: whole.Namespace, UID: whole.UID,
		ResourceVersion: whole.ResourceVersion, Labels: whole.Labels, OwnerReferences: whole.OwnerReferences,
		CreationTimestamp: whole.CreationTimestamp, DeletionTimestamp: whole.DeletionTimestamp},
		Spec:   corev1.PodSpec{NodeName: whole.Spec.NodeName, TerminationGracePeriodSeconds: whole.Spec.TerminationGracePeriodSeconds},
		Status: corev1.PodStatus{Phase: whole.Status.Phase, Conditions: whole.Status.Conditions}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the deleted pod reads differently from the pod decoded whole (-whole +read):\n%s", diff)
	}
	if workload.PodOf(got) != workload.PodOf(&whole) {
		t.Errorf("PodOf reads %+v, want %+v", workload.PodOf(got), workload.PodOf(&whole))
	}
}
