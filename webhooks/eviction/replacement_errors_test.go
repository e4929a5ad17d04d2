package eviction

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"

	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

type startsNothing struct{}

func (startsNothing) Replacement(context.Context, budget.Deadline, *corev1.Pod, map[string]string, authenticationv1.UserInfo) (decision.Violations, bool, error) {
	return nil, false, nil
}

// TestDeleteCollectionIsAdmittedPodByPod: a DELETE collection (DELETE
// /api/v1/namespaces/ns/pods?labelSelector=...) runs admission per pod under the
// collection's name, "" (apiserver handlers/delete.go DeleteCollection,
// rest.AdmissionToValidateObjectDeleteFunc). A RolloutPolicy's delete entry sends such a
// DELETE of every StatefulSet's or DaemonSet's pod in its namespaces; it was refused 400
// as a request naming another pod.
func TestDeleteCollectionIsAdmittedPodByPod(t *testing.T) {
	h, req := deleteScene(t, false) // a DisruptionPolicy without guardDeletes: nothing guards DELETEs
	h.Replacements = startsNothing{}
	req.Name = ""
	if resp := h.Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("a DELETE collection's per-pod DELETE: %+v, want allowed", resp.Result)
	}
}

type slowReplacement struct{ err error }

func (s slowReplacement) Replacement(context.Context, budget.Deadline, *corev1.Pod, map[string]string, authenticationv1.UserInfo) (decision.Violations, bool, error) {
	return nil, false, fmt.Errorf("reading the DaemonSet of pod: %w", s.err)
}

// TestReplacementReadSlowIsNotNow: the rollout guard's live read of the workload
// (Replacement) failing because the API server is overloaded is "not now" (429), as the
// owner's read is (TestOrphansWorkloadNotReadInTimeIsNotNow), not 500.
func TestReplacementReadSlowIsNotNow(t *testing.T) {
	objs, pod := agentGroup(nil)
	p := dp(nil)
	for _, err := range []error{apierrors.NewTooManyRequests("slow down", 1), apierrors.NewServerTimeout(appsv1.Resource("daemonsets"), "get", 1)} {
		h := &Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(objs, &p)...),
			APIReader: utiltesting.NewMemReader(nil, objs...), Clock: clocktesting.NewFakeClock(time.Now()),
			Ledgers: &budget.Ledgers{Live: fake.NewClientBuilder().Build(), Namespace: "holdfast-system", Identity: "replica-0"}, Holds: &Holds{},
			Replacements: slowReplacement{err}}
		resp := h.Handle(context.Background(), podEviction(pod, "alice"))
		if resp.Result == nil || resp.Result.Code != 429 {
			t.Errorf("%v: code %d, want 429 (a drain gives up on 500)", err, resp.Result.Code)
		}
	}
}

// TestNotReadyDeleteWaitsForNoOwnerRead: a DELETE of a pod that is not Ready, which a
// RolloutPolicy's delete entry sends (a DisruptionPolicy's pod-serving condition keeps it
// away), is never held (Decide); the handler reads the pod's workload all the same, and
// with the DaemonSet missing from this replica's cache and the API server slow it answered
// 429 (500 on any other error). It is admitted.
func TestNotReadyDeleteWaitsForNoOwnerRead(t *testing.T) {
	h, req := deleteScene(t, true)
	objs, _ := agentGroup(nil)
	var notReady *corev1.Pod
	var cached []client.Object
	for _, o := range objs {
		if q, ok := o.(*corev1.Pod); ok && q.Name == "agent-0" {
			notReady = q
		}
		if o.GetName() != "agent" {
			cached = append(cached, o)
		}
	}
	p := dp(func(s *v1alpha1.DisruptionPolicySpec) { s.GuardDeletes = true })
	h.Reader = utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append(cached, &p)...)
	h.APIReader = interceptor.NewClient(fake.NewClientBuilder().Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return apierrors.NewTooManyRequests("slow down", 1)
		}})
	h.Replacements = startsNothing{}
	raw, _ := json.Marshal(notReady)
	req.Name, req.OldObject.Raw = notReady.Name, raw
	if resp := h.Handle(context.Background(), req); !resp.Allowed {
		t.Errorf("DELETE of not-Ready %s: %d %s, want allowed (Decide never holds it)", notReady.Name, resp.Result.Code, resp.Result.Message)
	}
}
