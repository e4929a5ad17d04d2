package rollout

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestNamespaceRelabelJudgesWorkloadsAsTheAPIServerHasThem: the namespace of StatefulSet
// db left a policy's selection; outside it, db went from v1 to v2 (100 s ago, rolled out)
// and back to v1 a moment ago, which this replica's cache does not show yet. The namespace
// is relabelled back in at once. Judged on the cached v2, the entry brings a template the
// journal never saw and passes; judged on the API server's v1, it is a return to v1 within
// revertWindow (v1 was left when v2's revision was created), and it is refused. A list the
// API server does not answer is "retry".
func TestNamespaceRelabelJudgesWorkloadsAsTheAPIServerHasThem(t *testing.T) {
	sc := newDBScene()
	t0, reader, sts := sc.t0, sc.reader, sc.sts
	p := utiltesting.MakeRolloutPolicy("dbs").Kinds(v1alpha1.KindStatefulSet).Selector(map[string]string{"tier": "db"}).Obj()
	p.Spec.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	p.Spec.Rules.RevertWindow = &metav1.Duration{Duration: 5 * time.Minute}
	reader.Put(p)
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
	reader.Put(sc.revision("a", "v1", 1, t0.Add(-3*time.Hour)))
	reader.Put(sts)
	j := observeNamed(reader, v1alpha1.KindStatefulSet, "tenant-a", "db", nil, nil, t0.Add(-3*time.Hour))
	j.Deleted = ptr.To(t0.Add(-2 * time.Minute)) // retired when the namespace left
	cm, err := journal.Encode(j, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	journals := &journal.Store{}
	journals.Add(cm)

	// Outside: v2, rolled out; every pod runs it. The cache shows this.
	reader.Put(sc.revision("b", "v2", 2, t0.Add(-100*time.Second)))
	sts.Generation, sts.Spec.Template = 2, sc.tmpl("v2")
	sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: 2, Replicas: 3, ReadyReplicas: 3, AvailableReplicas: 3, CurrentReplicas: 3, UpdatedReplicas: 3,
		CurrentRevision: "db-b", UpdateRevision: "db-b"}
	reader.Put(sts)
	for i := range 3 {
		pod := sc.pod(i)
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] = "db-b"
		reader.Put(pod)
	}
	// Back to v1 a moment ago: only the API server has it.
	back := sts.DeepCopy()
	back.Generation, back.Spec.Template = 3, sc.tmpl("v1")

	in := sc.ns.DeepCopy()
	in.Labels = map[string]string{corev1.LabelMetadataName: "tenant-a", "env": "prod"}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Namespace"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Name: "tenant-a", Operation: admissionv1.Update,
		UserInfo: authenticationv1.UserInfo{Username: "platform-admin"},
		Object:   runtime.RawExtension{Raw: mustJSON(t, in)}, OldObject: runtime.RawExtension{Raw: mustJSON(t, sc.ns)}}}
	handle := func(live client.Reader) admission.Response {
		h := &Handler{Reader: reader, Live: live, Clock: clocktesting.NewFakePassiveClock(t0), Matcher: policy.NewMatcher(), Journals: journals}
		return h.HandleNamespace(context.Background(), req)
	}
	if resp := handle(nil); !resp.Allowed {
		t.Fatalf("control, from the cache alone (v2, which the journal never saw): %+v, want admitted", resp.Result)
	}
	resp := handle(utiltesting.NewMemReader(nil, back))
	if resp.Allowed || resp.Result.Code != http.StatusForbidden || !strings.Contains(resp.Result.Message, "["+p.Name+"/"+RuleRevertWindow+"]") ||
		!strings.Contains(resp.Result.Message, "left outside the selection 1m40s ago") {
		t.Errorf("the namespace relabelled in over a return to v1 made outside a moment ago: %+v, want the revert window's refusal", resp.Result)
	}
	if resp := handle(failingReader{}); resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable {
		t.Errorf("the API server did not answer the list: %+v, want 503 retry", resp.Result)
	}
}

// failingReader is an API server that answers nothing in time.
type failingReader struct{}

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return context.DeadlineExceeded
}

func (failingReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return context.DeadlineExceeded
}
