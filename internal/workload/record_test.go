package workload

import (
	"maps"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/randfill"
)

// filled is a typed workload of obj's type with every field set (randfill), its template's
// spec empty as Pack leaves it.
func filled[T any, P interface {
	*T
	client.Object
}](t *testing.T, seed int64, gvk schema.GroupVersionKind) P {
	t.Helper()
	obj := P(new(T))
	randfill.NewWithSeed(seed).NilChance(0).NumElements(1, 2).Fill(obj)
	PodTemplate(obj).Spec = corev1.PodSpec{}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}

// TestRecordStandsForEveryField: a record is the workload it was made of, every field of
// every kind (randfill sets them all, so a field the record forgets fails here), its
// template's metadata beyond labels included; deep reads share nothing with it; MetaOf
// reads the same of both; a template not packed stays typed.
func TestRecordStandsForEveryField(t *testing.T) {
	for seed := range int64(20) {
		roundTrip(t, filled[appsv1.Deployment](t, seed, appsv1.SchemeGroupVersion.WithKind("Deployment")), &appsv1.Deployment{})
		roundTrip(t, filled[appsv1.StatefulSet](t, seed, appsv1.SchemeGroupVersion.WithKind("StatefulSet")), &appsv1.StatefulSet{})
		roundTrip(t, filled[appsv1.DaemonSet](t, seed, appsv1.SchemeGroupVersion.WithKind("DaemonSet")), &appsv1.DaemonSet{})
	}

	// Pack's two annotations are held as the record's strings, and stand for the same.
	packed := filled[appsv1.Deployment](t, 3, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	packed.Annotations = map[string]string{FingerprintAnnotation: "sha256:abc", PackedTemplateAnnotation: "AAEC/w=="}
	roundTrip(t, packed, &appsv1.Deployment{})
	if r, _ := Record(packed); r.(*deploymentRecord).Annotations != nil || r.(*deploymentRecord).packed != "\x00\x01\x02\xff" {
		t.Errorf("Pack's annotations kept as %v and %q, want no map and the template's bytes", r.(*deploymentRecord).Annotations, r.(*deploymentRecord).packed)
	}
	for _, odd := range []map[string]string{
		{FingerprintAnnotation: "sha256:abc", PackedTemplateAnnotation: "AAEC/w"},
		{FingerprintAnnotation: "sha256:abc", PackedTemplateAnnotation: "AAEC\n/w=="},
		{FingerprintAnnotation: "sha256:abc", PackedTemplateAnnotation: "not base64!"},
		{FingerprintAnnotation: "sha256:abc", PackedTemplateAnnotation: ""},
		{FingerprintAnnotation: "", PackedTemplateAnnotation: "AAEC/w=="},
		{FingerprintAnnotation: "sha256:abc", "other": "AAEC/w=="},
		{FingerprintAnnotation: "sha256:abc", PackedTemplateAnnotation: "AAEC/w==", "other": "x"},
	} {
		packed.Annotations = odd
		roundTrip(t, packed, &appsv1.Deployment{})
		if r, _ := Record(packed); r.(*deploymentRecord).Annotations == nil {
			t.Errorf("annotations %q that are not Pack's two alone were moved out of the map", odd)
		}
	}

	d := filled[appsv1.Deployment](t, 1, appsv1.SchemeGroupVersion.WithKind("Deployment"))
	d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "c"}}
	if out, _ := Record(d); out != any(d) {
		t.Errorf("a template with a spec became a %T, want it typed", out)
	}
	other := &corev1.Pod{}
	if out, _ := Record(other); out != any(other) {
		t.Errorf("a pod became a %T", out)
	}
	r, _ := Record(filled[appsv1.Deployment](t, 2, appsv1.SchemeGroupVersion.WithKind("Deployment")))
	if r.(recorded).Into(&appsv1.StatefulSet{}, false) {
		t.Error("a Deployment's record filled a StatefulSet")
	}
}

