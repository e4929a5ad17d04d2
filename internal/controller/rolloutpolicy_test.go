package controller

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
)

// TestFleetPolicyStatusListsWorkloadsOnce: the status of a policy with a fleet limit, a
// revert window and an audit lists each workload kind once per reconcile (not once for the
// count, again for the rollouts in flight, again for the writers and again for the audit),
// and every part still sees exactly the workloads the policy selects.
func TestFleetPolicyStatusListsWorkloadsOnce(t *testing.T) {
	sel := map[string]string{"app": "kube-apiserver"}
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: "control-planes", Generation: 1}, Spec: v1alpha1.RolloutPolicySpec{
		Targets: v1alpha1.WorkloadTargets{Selector: &metav1.LabelSelector{MatchLabels: sel}},
		Rules: v1alpha1.RolloutRules{
			Concurrency:  &v1alpha1.ConcurrencyRule{MaxInFlight: intstr.FromString("10%")},
			RevertWindow: &metav1.Duration{Duration: time.Hour},
		}}}
	objs := []client.Object{p}
	for i := range 3 {
		ns := fmt.Sprintf("tenant-%d", i)
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-apiserver", UID: types.UID(ns), Labels: sel}},
			&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other", UID: types.UID(ns + "-other")}})
	}
	objs = append(objs, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-0", Name: "etcd", UID: "etcd", Labels: sel}})
	lists := map[string]int{}
	c := interceptor.NewClient(fake.NewClientBuilder().WithScheme(informer.NewScheme()).WithObjects(objs...).
		WithStatusSubresource(&v1alpha1.RolloutPolicy{}).Build(), interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			lists[fmt.Sprintf("%T", list)]++
			return c.List(ctx, list, opts...)
		},
	})
	var audited []string
	r := &RolloutPolicyStatus{Client: c, Matcher: policy.NewMatcher(), Journals: &journal.Store{},
		Clock: clocktesting.NewFakePassiveClock(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)),
		Audit: func(_ *v1alpha1.RolloutPolicy, obj client.Object, _ map[string]string, _ time.Time) (decision.Violations, error) {
			audited = append(audited, obj.GetNamespace()+"/"+obj.GetName())
			return nil, nil
		}}
	if _, err := r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: p.Name}}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"*v1.DeploymentList", "*v1.StatefulSetList", "*v1.DaemonSetList"} {
		if lists[kind] != 1 {
			t.Errorf("%s listed %d times in one reconcile, want once (lists: %v)", kind, lists[kind], lists)
		}
	}
	if len(audited) != 4 {
		t.Errorf("audited %v, want the 4 selected workloads", audited)
	}
	var got v1alpha1.RolloutPolicy
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), &got); err != nil {
		t.Fatal(err)
	}
	if got.Status.WorkloadsMatched != 4 || got.Status.InFlight == nil || *got.Status.InFlight != 0 || got.Status.Violations == nil {
		t.Errorf("status %+v: want 4 matched, 0 in flight and the audit's count", got.Status)
	}
}
