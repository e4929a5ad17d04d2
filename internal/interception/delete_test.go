package interception

import (
	"context"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

func deletePolicy(name string, mut func(*v1alpha1.DisruptionPolicySpec)) v1alpha1.DisruptionPolicy {
	p := v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.DisruptionPolicySpec{GuardDeletes: true,
		Targets: v1alpha1.PodTargets{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}},
			Selector:          &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}}}}}
	if mut != nil {
		mut(&p.Spec)
	}
	return p
}

// conditions is the entry's matchConditions as the API server compiles them
// (k8s.io/apiserver's webhook matcher).
type conditions struct{ m matchconditions.Matcher }

func conditionsOf(w *admissionregistrationv1.ValidatingWebhook) conditions {
	return conditions{webhook.NewValidatingWebhookAccessor("uid", Name("holdfast"), w).
		GetCompiledMatcher(cel.NewConditionCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())))}
}

// check evaluates the conditions on a request's attributes (obj nil for a DELETE, old nil
// for a CREATE) and fails the test unless they pass it exactly when sent.
func (c conditions) check(t *testing.T, obj, old runtime.Object, gvk schema.GroupVersionKind, resource schema.GroupVersionResource, sub string,
	op admission.Operation, who string, sent bool) {
	t.Helper()
	meta := old
	if meta == nil {
		meta = obj
	}
	o, _ := apimeta.Accessor(meta)
	var opts runtime.Object = &metav1.UpdateOptions{}
	if op == admission.Delete {
		opts = &metav1.DeleteOptions{}
	}
	attrs := admission.NewAttributesRecord(obj, old, gvk, o.GetNamespace(), o.GetName(), resource, sub, op, opts, false, &user.DefaultInfo{Name: who})
	va, err := admission.NewVersionedAttributes(attrs, gvk, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := c.m.Match(context.Background(), va, nil, nil)
	if r.Error != nil {
		t.Fatalf("evaluating the matchConditions: %v", r.Error)
	}
	if r.Matches != sent {
		t.Errorf("sent = %t (failed condition %q), want %t", r.Matches, r.FailedConditionName, sent)
	}
}

// TestDeleteEntry: a policy with guardDeletes has a pod DELETE entry that selects its pods
// by namespace and labels and fails open unless the policy says Fail, whatever the
// evictions' default; a policy without it, or suspended, has none.
func TestDeleteEntry(t *testing.T) {
	ws, outcomes := Entries(nil, []v1alpha1.DisruptionPolicy{deletePolicy("agents", nil),
		deletePolicy("off", func(s *v1alpha1.DisruptionPolicySpec) { s.GuardDeletes = false }),
		deletePolicy("suspended", func(s *v1alpha1.DisruptionPolicySpec) { s.Suspend = true })}, settings)
	del := byType(ws, TypeDelete)
	if len(del) != 1 {
		t.Fatalf("want one delete entry, got %+v", del)
	}
	w := del[0]
	if r := w.Rules; len(r) != 1 || r[0].Operations[0] != admissionregistrationv1.Delete || r[0].Resources[0] != "pods" {
		t.Errorf("rules = %+v, want pod DELETEs", r)
	}
	if *w.FailurePolicy != admissionregistrationv1.Ignore || settings.Eviction.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("failurePolicy = %s with the evictions' default Fail, want Ignore", *w.FailurePolicy)
	}
	if w.ObjectSelector == nil || w.ObjectSelector.MatchLabels["k8s-app"] != "konnectivity-agent" {
		t.Errorf("objectSelector = %+v, want the policy's", w.ObjectSelector)
	}
	if w.ClientConfig.Service == nil || *w.ClientConfig.Service.Path != DeletePath {
		t.Errorf("client = %+v, want path %s", w.ClientConfig, DeletePath)
	}
	if o := outcomes[Key{Kind: "DisruptionPolicy", Name: "off"}]; o == nil || slices.ContainsFunc(o.Entries, func(e string) bool { return strings.HasSuffix(e, "."+TypeDelete) }) {
		t.Errorf("outcome of the policy without guardDeletes: %+v", o)
	}
	failing, _ := Entries(nil, []v1alpha1.DisruptionPolicy{deletePolicy("agents", func(s *v1alpha1.DisruptionPolicySpec) {
		s.FailurePolicy = ptr.To(v1alpha1.FailurePolicy("Fail"))
	})}, settings)
	if d := byType(failing, TypeDelete); len(d) != 1 || *d[0].FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("a policy that says Fail: %+v", d)
	}
}