func roundTrip(t *testing.T, want, into client.Object) {
	t.Helper()
	out, err := Record(want)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := out.(recorded)
	if !ok {
		t.Fatalf("%T with an empty template spec stayed a %T, want a record", want, out)
	}
	if diff := cmp.Diff(want, r.Typed()); diff != "" {
		t.Fatalf("%T: the record's object differs (-made of +stands for):\n%s", want, diff)
	}
	if !r.Into(into, true) {
		t.Fatalf("a record of %T did not fill one", want)
	}
	if diff := cmp.Diff(want, into); diff != "" {
		t.Fatalf("%T: a deep read differs (-made of +read):\n%s", want, diff)
	}
	into.GetLabels()["written"] = "by a reader"
	PodTemplate(into).Labels["written"] = "by a reader"
	if _, ok := r.Typed().GetLabels()["written"]; ok {
		t.Fatalf("%T: a deep read shares its labels with the record", want)
	}
	if _, ok := PodTemplate(r.Typed()).Labels["written"]; ok {
		t.Fatalf("%T: a deep read shares its template's labels with the record", want)
	}
	if diff := cmp.Diff(want, r.DeepCopyObject().(recorded).Typed()); diff != "" {
		t.Fatalf("%T: a copy of the record differs:\n%s", want, diff)
	}
	got, _ := MetaOf(r)
	wantMeta, _ := MetaOf(want)
	if !reflect.DeepEqual(got, wantMeta) {
		t.Fatalf("%T: MetaOf a record is %+v, of the object %+v", want, got, wantMeta)
	}
}

// TestRecordIsSmall: a record costs less than half its typed struct, which is what
// holding records is for.
func TestRecordIsSmall(t *testing.T) {
	for _, c := range []struct {
		record, typed uintptr
	}{
		{unsafe.Sizeof(deploymentRecord{}), unsafe.Sizeof(appsv1.Deployment{})},
		{unsafe.Sizeof(statefulSetRecord{}), unsafe.Sizeof(appsv1.StatefulSet{})},
		{unsafe.Sizeof(daemonSetRecord{}), unsafe.Sizeof(appsv1.DaemonSet{})},
	} {
		if c.record > c.typed/2 {
			t.Errorf("a record of %d bytes stands for a struct of %d", c.record, c.typed)
		}
	}
}

// BenchmarkRecordHeld is the heap a cached Deployment holds for as long as it is cached:
// decoded from the API server's protobuf as the informer decodes it, packed and recorded
// as the cache's transform leaves it. The Deployment is shaped as the API server and
// kube-controller-manager leave one: defaulted, one manager's managedFields (the cache
// drops them), labels its selector and template repeat, and a status with two conditions.
func BenchmarkRecordHeld(b *testing.B) {
	t := packable()
	t.Labels = map[string]string{"app.kubernetes.io/name": "konnectivity-agent", "app.kubernetes.io/instance": "tenant-0042"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "konnectivity-agent", Namespace: "tenant-0042", UID: "5f0c2d4e-8b1a-4c7e-9d3f-2a6b8e1c4f70",
			ResourceVersion: "183746", Generation: 3, CreationTimestamp: metav1.Now(), Labels: maps.Clone(t.Labels),
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "helm", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "apps/v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{},"f:template":{}}}`)}}}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: maps.Clone(t.Labels)}, Template: t,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))}},
			RevisionHistoryLimit: ptr.To[int32](10), ProgressDeadlineSeconds: ptr.To[int32](600)},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability."},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable",
					Message: `ReplicaSet "konnectivity-agent-5d8f7b9c4" has successfully progressed.`}}},
	}
	raw, err := d.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	var held []any
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for b.Loop() {
		obj := &appsv1.Deployment{}
		if err := obj.Unmarshal(raw); err != nil {
			b.Fatal(err)
		}
		obj.ManagedFields = nil // the cache's default transform
		rec, err := Pack(obj)
		if err == nil {
			rec, err = Record(rec)
		}
		if err != nil {
			b.Fatal(err)
		}
		held = append(held, rec)
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	n := len(held)
	held[n-1].(client.Object).GetName() // held to here
	b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)-int64(cap(held))*16)/float64(n), "heldB/workload")
}
