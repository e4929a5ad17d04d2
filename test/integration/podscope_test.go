//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// liveReads is how many pod lists holdfast read from the API server because no pod watch
// covered them.
func liveReads(t *testing.T) float64 { return counter(t, "holdfast_pod_live_reads_total") }

// TestPodCacheFollowsWhatIsGuarded: holdfast caches the pods of the workloads its policies
// guard and no others; a pod read outside its watches is read from the API server, never
// answered empty; and a policy added while a drain runs widens the scope without a wrong
// answer or a moment un-Ready.
func TestPodCacheFollowsWhatIsGuarded(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	other := createNamespace(t, nil)
	// Unique values, so that no other test's policy covers them.
	agent, web, kiam := "agent-"+ns, "web-"+ns, "kiam-"+ns
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) {
		s.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": agent}}
	})
	agentRS, agents := appGroup(t, ns, agent, 3, 0)
	webRS, webs := appGroup(t, other, web, 3, 0)
	_, kiams := appGroup(t, ns, kiam, 4, 1)

	// The guarded pods reach a watch; the others never do.
	waitFor(t, 15*time.Second, "the guarded pods in holdfast's pod cache", func() bool {
		for _, p := range agents {
			if !podScope.Holds(ctx, client.ObjectKeyFromObject(p)) {
				return false
			}
		}
		return true
	})
	if w := podScope.Watching(); !slices.ContainsFunc(w, func(s string) bool { return strings.HasPrefix(s, "app in (") && strings.Contains(s, agent) }) ||
		slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, web) || strings.Contains(s, kiam) }) {
		t.Errorf("pod watches %q: want one of app=%s, and none of %s or %s", w, agent, web, kiam)
	}
	for _, p := range append(slices.Clone(webs), kiams...) {
		if podScope.Holds(ctx, client.ObjectKeyFromObject(p)) {
			t.Errorf("unguarded pod %s/%s is in holdfast's pod cache", p.Namespace, p.Name)
		}
	}

	// A read outside every watch is answered from the API server, in full.
	before := liveReads(t)
	var list corev1.PodList
	if err := informer.ListOwned(ctx, cached, &list, other, webRS.UID); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(webs) {
		t.Errorf("pods of the unguarded ReplicaSet read by owner: got %d, want %d", len(list.Items), len(webs))
	}
	if got := liveReads(t) - before; got != 1 {
		t.Errorf("live pod reads for the unguarded ReplicaSet: %v, want 1", got)
	}
	// A Deployment's ReplicaSets read one after another: one live list of its selector
	// answers them all, each with its own pods.
	web2 := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: web + "-2", Labels: webRS.Labels, OwnerReferences: webRS.OwnerReferences},
		Spec: *webRS.Spec.DeepCopy()}
	if err := k8s.Create(ctx, web2); err != nil {
		t.Fatal(err)
	}
	p2 := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: web + "-new", Labels: map[string]string{"app": web},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(web2, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
		Spec: webs[0].Spec}
	p2.Spec.NodeName = ""
	if err := k8s.Create(ctx, p2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the second ReplicaSet in holdfast's cache", func() bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(web2), &appsv1.ReplicaSet{}) == nil
	})
	time.Sleep(1100 * time.Millisecond) // past the last live list's reuse
	before = liveReads(t)
	for _, c := range []struct {
		rs   *appsv1.ReplicaSet
		want int
	}{{webRS, len(webs)}, {web2, 1}} {
		if err := informer.ListOwned(ctx, cached, &list, other, c.rs.UID); err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != c.want {
			t.Errorf("pods of ReplicaSet %s read by owner: got %d, want %d", c.rs.Name, len(list.Items), c.want)
		}
	}
	if got := liveReads(t) - before; got != 1 {
		t.Errorf("live pod reads for two ReplicaSets of one Deployment: %v, want 1", got)
	}

	// A covered read is the cache's.
	before = liveReads(t)
	if err := informer.ListOwned(ctx, cached, &list, ns, agentRS.UID); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(agents) {
		t.Errorf("pods of the guarded ReplicaSet read by owner: got %d, want %d", len(list.Items), len(agents))
	}
	if got := liveReads(t) - before; got != 0 {
		t.Errorf("live pod reads for the guarded ReplicaSet: %v, want 0", got)
	}

	// A drain of the agents runs: one evicted, the next deferred.
	if err := evict(t, ns, agents[0].Name, false); err != nil {
		t.Fatalf("the first agent's eviction: %v", err)
	}
	assertDeferred(t, evict(t, ns, agents[1].Name, false))

	// A policy for kiam arrives mid-drain. One kiam pod of four is not Ready and two may be
	// unavailable: one more may go and no other, answered at once, whether the widened
	// watch has synced or the kiam pods are read live.
	kp := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: ns + "-kiam"},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(2)),
			Targets: v1alpha1.PodTargets{NamespaceSelector: namespaceNamed(ns),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": kiam}}}}}
	if err := k8s.Create(ctx, kp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), kp) })
	intercepted(t, kp)
	if err := podScope.Ready(); err != nil {
		t.Errorf("holdfast un-Ready while its pod scope widens: %v", err)
	}
	if err := evict(t, ns, kiams[1].Name, false); err != nil {
		t.Errorf("the first kiam eviction, within the new policy's budget: %v", err)
	}
	assertDeferred(t, evict(t, ns, kiams[2].Name, false))
	assertDeferred(t, evict(t, ns, agents[2].Name, false))
	// Once the widened watch has synced, the same answers, from the cache.
	waitFor(t, 15*time.Second, "the kiam pods in holdfast's pod cache", func() bool {
		return podScope.Holds(ctx, client.ObjectKeyFromObject(kiams[3]))
	})
	before = liveReads(t)
	assertDeferred(t, evict(t, ns, kiams[3].Name, false))
	assertDeferred(t, evict(t, ns, agents[2].Name, false))
	if got := liveReads(t) - before; got != 0 {
		t.Errorf("live pod reads once the widened watch synced: %v, want 0", got)
	}
	// The not-Ready kiam pod may go: it serves nothing.
	if err := evict(t, ns, kiams[0].Name, false); err != nil {
		t.Errorf("evicting the not-Ready kiam pod: %v", err)
	}
	if err := podScope.Ready(); err != nil {
		t.Errorf("holdfast un-Ready after its pod scope widened: %v", err)
	}
}