// TestDeleteMatchConditions evaluates the delete entry's matchConditions as the API server
// does (k8s.io/apiserver's webhook matcher, on a DELETE's attributes: oldObject is the pod,
// object is null): only a delete of a serving pod by someone other than kube, holdfast or
// a configured deleter is sent.
func TestDeleteMatchConditions(t *testing.T) {
	s := settings
	s.NeverHeldDeleters = DefaultNeverHeldDeleters
	ws, _ := Entries(nil, []v1alpha1.DisruptionPolicy{deletePolicy("agents", nil)}, s)
	del := byType(ws, TypeDelete)
	if len(del) != 1 {
		t.Fatalf("want one delete entry, got %+v", ws)
	}
	matcher := conditionsOf(&del[0])

	serving := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "konnectivity-agent-x", Labels: map[string]string{"k8s-app": "konnectivity-agent"}},
			Spec:       corev1.PodSpec{NodeName: "node-1"},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	const alice = "alice"
	cases := map[string]struct {
		pod  *corev1.Pod
		user string
		sent bool
	}{
		"a person deletes a serving pod":                      {pod: serving(nil), user: alice, sent: true},
		"a drainer in kube-system deletes a serving pod":      {pod: serving(nil), user: "system:serviceaccount:kube-system:node-upgrader", sent: true},
		"a service account named like a controller elsewhere": {pod: serving(nil), user: "system:serviceaccount:tenant:replicaset-controller", sent: true},
		"a terminating pod":                                   {pod: serving(func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }), user: alice},
		"a Succeeded pod":                                     {pod: serving(func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }), user: alice},
		"a Failed pod":                                        {pod: serving(func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }), user: alice},
		"a Pending pod":                                       {pod: serving(func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }), user: alice},
		"a pod not Ready":                                     {pod: serving(func(p *corev1.Pod) { p.Status.Conditions[1].Status = corev1.ConditionFalse }), user: alice},
		"a pod with no status yet":                            {pod: serving(func(p *corev1.Pod) { p.Status = corev1.PodStatus{} }), user: alice},
		"the kubelet's final delete":                          {pod: serving(nil), user: "system:node:node-1"},
		"the replicaset controller":                           {pod: serving(nil), user: "system:serviceaccount:kube-system:replicaset-controller"},
		"the statefulset controller":                          {pod: serving(nil), user: "system:serviceaccount:kube-system:statefulset-controller"},
		"the daemonset controller":                            {pod: serving(nil), user: "system:serviceaccount:kube-system:daemon-set-controller"},
		"the job controller":                                  {pod: serving(nil), user: "system:serviceaccount:kube-system:job-controller"},
		"the garbage collector":                               {pod: serving(nil), user: "system:serviceaccount:kube-system:generic-garbage-collector"},
		"the namespace controller":                            {pod: serving(nil), user: "system:serviceaccount:kube-system:namespace-controller"},
		"taint eviction (node-controller)":                    {pod: serving(nil), user: "system:serviceaccount:kube-system:node-controller"},
		"the pod garbage collector":                           {pod: serving(nil), user: "system:serviceaccount:kube-system:pod-garbage-collector"},
		"the controller-manager as itself":                    {pod: serving(nil), user: "system:kube-controller-manager"},
		"the scheduler's preemption":                          {pod: serving(nil), user: "system:kube-scheduler"},
		"holdfast itself":                                     {pod: serving(nil), user: "system:serviceaccount:holdfast-system:holdfast"},
		"Karpenter at a NodeClaim's deadline":                 {pod: serving(nil), user: "system:serviceaccount:karpenter:karpenter"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			matcher.check(t, nil, c.pod, corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Delete, c.user, c.sent)
		})
	}
}

