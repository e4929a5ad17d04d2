package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// cluster is what holdfast's cache holds of one workload in tenant-a (its revisions,
// pods and nodes, one policy), the journal the leader wrote of it, and the real Handler
// deciding requests on it: kube's controllers are played by the test.
type cluster struct {
	t        *testing.T
	reader   *utiltesting.MemReader
	journals *journal.Store
	journal  *journal.Journal
	obj      client.Object
	now      time.Time
}

func newCluster(t *testing.T, p *v1alpha1.RolloutPolicy, now time.Time, objs ...client.Object) *cluster {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-a", Labels: map[string]string{corev1.LabelMetadataName: "tenant-a"}}}
	return &cluster{t: t, now: now, journals: &journal.Store{},
		reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, append([]client.Object{ns, p}, objs...)...)}
}

// put stores new objects in the cache as the informers would (revisions slimmed).
func (c *cluster) put(objs ...client.Object) {
	c.t.Helper()
	for _, o := range objs {
		if _, err := history.Slim(o); err != nil {
			c.t.Fatal(err)
		}
		c.reader.Put(o)
	}
}

// record is the leader's recorder looking at the workload now: it observes the cache and
// writes the journal, which every replica's store then serves.
func (c *cluster) record() {
	c.t.Helper()
	w, err := workload.From(c.obj)
	if err != nil {
		c.t.Fatal(err)
	}
	h, err := history.Read(context.Background(), c.reader, w)
	if err != nil {
		c.t.Fatal(err)
	}
	cm, err := journal.Encode(journal.Observe(c.journal, w, h, nil, c.now), "holdfast-system")
	if err != nil {
		c.t.Fatal(err)
	}
	if c.journal, err = journal.Decode(cm); err != nil {
		c.t.Fatal(err)
	}
	c.journals.Add(cm)
}

// update sends an UPDATE of the workload from its stored form to next through the
// Handler, and stores next when it is admitted.
func (c *cluster) update(next client.Object) admission.Response {
	c.t.Helper()
	kind := c.obj.GetObjectKind().GroupVersionKind().Kind
	h := &Handler{Reader: c.reader, Decoder: admission.NewDecoder(informer.NewScheme()), Clock: clocktesting.NewFakePassiveClock(c.now),
		Matcher: policy.NewMatcher(), Journals: c.journals}
	resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Kind: metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: kind},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: strings.ToLower(kind) + "s"},
		Namespace: c.obj.GetNamespace(), Name: c.obj.GetName(), Operation: admissionv1.Update,
		Object: runtime.RawExtension{Raw: mustJSON(c.t, next)}, OldObject: runtime.RawExtension{Raw: mustJSON(c.t, c.obj)},
	}})
	if resp.Allowed {
		c.obj = next
		c.reader.Put(next)
	}
	return resp
}

func controlledBy(o client.Object) []metav1.OwnerReference {
	kind := o.GetObjectKind().GroupVersionKind().Kind
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: o.GetName(), UID: o.GetUID(), Controller: ptr.To(true)}}
}

func refusal(resp admission.Response) string {
	if resp.Result == nil {
		return ""
	}
	return resp.Result.Message
}

// agentTemplate is the pod template of the konnectivity-agent DaemonSet at an image tag.
func agentTemplate(tag string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "konnectivity-agent"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "konnectivity-agent", Image: "registry.k8s.io/kas-network-proxy/proxy-agent:" + tag}}}}
}

