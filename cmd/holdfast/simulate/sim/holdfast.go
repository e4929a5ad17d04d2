package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/controller"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// holdfast builds the simulated holdfast as the server builds it (app.Guards): the rollout
// and eviction handlers and a journal recorder per kind, over the in-memory cluster, on the
// virtual clock, their metrics registered with a registry of their own.
func (s *sim) holdfast() error {
	shared, err := app.NewShared(prometheus.NewRegistry())
	if err != nil {
		return err
	}
	// The guards read the store as holdfast's cache holds it (its transforms); the
	// writers are fed as the informers feed them, when the operators write.
	cache := informer.CacheView(s.store, app.CacheOptions(Namespace, nil))
	g := app.Guards{Cache: cache, Live: s.writer, Client: s.writer, Scheme: informer.NewScheme(), Clock: clock{s},
		Namespace: Namespace, Identity: "holdfast-simulate", Shared: shared}
	s.rollout, s.eviction = g.Handlers()
	s.writers = shared.Writers
	s.journals = shared.Journals
	s.recorders = map[v1alpha1.WorkloadKind]*controller.JournalRecorder{}
	for _, k := range workload.Kinds() {
		s.recorders[k] = g.JournalRecorder(k)
	}
	return nil
}

// record is the leader's journal recorder reconciling the workloads that changed.
func (s *sim) record() {
	if !s.rolloutPols {
		return
	}
	for _, w := range s.workloads {
		if !w.journalDue {
			continue
		}
		w.journalDue = false
		r := s.recorders[w.ref.Kind]
		if obj, err := workload.New(w.ref.Kind); err == nil && s.store.Get(context.Background(), client.ObjectKey{Namespace: w.ref.Namespace, Name: w.ref.Name}, obj) == nil &&
			!r.Concerns(context.Background(), obj) {
			continue // as the leader's watch of the workloads, which passes on only what concerns the recorder
		}
		if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: w.ref.Namespace, Name: w.ref.Name}}); err != nil {
			s.res.Errors = append(s.res.Errors, fmt.Sprintf("%.1fs recording the journal of %s: %v", s.at(), w.ref, err))
			continue
		}
		cm := &corev1.ConfigMap{}
		name := journal.Name(w.ref.Kind, w.ref.Namespace, w.ref.Name)
		if err := s.store.Get(context.Background(), client.ObjectKey{Namespace: Namespace, Name: name}, cm); err == nil {
			s.journals.Add(cm)
		} else {
			s.journals.Delete(name)
		}
		// What the RolloutPolicy controller reads for its WritersFighting condition.
		if f, ok := s.journals.Get(w.ref.Kind, w.ref.Namespace, w.ref.Name).Fight(s.revertWindow, s.now); ok && w.fig.WritersFighting == nil {
			w.fig.WritersFighting = []string{f.First, f.Second}
		}
	}
}

// send is the API server calling a webhook with an admission request for obj.
func (s *sim) send(handle func(context.Context, admission.Request) admission.Response, op admissionv1.Operation, ref workload.Ref,
	obj, old client.Object, user authenticationv1.UserInfo, fieldManager string) admission.Response {
	s.seq++
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint(s.seq)),
		Kind:     metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: string(ref.Kind)},
		Resource: metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: workload.Resource(ref.Kind)},
		Name:     ref.Name, Namespace: ref.Namespace, Operation: op, DryRun: ptr.To(false), UserInfo: user}}
	if fieldManager != "" {
		// The request's options, as the API server sends them: CreateOptions or UpdateOptions.
		req.Options.Raw, _ = json.Marshal(map[string]string{"fieldManager": fieldManager})
	}
	req.Object.Raw, _ = json.Marshal(obj)
	if old != nil {
		req.OldObject.Raw, _ = json.Marshal(old)
	}
	return handle(context.Background(), req)
}

// answer is a refusal as the requester sees it.
func answer(resp admission.Response) (string, string) {
	code, msg := int32(http.StatusForbidden), ""
	if r := resp.Result; r != nil {
		msg = r.Message
		if r.Code != 0 {
			code = r.Code
		}
	}
	switch code {
	case http.StatusTooManyRequests:
		return "deferred (429)", msg
	case http.StatusForbidden:
		return "refused (403)", msg
	}
	return fmt.Sprintf("failed (%d)", code), msg
}

func retryAfter(resp admission.Response) time.Duration {
	if r := resp.Result; r != nil && r.Details != nil {
		return time.Duration(r.Details.RetryAfterSeconds) * time.Second
	}
	return 0
}

// evict is the API server calling the eviction webhook for obj.
func (s *sim) evict(obj *corev1.Pod, user authenticationv1.UserInfo) admission.Response {
	s.seq++
	ev := &policyv1.Eviction{TypeMeta: metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: obj.Namespace, Name: obj.Name}}
	raw, _ := json.Marshal(ev)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint(s.seq)),
		Kind:        metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		SubResource: "eviction", Name: obj.Name, Namespace: obj.Namespace, Operation: admissionv1.Create,
		DryRun: ptr.To(false), UserInfo: user, Object: runtime.RawExtension{Raw: raw}}}
	return s.eviction.Handle(context.Background(), req)
}

// deletePod sends holdfast the API server's admission request for a DELETE of the pod by
// user, as the pod-delete entry of a DisruptionPolicy with guardDeletes does.
func (s *sim) deletePod(obj *corev1.Pod, user authenticationv1.UserInfo) admission.Response {
	s.seq++
	raw, _ := json.Marshal(obj)
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: types.UID(fmt.Sprint(s.seq)),
		Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name:     obj.Name, Namespace: obj.Namespace, Operation: admissionv1.Delete,
		DryRun: ptr.To(false), UserInfo: user, OldObject: runtime.RawExtension{Raw: raw}}}
	return s.eviction.Handle(context.Background(), req)
}