// TestRolloutEntrySendsRelabelsThroughStatus: the rollout entry names statefulsets/status
// and daemonsets/status (kube's status strategies keep their labels changeable) and not
// deployments/status (deploymentStatusStrategy keeps the old labels); its matchConditions,
// evaluated as the API server does on a status update (whose spec kube has put back),
// send a relabel and never a controller's status write.
func TestRolloutEntrySendsRelabelsThroughStatus(t *testing.T) {
	ws, _ := Entries([]v1alpha1.RolloutPolicy{rolloutPolicy("hosted", nil)}, nil, settings)
	entries := byType(ws, TypeRollout)
	if len(entries) != 1 {
		t.Fatalf("want one rollout entry, got %+v", ws)
	}
	w := entries[0]
	var statuses []string
	for _, r := range w.Rules {
		for _, res := range r.Resources {
			if strings.HasSuffix(res, "/status") {
				statuses = append(statuses, res)
				if !slices.Equal(r.Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) {
					t.Errorf("status rule operations %v, want UPDATE", r.Operations)
				}
			}
		}
	}
	if !slices.Equal(statuses, []string{"daemonsets/status", "statefulsets/status"}) {
		t.Errorf("status subresources %v, want daemonsets/status and statefulsets/status", statuses)
	}
	deployments, _ := Entries([]v1alpha1.RolloutPolicy{rolloutPolicy("web", func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}
	})}, nil, settings)
	if r := byType(deployments, TypeRollout)[0].Rules; len(r) != 1 {
		t.Errorf("a Deployment-only policy's entry has rules %+v, want its workloads only", r)
	}

	matcher := conditionsOf(&w)
	stored := &appsv1.StatefulSet{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "etcd", Labels: map[string]string{"app": "kube-apiserver"}},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3)}}
	written := stored.DeepCopy()
	written.Status = appsv1.StatefulSetStatus{Replicas: 3, ReadyReplicas: 3, ObservedGeneration: 2}
	relabelled := written.DeepCopy()
	relabelled.Labels = map[string]string{"app": "web"}
	for name, c := range map[string]struct {
		obj  *appsv1.StatefulSet
		sent bool
	}{
		"a controller's status write": {obj: written},
		"a relabel through status":    {obj: relabelled, sent: true},
	} {
		t.Run(name, func(t *testing.T) {
			matcher.check(t, c.obj, stored, appsv1.SchemeGroupVersion.WithKind("StatefulSet"), appsv1.SchemeGroupVersion.WithResource("statefulsets"), "status",
				admission.Update, "tenant", c.sent)
		})
	}
}