// TestDaemonSetStallIgnoresNodesJoining: a DaemonSet's rollout from v0.31.0 to v0.32.0 is
// stuck (node-1's new pod got Ready, node-2's never does, kube replaces no more) while
// nodes keep joining, each getting a pod of v0.32.0 that becomes Ready. Those pods are the
// cluster growing, not the rollout progressing: the stall clock runs from node-1's
// replacement, so the fix (v0.32.1) is refused until stallAfter has passed since then, and
// admitted once it has, although a node joined a minute ago.
func TestDaemonSetStallIgnoresNodesJoining(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p := utiltesting.MakeRolloutPolicy("agents").Kinds(v1alpha1.KindDaemonSet).Selector(map[string]string{"app": "konnectivity-agent"}).Obj()
	p.Spec.Rules.Settle = &v1alpha1.SettleRule{StallAfter: &metav1.Duration{Duration: 5 * time.Minute}}
	c := newCluster(t, p, t0.Add(-10*time.Minute))

	ds := &appsv1.DaemonSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "konnectivity-agent", UID: "ds", Generation: 2, Labels: map[string]string{"app": "konnectivity-agent"}},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "konnectivity-agent"}}, Template: agentTemplate("v0.32.0")}}
	c.obj = ds
	revision := func(hash, tag string, n int64, created time.Time) *appsv1.ControllerRevision {
		raw, err := json.Marshal(map[string]any{"spec": map[string]any{"template": agentTemplate(tag)}})
		if err != nil {
			t.Fatal(err)
		}
		return &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "konnectivity-agent-" + hash, UID: types.UID("cr-" + hash),
			CreationTimestamp: metav1.NewTime(created), OwnerReferences: controlledBy(ds)}, Revision: n, Data: runtime.RawExtension{Raw: raw}}
	}
	nodes, pods := map[string]bool{}, map[string]*corev1.Pod{}
	// run puts a pod of the revision hash on a node, created and Ready (or not) at now.
	run := func(node, hash string, ready bool) {
		if !nodes[node] {
			nodes[node] = true
			c.put(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, CreationTimestamp: metav1.NewTime(c.now)}})
		}
		if old := pods[node]; old != nil {
			c.reader.Remove(old)
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "konnectivity-agent-" + node, UID: types.UID("pod-" + node + hash),
			Labels: map[string]string{"app": "konnectivity-agent", appsv1.ControllerRevisionHashLabelKey: hash}, CreationTimestamp: metav1.NewTime(c.now),
			OwnerReferences: controlledBy(ds)}, Spec: corev1.PodSpec{NodeName: node},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(c.now)}}}}
		pods[node] = pod
		c.put(pod)
	}
	// status is what kube's DaemonSet controller reports of the pods.
	status := func() {
		var updated, available int32
		for _, p := range pods {
			if p.Labels[appsv1.ControllerRevisionHashLabelKey] == "b" {
				updated++
			}
			if p.Status.Conditions[0].Status == corev1.ConditionTrue {
				available++
			}
		}
		n := int32(len(pods))
		ds.Status = appsv1.DaemonSetStatus{ObservedGeneration: ds.Generation, DesiredNumberScheduled: n, CurrentNumberScheduled: n,
			UpdatedNumberScheduled: updated, NumberAvailable: available, NumberReady: available, NumberUnavailable: n - available}
		c.put(ds)
	}

	// Three nodes ran v0.31.0 for hours; v0.32.0 became current 10 minutes ago.
	c.now = t0.Add(-5 * time.Hour)
	for _, n := range []string{"node-1", "node-2", "node-3"} {
		run(n, "a", true)
	}
	c.now = t0.Add(-10 * time.Minute)
	c.put(revision("a", "v0.31.0", 1, t0.Add(-5*time.Hour)), revision("b", "v0.32.0", 2, c.now))
	status()
	c.record()
	// node-1 is replaced and Ready 9 minutes ago; node-2's replacement never gets Ready.
	c.now = t0.Add(-9 * time.Minute)
	run("node-1", "b", true)
	status()
	c.record()
	c.now = t0.Add(-8 * time.Minute)
	run("node-2", "b", false)
	status()
	c.record()

	fix := ds.DeepCopy()
	fix.Spec.Template, fix.Generation = agentTemplate("v0.32.1"), ds.Generation+1
	for i, at := range []time.Duration{-6 * time.Minute, -3 * time.Minute, -1 * time.Minute} {
		// A node joins; kube creates its pod from v0.32.0, which gets Ready.
		c.now = t0.Add(at)
		run(fmt.Sprintf("node-%d", 4+i), "b", true)
		status()
		c.record()
		if at == -6*time.Minute {
			// 3 minutes after the last progress: still rolling, the fix waits.
			if resp := c.update(fix.DeepCopy()); resp.Allowed || !strings.Contains(refusal(resp), RuleSettle) {
				t.Fatalf("the fix 3 minutes after the rollout last progressed: allowed=%t %q; want refused by %s", resp.Allowed, refusal(resp), RuleSettle)
			}
		}
	}
	c.now = t0
	if resp := c.update(fix.DeepCopy()); !resp.Allowed {
		t.Errorf("the fix of a rollout stuck for 9 minutes (stallAfter 5m) is refused because nodes joined since: %s", refusal(resp))
	}
}

// webTemplate is the pod template of the Deployment web at an image tag.
func webTemplate(tag string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "registry.example/web:" + tag}}}}
}