// waitFor polls cond every 20 ms until it holds, or fails the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWorkloadWalksReadTheCacheInPlace: the walks over every workload of a kind (a
// policy's status, its fleet, the pod scope's plan) read holdfast's informer cache in place,
// through the cache itself and through a client that reads from it: the object handed out
// twice is the same object, not a copy made per walk.
func TestWorkloadWalksReadTheCacheInPlace(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	d := utiltesting.MakeDeployment(ns, "walked").Replicas(1).Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	find := func(r client.Reader) client.Object {
		var found client.Object
		if err := workload.Each(ctx, r, v1alpha1.KindDeployment, func(o client.Object) {
			if o.GetNamespace() == ns && o.GetName() == "walked" {
				found = o
			}
		}); err != nil {
			t.Fatal(err)
		}
		return found
	}
	eventually(t, "the cache holds the Deployment", func() bool { return find(cached) != nil })
	viaClient := informer.WithInformers(k8s, cached.(crcache.Informers))
	if a, b, c := find(cached), find(cached), find(viaClient); a != b || a != c {
		t.Errorf("walks handed out copies (%p, %p, %p), want the cache's own object", a, b, c)
	}
}

// TestCacheHoldsWorkloadTemplatesPacked: the cache keeps a workload's pod template packed
// (workload.Pack), its labels typed for the selections, and From reads it as the API
// server has it, before and after a change of the template.
func TestCacheHoldsWorkloadTemplatesPacked(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	d := utiltesting.MakeDeployment(ns, "packed").Replicas(1).Container("server", "--server-count=1", "--log-level=info").Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	for _, image := range []string{"", "registry.example/server:2"} {
		live := &appsv1.Deployment{}
		if image != "" {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
				t.Fatal(err)
			}
			live.Spec.Template.Spec.Containers[0].Image = image
			if err := k8s.Update(ctx, live); err != nil {
				t.Fatal(err)
			}
		}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), live); err != nil {
			t.Fatal(err)
		}
		want, err := workload.Fingerprint(&live.Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		held := &appsv1.Deployment{}
		eventually(t, "the cache holds the Deployment's template "+want[:10], func() bool {
			return cached.Get(ctx, client.ObjectKeyFromObject(d), held) == nil && held.Annotations[workload.FingerprintAnnotation] == want
		})
		if held.Spec.Template.Spec.Containers != nil || held.Annotations[workload.PackedTemplateAnnotation] == "" {
			t.Fatalf("the cached template is not packed: %+v", held.Spec.Template)
		}
		if !equality.Semantic.DeepEqual(held.Spec.Template.Labels, live.Spec.Template.Labels) {
			t.Errorf("cached template labels %v, want %v", held.Spec.Template.Labels, live.Spec.Template.Labels)
		}
		w, err := workload.From(held)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := w.Template.Spec()
		if err != nil || !equality.Semantic.DeepEqual(spec, &live.Spec.Template) {
			t.Errorf("the cached template reads as %+v (%v), want the API server's %+v", spec, err, live.Spec.Template)
		}
		if f, ok, err := w.Template.Flag("server", "--server-count"); err != nil || !ok || f.Value != "1" {
			t.Errorf("--server-count reads as %+v, %v, %v", f, ok, err)
		}
	}
}

