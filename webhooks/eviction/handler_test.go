package eviction

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/pdb"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

func evictionRequest(kind, resource, sub, name string, body string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: kind},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: resource},
		SubResource: sub, Name: name, Namespace: "kube-system", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: []byte(body)},
	}}
}

// podEviction is the request of user's eviction of pod, as the API server sends it.
func podEviction(pod *corev1.Pod, user string) admission.Request {
	body, _ := json.Marshal(&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}})
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
		Kind:     metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"}, SubResource: "eviction",
		Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: body},
		UserInfo: authenticationv1.UserInfo{Username: user}}}
}

// TestBadEvictionRequests checks requests the API server itself would reject first, sent
// straight at the handler: each gets 400 with the reason, before any lookup.
func TestBadEvictionRequests(t *testing.T) {
	h := &Handler{Clock: clock.RealClock{}} // no reader: bad input must not reach one
	cases := map[string]admission.Request{
		"body names another pod":       evictionRequest("Eviction", "pods", "eviction", "agent-1", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"agent-2","namespace":"kube-system"}}`),
		"body in another namespace":    evictionRequest("Eviction", "pods", "eviction", "agent-1", `{"apiVersion":"policy/v1","kind":"Eviction","metadata":{"name":"agent-1","namespace":"default"}}`),
		"undecodable body":             evictionRequest("Eviction", "pods", "eviction", "agent-1", `{"metadata":`),
		"not an eviction":              evictionRequest("Pod", "pods", "", "agent-1", `{}`),
		"eviction of another resource": evictionRequest("Eviction", "nodes", "eviction", "agent-1", `{}`),
	}
	for name, req := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.Handle(context.Background(), req)
			if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || resp.Result.Message == "" {
				t.Errorf("response = %+v, want 400 with a reason", resp.Result)
			}
		})
	}
}

// TestTwoFloorsDeferTheEviction: while holdfast's generated PDB and another cover a pod
// kube checks against PDBs, kube would answer 500 to its eviction (a drain gives up on a
// 500): holdfast defers it instead, until the generator steps back. Two PDBs of others',
// and pods kube evicts without a PDB check, are left to kube.
func TestTwoFloorsDeferTheEviction(t *testing.T) {
	testNow := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent-1", Labels: map[string]string{"app": "agent"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	pending := running.DeepCopy()
	pending.Status.Phase = corev1.PodPending
	over := func(name string, managed bool, sel map[string]string) *policyv1.PodDisruptionBudget {
		p := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}}}
		if managed {
			// The generated floor of Deployment agent: its label, owner and name.
			p.Labels = pdb.Owned("agents")
			p.Name = pdb.Name(workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "kube-system", Name: "agent"})
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "agent", UID: "d", Controller: ptr.To(true)}}
		}
		p.CreationTimestamp = metav1.NewTime(testNow.Add(-10 * time.Second))
		return p
	}
	floorName := pdb.Name(workload.Ref{Kind: v1alpha1.KindDeployment, Namespace: "kube-system", Name: "agent"})
	agent := map[string]string{"app": "agent"}
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		pdbs []client.Object
		want string
	}{
		"the floor and another":            {pod: running, pdbs: []client.Object{over("floor", true, agent), over("theirs", false, agent)}, want: floorName + " and theirs"},
		"the floor alone":                  {pod: running, pdbs: []client.Object{over("floor", true, agent), over("other-pods", false, map[string]string{"app": "x"})}},
		"two of others":                    {pod: running, pdbs: []client.Object{over("a", false, agent), over("b", false, agent)}},
		"a Pending pod kube evicts freely": {pod: pending, pdbs: []client.Object{over("floor", true, agent), over("theirs", false, agent)}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := twoFloors(context.Background(), utiltesting.NewMemReader(nil, c.pdbs...), nil, c.pod, testNow)
			if err != nil || got != c.want {
				t.Errorf("twoFloors = %q, %v; want %q", got, err, c.want)
			}
		})
	}
	// The cache shows the floor alone; the API server already has the other PDB.
	floor, theirs := over("floor", true, agent), over("theirs", false, agent)
	got, err := twoFloors(context.Background(), utiltesting.NewMemReader(nil, floor), utiltesting.NewMemReader(nil, floor, theirs), running, testNow)
	if err != nil || got != floorName+" and theirs" {
		t.Errorf("a PDB the cache does not hold yet: twoFloors = %q, %v; want it read live", got, err)
	}
	// A forged managed-by label is no floor of holdfast's: kube answers for two PDBs of others'.
	forged := over("theirs-too", false, agent)
	forged.Labels = pdb.Owned("agents")
	if got, _ := twoFloors(context.Background(), utiltesting.NewMemReader(nil, forged, theirs), nil, running, testNow); got != "" {
		t.Errorf("a forged label: twoFloors = %q, want kube's answer", got)
	}
	// Both older than the grace: not the generator's moment, no deferral that could last forever.
	if got, _ := twoFloors(context.Background(), utiltesting.NewMemReader(nil, floor, theirs), nil, running, testNow.Add(overlapGrace)); got != "" {
		t.Errorf("an overlap older than %s: twoFloors = %q, want kube's answer", overlapGrace, got)
	}
}
