package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/review"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// hostedScene is a tenant kube-apiserver Deployment (the 13 KB fixture) on revision 4 of
// 4 (2 minutes old), fully rolled out, under the sample hosted-control-plane policy with a
// minInterval of 1 minute, in the cache.
type hostedScene struct {
	reader   *utiltesting.MemReader
	old, new *appsv1.Deployment
	now      time.Time
	journals *journal.Store
}

func newHostedScene(tb testing.TB) hostedScene {
	return newScene(tb, sceneParams{image: "v1.37.2", replicas: 3, serverCount: 3, slim: true})
}

// sceneParams vary the hosted scene: the UPDATE's kube-apiserver image, replicas and
// --server-count; an unfinished rollout of the current revision (v1.37.1) from revision 3
// (v1.37.0), whose pods still serve; a policy with strategy lints too, and an UPDATE that
// drops kube-apiserver's readiness probe.
type sceneParams struct {
	image                 string
	replicas, serverCount int32
	rollingOut, lints     bool
	// slim drops the ReplicaSets' templates as holdfast's cache does (history.Slim);
	// otherwise they keep them next to their fingerprints.
	slim bool
}

func newScene(tb testing.TB, sp sceneParams) hostedScene {
	tb.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	old := utiltesting.HostedKubeAPIServer("tenant-a", 3, "v1.37.1")
	if sp.rollingOut {
		old.Status.UpdatedReplicas, old.Status.AvailableReplicas, old.Status.Replicas = 1, 2, 4
	}
	new := old.DeepCopy()
	new.Spec.Template.Spec.Containers[0].Image = "registry.k8s.io/kube-apiserver:" + sp.image
	new.Spec.Replicas = ptr.To(sp.replicas)
	args := new.Spec.Template.Spec.Containers[1].Args
	args[len(args)-1] = fmt.Sprintf("--server-count=%d", sp.serverCount)
	if sp.lints {
		new.Spec.Template.Spec.Containers[0].ReadinessProbe = nil // a finding the old object did not have
	}
	new.Generation++

	p := utiltesting.MakeRolloutPolicy("hosted-control-plane").Kinds(v1alpha1.KindDeployment).
		NamespaceSelector(map[string]string{"holdfast.dev/hosted-control-plane": "true"}).
		Selector(map[string]string{"app": "kube-apiserver"}).
		ArgMatchesReplicas("konnectivity-server", "--server-count").Obj()
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 10 * time.Minute}}
	p.Spec.Rules.RevertWindow = &metav1.Duration{Duration: 10 * time.Minute}
	p.Spec.Rules.MinInterval = &metav1.Duration{Duration: time.Minute}
	if sp.lints {
		p.Spec.Rules.Strategy = &v1alpha1.StrategyRule{ReadinessProbe: true, MaxUnavailable: ptr.To(intstr.FromInt32(1)), MinReadySeconds: ptr.To[int32](10),
			AntiAffinityTopologyKey: corev1.LabelHostname}
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{
			corev1.LabelMetadataName: "tenant-a", "holdfast.dev/hosted-control-plane": "true"}}},
		p,
	}
	// Revisions 3 (v1.37.0) and 4 (v1.37.1, current), the current one serving 3 Ready pods.
	for i, image := range []string{"v1.37.0", "v1.37.1"} {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
			Namespace: "tenant-a", Name: "kube-apiserver-" + image, UID: types.UID("rs-" + image),
			CreationTimestamp: metav1.NewTime(now.Add([]time.Duration{-time.Hour, -2 * time.Minute}[i])),
			Annotations:       map[string]string{"deployment.kubernetes.io/revision": []string{"3", "4"}[i]},
			OwnerReferences:   []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: old.Name, UID: old.UID, Controller: ptr.To(true)}},
		}}
		rs.Spec.Template = *utiltesting.HostedKubeAPIServer("tenant-a", 3, image).Spec.Template.DeepCopy()
		rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = "hash-" + image
		serving := []int32{0, 3}[i]
		if sp.rollingOut {
			serving = []int32{2, 1}[i]
		}
		rs.Status.Replicas, rs.Status.AvailableReplicas = serving, serving
		{
			for j := range serving {
				objs = append(objs, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: rs.Name + "-" + string(rune('a'+j)),
					UID: types.UID(rs.Name + string(rune('a'+j))), CreationTimestamp: metav1.NewTime(now.Add(-time.Minute)),
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: ptr.To(true)}}},
					Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue,
						LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}}})
			}
		}
		transform := history.Fingerprint
		if sp.slim {
			transform = history.Slim
		}
		if _, err := transform(rs); err != nil {
			tb.Fatal(err)
		}
		objs = append(objs, rs)
	}
	ownerIndex := func(obj client.Object) []string {
		if ref := metav1.GetControllerOf(obj); ref != nil {
			return []string{string(ref.UID)}
		}
		return nil
	}
	reader := utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: ownerIndex}, objs...)
	return hostedScene{reader: reader, old: old, new: new, now: now, journals: journalOf(tb, reader, old, p.Spec.Rules.ArgsMatchReplicas, now)}
}