// revisionLiveReads is how many ReplicaSet and ControllerRevision reads holdfast made of the
// API server because no watch held them.
func revisionLiveReads(t *testing.T) float64 {
	return counter(t, "holdfast_revision_live_reads_total")
}

// TestRevisionsFollowWhatIsGuarded: holdfast caches the ReplicaSets and ControllerRevisions
// of the workloads its policies guard, in the watches that hold their pods, and no others:
// at a management cluster's scale the others are most of what it would cache. A read of
// the others is the API server's, in full, never an empty answer.
func TestRevisionsFollowWhatIsGuarded(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	other := createNamespace(t, nil)
	agent, web := "agent-"+ns, "web-"+ns
	agentRS, _ := appGroup(t, ns, agent, 2, 0)
	webRS, _ := appGroup(t, other, web, 2, 0)
	apiRS, _ := appGroup(t, other, "api-"+ns, 2, 0)
	// A StatefulSet of each, with a revision as kube's controller labels it: its template's
	// labels and its hash.
	revisionOf := func(namespace, app string) (*appsv1.StatefulSet, *appsv1.ControllerRevision) {
		t.Helper()
		tmpl := utiltesting.MakeDeployment(namespace, app).Obj().Spec
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: app + "-sts"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: tmpl.Selector, Template: tmpl.Template}}
		if err := k8s.Create(ctx, sts); err != nil {
			t.Fatal(err)
		}
		crLabels := map[string]string{appsv1.ControllerRevisionHashLabelKey: "7d9c8b"}
		for k, v := range sts.Spec.Template.Labels {
			crLabels[k] = v
		}
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: sts.Name + "-7d9c8b", Labels: crLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
			Revision: 1}
		tj, err := json.Marshal(sts.Spec.Template)
		if err != nil {
			t.Fatal(err)
		}
		cr.Data.Raw = []byte(`{"spec":{"template":` + strings.Replace(string(tj), "{", `{"$patch":"replace",`, 1) + `}}`)
		if err := k8s.Create(ctx, cr); err != nil {
			t.Fatal(err)
		}
		return sts, cr
	}
	agentSts, agentCR := revisionOf(ns, agent)
	webSts, webCR := revisionOf(other, web)
	// The policy comes last: its watch's first list, streamed as a watch, holds them.
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) {
		s.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": agent}}
	})

	waitFor(t, 15*time.Second, "the guarded workloads' ReplicaSet and revision in holdfast's cache", func() bool {
		return podScope.HoldsObject(ctx, agentRS) && podScope.HoldsObject(ctx, agentCR)
	})
	time.Sleep(500 * time.Millisecond) // the unguarded ones' events, had they been watched
	for _, obj := range []client.Object{webRS, webCR} {
		if podScope.HoldsObject(ctx, obj) {
			t.Errorf("%T %s/%s of an unguarded workload is in holdfast's cache", obj, obj.GetNamespace(), obj.GetName())
		}
	}

	// Held as their templates' fingerprints, the ones the API server's objects have: a
	// transform that sees an object twice (the first list does) must not fingerprint the
	// template it has emptied.
	for _, obj := range []client.Object{&appsv1.ReplicaSet{}, &appsv1.ControllerRevision{}} {
		key := client.ObjectKeyFromObject(agentRS)
		if _, ok := obj.(*appsv1.ControllerRevision); ok {
			key = client.ObjectKeyFromObject(agentCR)
		}
		if err := k8s.Get(ctx, key, obj); err != nil {
			t.Fatal(err)
		}
		if _, err := history.Fingerprint(obj); err != nil {
			t.Fatal(err)
		}
		want := obj.GetAnnotations()[workload.FingerprintAnnotation]
		held := obj.DeepCopyObject().(client.Object)
		if err := cached.Get(ctx, key, held); err != nil {
			t.Fatal(err)
		}
		if got := held.GetAnnotations()[workload.FingerprintAnnotation]; want == "" || got != want {
			t.Errorf("%T %s held with the fingerprint %q, want %q (its template's)", obj, key, got, want)
		}
	}

	owner := func(obj client.Object) types.UID { return metav1.GetControllerOf(obj).UID }
	for _, c := range []struct {
		what      string
		namespace string
		owner     types.UID
		list      client.ObjectList
		live      float64
	}{
		{"the guarded Deployment's ReplicaSets", ns, owner(agentRS), &appsv1.ReplicaSetList{}, 0},
		{"the guarded StatefulSet's revisions", ns, agentSts.UID, &appsv1.ControllerRevisionList{}, 0},
		{"the unguarded Deployment's ReplicaSets", other, owner(webRS), &appsv1.ReplicaSetList{}, 1},
		// Read by its Deployment's selector, as the cache holds the Deployment, not by its
		// namespace: another Deployment's ReplicaSets there, a moment later, are a read of
		// their own (a namespace's list, kept a second, would have answered them; in a
		// namespace of hundreds of workloads it is megabytes per request).
		{"another unguarded Deployment's ReplicaSets, in the same namespace", other, owner(apiRS), &appsv1.ReplicaSetList{}, 1},
		{"the unguarded StatefulSet's revisions", other, webSts.UID, &appsv1.ControllerRevisionList{}, 1},
	} {
		before := revisionLiveReads(t)
		if err := informer.ListOwned(ctx, cached, c.list, c.namespace, c.owner); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if n := meta.LenList(c.list); n != 1 {
			t.Errorf("%s read by owner: %d, want 1", c.what, n)
		}
		if got := revisionLiveReads(t) - before; got != c.live {
			t.Errorf("%s: %v reads of the API server, want %v", c.what, got, c.live)
		}
	}
	// A ReplicaSet read by name (a pod's owner) outside the watches is the API server's.
	before := revisionLiveReads(t)
	for _, rs := range []*appsv1.ReplicaSet{agentRS, webRS} {
		var got appsv1.ReplicaSet
		if err := cached.Get(ctx, client.ObjectKeyFromObject(rs), &got); err != nil || got.UID != rs.UID {
			t.Errorf("ReplicaSet %s/%s read by name: %v, UID %s", rs.Namespace, rs.Name, err, got.UID)
		}
	}
	if got := revisionLiveReads(t) - before; got != 1 {
		t.Errorf("ReplicaSets read by name: %v reads of the API server, want 1 (the unguarded one's)", got)
	}
}