// TestReplacementEntries: a RolloutPolicy that targets StatefulSets or DaemonSets with a
// rule a pod's replacement is judged by (settle, minInterval, revertWindow, windows) has
// an eviction entry and a pod DELETE entry in its namespaces, so that the eviction or
// DELETE of a pod of an OnDelete workload, which kube replaces from a staged template,
// reaches the rollout guard with no DisruptionPolicy in the namespace. Both fail open
// whatever the policy says; the eviction entry is a DisruptionPolicy's when they select
// alike. The DELETE entry's matchConditions, evaluated as the API server does, send a
// DELETE of a pod a StatefulSet or DaemonSet controls, Ready or not, by anyone but kube
// and holdfast.
func TestReplacementEntries(t *testing.T) {
	agents := func(mut func(*v1alpha1.RolloutPolicySpec)) v1alpha1.RolloutPolicy {
		return rolloutPolicy("agents", func(s *v1alpha1.RolloutPolicySpec) {
			s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet}
			s.Targets.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "kube-system"}}
			s.FailurePolicy = ptr.To(v1alpha1.FailurePolicyFail)
			if mut != nil {
				mut(s)
			}
		})
	}
	ws, outcomes := Entries([]v1alpha1.RolloutPolicy{agents(nil)}, nil, settings)
	ev, del := byType(ws, TypeEviction), byType(ws, TypeDelete)
	if len(ev) != 1 || len(del) != 1 {
		t.Fatalf("want an eviction and a delete entry, got %v", names(ws))
	}
	for _, w := range []admissionregistrationv1.ValidatingWebhook{ev[0], del[0]} {
		if *w.FailurePolicy != admissionregistrationv1.Ignore || w.NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "kube-system" ||
			w.ObjectSelector != nil || !slices.Contains(outcomes[Key{Kind: "RolloutPolicy", Name: "agents"}].Entries, w.Name) {
			t.Errorf("entry %s: failurePolicy %s, namespaces %v, objects %v; want Ignore in the policy's namespaces, named in its outcome",
				w.Name, *w.FailurePolicy, w.NamespaceSelector, w.ObjectSelector)
		}
	}
	if *ev[0].ClientConfig.Service.Path != EvictionPath || *del[0].ClientConfig.Service.Path != DeletePath {
		t.Errorf("paths %s and %s", *ev[0].ClientConfig.Service.Path, *del[0].ClientConfig.Service.Path)
	}
	for name, p := range map[string]v1alpha1.RolloutPolicy{
		"Deployments only": agents(func(s *v1alpha1.RolloutPolicySpec) {
			s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}
		}),
		"no rule a replacement is judged by": agents(func(s *v1alpha1.RolloutPolicySpec) {
			s.Rules = v1alpha1.RolloutRules{Strategy: &v1alpha1.StrategyRule{}}
		}),
		"suspended": agents(func(s *v1alpha1.RolloutPolicySpec) { s.Suspend = true }),
	} {
		if ws, _ := Entries([]v1alpha1.RolloutPolicy{p}, nil, settings); len(byType(ws, TypeEviction))+len(byType(ws, TypeDelete)) != 0 {
			t.Errorf("%s: entries %v, want no eviction or delete entry", name, names(ws))
		}
	}
	for name, mut := range map[string]func(*v1alpha1.RolloutPolicySpec){
		"minInterval":  func(s *v1alpha1.RolloutPolicySpec) { s.Rules = v1alpha1.RolloutRules{MinInterval: &metav1.Duration{}} },
		"revertWindow": func(s *v1alpha1.RolloutPolicySpec) { s.Rules = v1alpha1.RolloutRules{RevertWindow: &metav1.Duration{}} },
		"windows": func(s *v1alpha1.RolloutPolicySpec) {
			s.Rules = v1alpha1.RolloutRules{}
			s.Windows = []v1alpha1.Window{{}}
		},
		"StatefulSets": func(s *v1alpha1.RolloutPolicySpec) {
			s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindStatefulSet}
		},
	} {
		if ws, _ := Entries([]v1alpha1.RolloutPolicy{agents(mut)}, nil, settings); len(byType(ws, TypeEviction)) != 1 || len(byType(ws, TypeDelete)) != 1 {
			t.Errorf("%s: entries %v, want an eviction and a delete entry", name, names(ws))
		}
	}
	shared, _ := Entries([]v1alpha1.RolloutPolicy{agents(nil)}, []v1alpha1.DisruptionPolicy{deletePolicy("agents", func(s *v1alpha1.DisruptionPolicySpec) {
		s.GuardDeletes = false
		s.FailurePolicy = ptr.To(v1alpha1.FailurePolicy("Ignore"))
	})}, settings)
	if e := byType(shared, TypeEviction); len(e) != 1 {
		t.Errorf("a DisruptionPolicy failing open in the same namespaces: eviction entries %v, want one shared", names(e))
	}

	matcher := conditionsOf(&del[0])
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "konnectivity-agent", UID: "ds"}}
	pod := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "konnectivity-agent-x",
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if mut != nil {
			mut(p)
		}
		return p
	}
	for name, c := range map[string]struct {
		pod  *corev1.Pod
		user string
		sent bool
	}{
		"a DaemonSet's pod, not Ready": {pod: pod(nil), user: "alice", sent: true},
		"a StatefulSet's pod": {pod: pod(func(p *corev1.Pod) {
			p.OwnerReferences[0].Kind = "StatefulSet"
		}), user: "alice", sent: true},
		"a terminating pod":              {pod: pod(func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.Now()) }), user: "alice"},
		"a ReplicaSet's pod":             {pod: pod(func(p *corev1.Pod) { p.OwnerReferences[0].Kind = "ReplicaSet" }), user: "alice"},
		"an owner that is no controller": {pod: pod(func(p *corev1.Pod) { p.OwnerReferences[0].Controller = nil }), user: "alice"},
		"an orphan":                      {pod: pod(func(p *corev1.Pod) { p.OwnerReferences = nil }), user: "alice"},
		"an orphan named as a StatefulSet's ordinal (one it released)":   {pod: pod(func(p *corev1.Pod) { p.OwnerReferences, p.Name = nil, "db-0" }), user: "alice", sent: true},
		"a pod another kind controls, named as an ordinal":               {pod: pod(func(p *corev1.Pod) { p.OwnerReferences[0].Kind, p.Name = "Job", "db-0" }), user: "alice"},
		"a reference of another apiVersion (kube resolves kind and UID)": {pod: pod(func(p *corev1.Pod) { p.OwnerReferences[0].APIVersion = "apps/v1beta2" }), user: "alice", sent: true},
		"the kubelet's final delete":                                     {pod: pod(nil), user: "system:node:node-1"},
		"the daemonset controller":                                       {pod: pod(nil), user: "system:serviceaccount:kube-system:daemon-set-controller"},
		"holdfast itself":                                                {pod: pod(nil), user: "system:serviceaccount:holdfast-system:holdfast"},
	} {
		t.Run(name, func(t *testing.T) {
			matcher.check(t, nil, c.pod, corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithResource("pods"), "", admission.Delete, c.user, c.sent)
		})
	}
}