// TestRevertWindowCountsFlipsTheJournalMissed: under revertWindow alone, a Deployment goes
// from B to A (A left more than the window ago: not a return), back to B (the one return
// the window allows, cancelling A's unfinished rollout) and again to A, while the leader's
// journal still shows B, as it recorded it before the first flip. The journal has seen
// neither flip; the cluster has: kube renumbered A's ReplicaSet 3 and B's 4
// (revision-history 1 and 2). The third flip is a second return within the window and is
// refused; so is a fourth.
func TestRevertWindowCountsFlipsTheJournalMissed(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	p := utiltesting.MakeRolloutPolicy("web").Kinds(v1alpha1.KindDeployment).Selector(map[string]string{"app": "web"}).Obj()
	p.Spec.Rules.RevertWindow = &metav1.Duration{Duration: 10 * time.Minute}
	c := newCluster(t, p, t0.Add(-30*time.Minute))

	dep := &appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web", UID: "web", Generation: 2, Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: webTemplate("B")},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}}
	c.obj = dep
	sets := map[string]*appsv1.ReplicaSet{}
	for i, tag := range []string{"A", "B"} {
		rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "web-" + strings.ToLower(tag), UID: types.UID("rs-" + tag),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(i-2) * time.Hour)), OwnerReferences: controlledBy(dep),
			Annotations: map[string]string{"deployment.kubernetes.io/revision": fmt.Sprint(i + 1)}},
			Spec: appsv1.ReplicaSetSpec{Template: webTemplate(tag)}}
		rs.Spec.Template.Labels[appsv1.DefaultDeploymentUniqueLabelKey] = strings.ToLower(tag)
		sets[tag] = rs
	}
	sets["B"].Status = appsv1.ReplicaSetStatus{Replicas: 3, AvailableReplicas: 3, ReadyReplicas: 3}
	c.put(sets["A"], sets["B"], dep)
	c.record() // B current and finished; the leader looks no more

	revision := int64(2)
	flip := func(to string, at time.Duration) admission.Response {
		c.now = t0.Add(at)
		next := c.obj.(*appsv1.Deployment).DeepCopy()
		next.Spec.Template, next.Generation = webTemplate(to), next.Generation+1
		// Each rollout is under way when the next request comes: pods of both templates.
		next.Status = appsv1.DeploymentStatus{ObservedGeneration: next.Generation, Replicas: 4, UpdatedReplicas: 1, ReadyReplicas: 3, AvailableReplicas: 3}
		resp := c.update(next)
		if resp.Allowed {
			// kube's Deployment controller renumbers the ReplicaSet of the template it
			// returns to, keeping its old number (SetNewReplicaSetAnnotations).
			rs := sets[to].DeepCopy()
			revision++
			old := rs.Annotations["deployment.kubernetes.io/revision"]
			if h := rs.Annotations["deployment.kubernetes.io/revision-history"]; h != "" {
				old = h + "," + old
			}
			rs.Annotations["deployment.kubernetes.io/revision-history"] = old
			rs.Annotations["deployment.kubernetes.io/revision"] = fmt.Sprint(revision)
			rs.Status = appsv1.ReplicaSetStatus{Replicas: 1, AvailableReplicas: 1, ReadyReplicas: 1}
			sets[to] = rs
			c.reader.Put(rs) // slimmed already
		}
		return resp
	}
	if resp := flip("A", -3*time.Minute); !resp.Allowed {
		t.Fatalf("B -> A, A left 1h ago (outside the window): refused: %s", refusal(resp))
	}
	if resp := flip("B", -2*time.Minute); !resp.Allowed {
		t.Fatalf("A -> B, the first return within the window, cancelling A's rollout: refused: %s", refusal(resp))
	}
	if resp := flip("A", -1*time.Minute); resp.Allowed || !strings.Contains(refusal(resp), RuleRevertWindow) {
		t.Fatalf("B -> A, a second return within the window while the journal lags two flips: allowed=%t %q; want refused by %s",
			resp.Allowed, refusal(resp), RuleRevertWindow)
	}
	// Once the leader catches up, the journal records the flips kube numbered.
	c.now = t0
	c.record()
	if resp := flip("A", 30*time.Second); resp.Allowed || !strings.Contains(refusal(resp), RuleRevertWindow) {
		t.Errorf("B -> A after the journal caught up: allowed=%t %q; want refused by %s", resp.Allowed, refusal(resp), RuleRevertWindow)
	}
}