// TestANamespaceWatchServesItsReads: a guarded workload whose selector requires no value
// of any key is watched by its namespace; that watch serves its pods, ReplicaSets and their
// reads by owner like any other, and a drain of it is judged from them.
func TestANamespaceWatchServesItsReads(t *testing.T) {
	ctx := context.Background()
	ns := createNamespace(t, nil)
	app, tier := "free-"+ns, "tier-"+ns
	d := utiltesting.MakeDeployment(ns, app).Replicas(3).Obj()
	d.Spec.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: tier, Operator: metav1.LabelSelectorOpExists}}}
	d.Spec.Template.Labels = map[string]string{tier: "x", "app": app}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	rsLabels := map[string]string{tier: "x", "app": app, appsv1.DefaultDeploymentUniqueLabelKey: "h1"}
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app + "-h1", Labels: rsLabels,
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: rsLabels}, Template: d.Spec.Template}}
	rs.Spec.Template.Labels = rsLabels
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := range 3 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%d", app, i), Labels: rsLabels,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(rs, appsv1.SchemeGroupVersion.WithKind("ReplicaSet"))}},
			Spec: d.Spec.Template.Spec}
		if err := k8s.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Hour))}}}
		if err := k8s.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	disruptionPolicy(t, ns, func(s *v1alpha1.DisruptionPolicySpec) {
		s.Targets.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}
	})
	waitFor(t, 15*time.Second, "the namespace's watch holding the pods and the ReplicaSet", func() bool {
		return slices.Contains(podScope.Watching(), "every pod in namespace "+ns) &&
			podScope.HoldsObject(ctx, rs) && podScope.HoldsObject(ctx, pods[2])
	})

	beforePods, beforeRevisions := liveReads(t), revisionLiveReads(t)
	var got corev1.Pod
	if err := cached.Get(ctx, client.ObjectKeyFromObject(pods[0]), &got); err != nil || got.UID != pods[0].UID || len(got.Status.Conditions) != 1 {
		t.Errorf("pod read by name: %v, %+v", err, got.ObjectMeta)
	}
	var list corev1.PodList
	if err := informer.ListOwned(ctx, cached, &list, ns, rs.UID); err != nil || len(list.Items) != 3 {
		t.Errorf("pods read by owner: %d, %v; want 3", len(list.Items), err)
	}
	var sets appsv1.ReplicaSetList
	if err := informer.ListOwned(ctx, cached, &sets, ns, d.UID); err != nil || len(sets.Items) != 1 {
		t.Errorf("ReplicaSets read by owner: %d, %v; want 1", len(sets.Items), err)
	}
	var held appsv1.ReplicaSet
	if err := cached.Get(ctx, client.ObjectKeyFromObject(rs), &held); err != nil || held.UID != rs.UID {
		t.Errorf("ReplicaSet read by name: %v", err)
	}
	if p, r := liveReads(t)-beforePods, revisionLiveReads(t)-beforeRevisions; p != 0 || r != 0 {
		t.Errorf("reads the namespace's watch covers went to the API server: %v of pods, %v of ReplicaSets", p, r)
	}
	// A drain: one may go, the next waits.
	if err := evict(t, ns, pods[0].Name, false); err != nil {
		t.Fatalf("the first eviction: %v", err)
	}
	assertDeferred(t, evict(t, ns, pods[1].Name, false))
}