// TestRelabelEntry: the same RolloutPolicies have a pod relabel entry: UPDATEs of pods
// and of pods/status (whose strategy keeps labels changeable) in the policy's namespaces,
// failing open. Its matchConditions, evaluated as the API server does, send a change of
// the labels of a pod a StatefulSet or DaemonSet controls, by anyone but kube and
// holdfast, and never a kubelet's status write.
func TestRelabelEntry(t *testing.T) {
	p := rolloutPolicy("agents", func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDaemonSet}
		s.FailurePolicy = ptr.To(v1alpha1.FailurePolicyFail)
	})
	ws, outcomes := Entries([]v1alpha1.RolloutPolicy{p}, nil, settings)
	rel := byType(ws, TypeRelabel)
	if len(rel) != 1 {
		t.Fatalf("want a relabel entry, got %v", names(ws))
	}
	w := rel[0]
	if *w.FailurePolicy != admissionregistrationv1.Ignore || *w.ClientConfig.Service.Path != PodRelabelPath ||
		!slices.Equal(w.Rules[0].Resources, []string{"pods", "pods/status"}) || !slices.Equal(w.Rules[0].Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}) ||
		!slices.Contains(outcomes[Key{Kind: "RolloutPolicy", Name: "agents"}].Entries, w.Name) {
		t.Errorf("entry %+v: want pod and pods/status UPDATEs at %s, failing open, named in the policy's outcome", w, PodRelabelPath)
	}
	if ws, _ := Entries([]v1alpha1.RolloutPolicy{rolloutPolicy("web", func(s *v1alpha1.RolloutPolicySpec) {
		s.Targets.Kinds = []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}
	})}, nil, settings); len(byType(ws, TypeRelabel)) != 0 {
		t.Errorf("a Deployment-only policy has a relabel entry: %v", names(ws))
	}

	matcher := conditionsOf(&w)
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent", UID: "ds"}}
	stored := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "agent-x", Labels: map[string]string{"app": "agent"},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(ds, appsv1.SchemeGroupVersion.WithKind("DaemonSet"))}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	relabelled := func(mut func(old, obj *corev1.Pod)) (*corev1.Pod, *corev1.Pod) {
		old, obj := stored.DeepCopy(), stored.DeepCopy()
		obj.Labels = map[string]string{"app": "out"}
		if mut != nil {
			mut(old, obj)
		}
		return old, obj
	}
	for name, c := range map[string]struct {
		mut         func(old, obj *corev1.Pod)
		subresource string
		user        string
		sent        bool
	}{
		"a relabel":                {user: "alice", sent: true},
		"a relabel through status": {subresource: "status", user: "alice", sent: true},
		"labels removed":           {mut: func(_, obj *corev1.Pod) { obj.Labels = nil }, user: "alice", sent: true},
		"the controller reference changed, the labels kept": {mut: func(old, obj *corev1.Pod) { obj.Labels = old.Labels; obj.OwnerReferences[0].UID = "another" }, user: "alice", sent: true},
		"a kubelet's status write":                          {mut: func(old, obj *corev1.Pod) { obj.Labels = old.Labels; obj.Status.Phase = corev1.PodFailed }, subresource: "status", user: "system:node:node-1"},
		"an annotation":                                     {mut: func(old, obj *corev1.Pod) { obj.Labels = old.Labels; obj.Annotations = map[string]string{"a": "b"} }, user: "alice"},
		"a ReplicaSet's pod":                                {mut: func(old, obj *corev1.Pod) { old.OwnerReferences[0].Kind = "ReplicaSet" }, user: "alice"},
		"a terminating pod":                                 {mut: func(old, obj *corev1.Pod) { old.DeletionTimestamp = ptr.To(metav1.Now()) }, user: "alice"},
		"the daemonset controller":                          {user: "system:serviceaccount:kube-system:daemon-set-controller"},
		"holdfast itself":                                   {user: "system:serviceaccount:holdfast-system:holdfast"},
	} {
		t.Run(name, func(t *testing.T) {
			old, obj := relabelled(c.mut)
			matcher.check(t, obj, old, corev1.SchemeGroupVersion.WithKind("Pod"), corev1.SchemeGroupVersion.WithResource("pods"), c.subresource, admission.Update, c.user, c.sent)
		})
	}
}
