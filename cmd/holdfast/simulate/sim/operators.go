package sim

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	scenariov1alpha1 "github.com/holdfast-dev/holdfast/api/scenario/v1alpha1"
	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// operator is the loop of one workload's operator.
type operator struct {
	w        *simWorkload
	want     *scenariov1alpha1.Apply
	next     time.Time
	backoff  time.Duration
	done     bool
	refusals int
}

func (o *operator) due(now time.Time) bool { return !o.done && !now.Before(o.next) }

// want is an Apply step: the workload's operator wants this from now.
func (s *sim) want(a *scenariov1alpha1.Apply) {
	ref := refOf(a.Workload)
	w := s.byRef[ref]
	if w == nil {
		w = s.newWorkload(ref)
	}
	for _, o := range s.operators {
		if o.w == w && writer(o.want) == writer(a) {
			o.want = a
			if o.done {
				o.done, o.next, o.backoff = false, s.now, 0
			}
			return
		}
	}
	// Another writer of the same workload (another user or field manager) is another
	// controller with its own loop: both keep wanting their own specs.
	o := &operator{w: w, want: a, next: s.now}
	if w.op == nil {
		w.op = o
	}
	s.operators = append(s.operators, o)
}

// writer is who sends an apply's requests: its user and field manager.
func writer(a *scenariov1alpha1.Apply) [2]string {
	return [2]string{cmp.Or(a.User, scenariov1alpha1.DefaultOperator), a.FieldManager}
}

// operate sends the operator's change; refused, it requeues with backoff.
func (s *sim) operate(o *operator) {
	w, a := o.w, o.want
	var oldObj client.Object
	var newObj client.Object
	op := admissionv1.Update
	if !w.exists {
		op = admissionv1.Create
		newObj = newWorkloadObject(a)
	} else {
		oldObj = w.obj
		newObj = w.obj.DeepCopyObject().(client.Object)
	}
	changed := applyTo(newObj, a)
	if op == admissionv1.Update && !changed {
		o.done = true
		return
	}
	if op == admissionv1.Update {
		newObj.SetGeneration(oldObj.GetGeneration() + 1)
	}
	user := a.User
	if user == "" {
		user = scenariov1alpha1.DefaultOperator
	}
	resp := s.send(s.rollout.Handle, op, w.ref, newObj, oldObj, authenticationv1.UserInfo{Username: user}, a.FieldManager)
	e := Entry{Request: string(op), Object: w.ref.String(), Answer: "admitted", By: user}
	if !resp.Allowed {
		e.Answer, e.Message = answer(resp)
		if w.writer != "" && a.FieldManager != "" && w.writer != a.FieldManager &&
			strings.Contains(e.Message, strconv.Quote(w.writer)) && strings.Contains(e.Message, strconv.Quote(a.FieldManager)) {
			w.fig.RefusalsNamingWriters++
		}
		s.res.Requests.RolloutRefused++
		o.refusals++
		o.backoff = nextBackoff(o.backoff, a.Backoff)
		o.next = s.now.Add(o.backoff)
		e.RetryIn = o.backoff.Seconds()
		s.log(e)
		return
	}
	s.res.Requests.RolloutAdmitted++
	s.log(e)
	o.done, o.backoff = true, 0
	if a.FieldManager != "" && (op == admissionv1.Create || templateChanged(oldObj, newObj)) {
		// The API server moves the template's fields to the manager whose request changed
		// them, stamped with the time; holdfast's cache keeps that one manager.
		newObj.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: a.FieldManager, Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "apps/v1", Time: ptr.To(metav1.NewTime(s.now)), FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:template":{"f:spec":{}}}}`)}}})
		w.writer = a.FieldManager
	}
	if op == admissionv1.Create {
		if err := s.create(w, newObj); err != nil {
			s.res.Errors = append(s.res.Errors, fmt.Sprintf("%.1fs %s: %v", s.at(), w.ref, err))
		}
		s.writers.Observe(newObj)
		return
	}
	w.obj = newObj
	s.writers.Observe(newObj)
	if err := s.adopt(w); err != nil {
		s.res.Errors = append(s.res.Errors, fmt.Sprintf("%.1fs %s: %v", s.at(), w.ref, err))
	}
	s.store.Put(newObj)
	w.dirty = true
	w.dirtyJournal()
}

func nextBackoff(cur time.Duration, b *scenariov1alpha1.Backoff) time.Duration {
	initial, most := scenariov1alpha1.DefaultBackoff, scenariov1alpha1.DefaultMaxBackoff
	if b != nil {
		initial, most = b.Initial.Duration, b.Max.Duration
	}
	if cur == 0 {
		return initial
	}
	return min(2*cur, most)
}

func newWorkloadObject(a *scenariov1alpha1.Apply) client.Object {
	meta := metav1.ObjectMeta{Namespace: a.Workload.Namespace, Name: a.Workload.Name, Labels: a.Labels}
	var tplLabels map[string]string
	if a.Template != nil {
		tplLabels = a.Template.Labels
	}
	sel := &metav1.LabelSelector{MatchLabels: tplLabels}
	switch a.Workload.Kind {
	case v1alpha1.KindDeployment:
		return &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: sel,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType}}}
	case v1alpha1.KindStatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: sel,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}}}
	}
	return &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel,
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType}}}
}

// templateChanged is whether new's pod template differs from old's.
func templateChanged(old, new client.Object) bool {
	a, _ := json.Marshal(workload.PodTemplate(old))
	b, _ := json.Marshal(workload.PodTemplate(new))
	return string(a) != string(b)
}

// applyTo writes what a wants into obj and reports whether that changed it.
func applyTo(obj client.Object, a *scenariov1alpha1.Apply) bool {
	before, _ := json.Marshal(obj)
	if a.Template != nil {
		*workload.PodTemplate(obj) = *a.Template.DeepCopy()
	}
	if a.Replicas != nil {
		workload.SetReplicas(obj, *a.Replicas)
	}
	after, _ := json.Marshal(obj)
	return string(before) != string(after)
}