// journalOf is the revision journal the leader keeps of w, as it would have recorded it
// over w's history by now.
func journalOf(tb testing.TB, r client.Reader, obj client.Object, flags []v1alpha1.ArgMatchesReplicas, now time.Time) *journal.Store {
	tb.Helper()
	w, err := workload.From(obj)
	if err != nil {
		tb.Fatal(err)
	}
	h, err := history.Read(context.Background(), r, w)
	if err != nil {
		tb.Fatal(err)
	}
	cm, err := journal.Encode(journal.Observe(nil, w, h, flags, now), "holdfast-system")
	if err != nil {
		tb.Fatal(err)
	}
	s := &journal.Store{}
	s.Add(cm)
	return s
}

// review is the AdmissionReview the API server sends for an UPDATE from old to new.
func (s hostedScene) review(tb testing.TB) []byte {
	tb.Helper()
	r := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             "0d4f6a39-6c5e-4f0a-b0a4-2a1f9c4e7d10",
			Kind:            metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Resource:        metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			RequestKind:     &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			RequestResource: &metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
			Name:            s.new.Name, Namespace: s.new.Namespace, Operation: admissionv1.Update,
			UserInfo: authenticationv1.UserInfo{Username: "system:serviceaccount:kamaji-system:kamaji-controller-manager",
				UID: "3c0f5ad2-1d8e-4b55-8f1c-0c9d8b1d4c11", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:kamaji-system", "system:authenticated"}},
			Object:    runtime.RawExtension{Raw: mustJSON(tb, s.new)},
			OldObject: runtime.RawExtension{Raw: mustJSON(tb, s.old)},
			DryRun:    ptr.To(false),
			Options:   runtime.RawExtension{Raw: []byte(`{"kind":"UpdateOptions","apiVersion":"meta.k8s.io/v1","fieldManager":"kamaji"}`)},
		},
	}
	return mustJSON(tb, r)
}

func (s hostedScene) handler(tb testing.TB) *Handler {
	sch := informer.NewScheme()
	return &Handler{Reader: s.reader, Decoder: admission.NewDecoder(sch), Clock: clocktesting.NewFakePassiveClock(s.now), Matcher: policy.NewMatcher(),
		Journals: s.journals}
}

// serve sends body to h as the API server does and decodes the answer.
func serve(tb testing.TB, h http.Handler, body []byte) admissionv1.AdmissionReview {
	tb.Helper()
	return decodeAnswer(tb, utiltesting.Repeat(h, Path, body)())
}

func decodeAnswer(tb testing.TB, rec *httptest.ResponseRecorder) admissionv1.AdmissionReview {
	tb.Helper()
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		tb.Fatalf("response %q: %v", rec.Body.String(), err)
	}
	return out
}

// BenchmarkRolloutReview measures one 13 KB Deployment UPDATE AdmissionReview that
// changes the kube-apiserver image, from the request body to the response body: decode,
// read the policy, namespace and history from the cache, decide, encode.
func BenchmarkRolloutReview(b *testing.B) {
	s := newHostedScene(b)
	body := s.review(b)
	b.Logf("AdmissionReview: %d bytes, object %d bytes", len(body), len(mustJSON(b, s.new)))
	h := review.NewWebhook(&admission.Webhook{Handler: s.handler(b)}, workload.DecodeObject)
	again := utiltesting.Repeat(h, Path, body)
	if r := decodeAnswer(b, again()); !r.Response.Allowed {
		b.Fatalf("denied: %v", r.Response.Result)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		again()
	}
}
