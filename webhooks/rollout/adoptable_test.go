package rollout

import (
	"context"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestCreateReadsWhatItAdoptsLive: tenant-a's Deployment web ran A; outside the policy's
// selection (its journal retired with A current, or none at all) it was edited to B, and
// B's ReplicaSet made pods; then it was deleted with --cascade=orphan and created again,
// selected, with C. This replica's cache does not show B's ReplicaSet yet. kube's new
// Deployment adopts both ReplicaSets, so C would be a third template with pods: the CREATE
// reads what it adopts from the API server and is refused under settle (B's rollout, which
// the deleted workload left unfinished). The read shares
// the request's one deadline with the namespace's live read before it.
func TestCreateReadsWhatItAdoptsLive(t *testing.T) {
	s := informer.NewScheme()
	selector := map[string]string{"app": "web"}
	p := utiltesting.MakeRolloutPolicy("tenants").Selector(map[string]string{"tier": "frontend"}).NamespaceSelector(map[string]string{"env": "prod"}).Obj()
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{}
	template := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:" + image}}}}
	}
	set := func(image, hash string, revision string) *appsv1.ReplicaSet {
		labels := map[string]string{"app": "web", appsv1.DefaultDeploymentUniqueLabelKey: hash}
		tpl := template(image)
		tpl.Labels = labels
		return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web-" + hash, UID: types.UID("rs-" + hash), Labels: labels,
			Annotations: map[string]string{"deployment.kubernetes.io/revision": revision}, CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
			Spec:   appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: tpl},
			Status: appsv1.ReplicaSetStatus{Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2}}
	}
	setA, setB := set("A", "aaaa", "1"), set("B", "bbbb", "2")
	cachedNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a"}}
	liveNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{"env": "prod"}}}
	cache := fake.NewClientBuilder().WithScheme(s).WithObjects(cachedNS, p, setA).Build()

	web := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web", UID: "web-2", Labels: map[string]string{"tier": "frontend"}},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: selector}, Template: template("C")}}
	req := request(admissionv1.Create, "Deployment", mustJSON(t, web), nil)
	req.Resource.Resource, req.Name = "deployments", "web"

	sumA, _ := workload.FromSpec(ptr.To(setA.Spec.Template), "").Sum()
	retired := journal.Store{}
	j := &journal.Journal{Kind: v1alpha1.KindDeployment, Namespace: "tenant-a", Name: "web", UID: "web-1", Generation: 1,
		Deleted:   ptr.To(time.Now().Add(-10 * time.Minute)),
		Revisions: []journal.Revision{{Template: sumA, Since: time.Now().Add(-time.Hour), Finished: ptr.To(time.Now().Add(-time.Hour)), Progressed: time.Now().Add(-time.Hour)}},
		Observed:  &journal.Observed{Revision: 1, Template: sumA}}
	cm, err := journal.Encode(j, "holdfast-system")
	if err != nil {
		t.Fatal(err)
	}
	retired.Add(cm)

	for name, journals := range map[string]*journal.Store{"no journal": {}, "a journal retired while it was not guarded": &retired} {
		t.Run(name, func(t *testing.T) {
			deadlines := map[string]time.Time{}
			noted := func(what string, ctx context.Context) {
				d, ok := ctx.Deadline()
				if !ok {
					t.Errorf("the live read of %s has no deadline", what)
				}
				deadlines[what] = d
			}
			live := interceptor.NewClient(fake.NewClientBuilder().WithScheme(s).WithObjects(liveNS, setA, setB).Build(), interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					noted("the namespace", ctx)
					return c.Get(ctx, key, obj, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
					if _, ok := list.(*appsv1.ReplicaSetList); ok {
						noted("the ReplicaSets", ctx)
					}
					return c.List(ctx, list, opts...)
				}})
			h := &Handler{Reader: cache, Live: live, Decoder: admission.NewDecoder(s), Clock: clocktesting.NewFakePassiveClock(time.Now()), Journals: journals}
			resp := h.Handle(context.Background(), req)
			if resp.Allowed || !strings.Contains(resp.Result.Message, "[tenants/settle]") {
				t.Errorf("a CREATE of C adopting A's and B's pods: %+v, want refused under settle", resp.Result)
			}
			if ns, rs := deadlines["the namespace"], deadlines["the ReplicaSets"]; ns.IsZero() || !ns.Equal(rs) {
				t.Errorf("deadlines %v: want the namespace's and the ReplicaSets' reads under one", deadlines)
			}
			// From the cache alone, the same CREATE reads one template with pods.
			h.Live = nil
			if resp := h.Handle(context.Background(), req); !resp.Allowed {
				t.Errorf("from a cache without B's ReplicaSet: %+v, want admitted (which is why it is read live)", resp.Result)
			}
		})
	}
}
