package defaults

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// The integration test (test/integration, TestDefaultsAsTheAPIServer) holds every default
// to the real API server; these tests pin what a reader of this package needs at a glance.

func TestPullPolicy(t *testing.T) {
	digest := "@sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	cases := map[string]corev1.PullPolicy{
		"nginx":                      corev1.PullAlways, // no tag is :latest
		"nginx:latest":               corev1.PullAlways,
		"registry.example:5000/app":  corev1.PullAlways, // a port is not a tag
		"nginx:1.27":                 corev1.PullIfNotPresent,
		"nginx" + digest:             corev1.PullIfNotPresent,
		"nginx:latest" + digest:      corev1.PullAlways,       // the tag decides
		"Busybox":                    corev1.PullIfNotPresent, // does not parse: no tag
		"":                           corev1.PullIfNotPresent,
		"registry.example:5000/a:v1": corev1.PullIfNotPresent,
	}
	for image, want := range cases {
		if got := pullPolicy(image); got != want {
			t.Errorf("pullPolicy(%q) = %s, want %s", image, got, want)
		}
	}
}

func deployment() *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "d", Generation: 4},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](8),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:v1"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: 8, UpdatedReplicas: 3}}
}

func TestDeploymentDefaults(t *testing.T) {
	d := deployment()
	if !Object(d) {
		t.Fatal("Object(Deployment) = false")
	}
	want := appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))}}
	if diff := cmp.Diff(want, d.Spec.Strategy); diff != "" {
		t.Errorf("strategy (-want +got):\n%s", diff)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.ImagePullPolicy != corev1.PullIfNotPresent || c.TerminationMessagePath != corev1.TerminationMessagePathDefault {
		t.Errorf("container %+v: not defaulted", c)
	}
	again := d.DeepCopy()
	Object(again)
	if diff := cmp.Diff(d, again); diff != "" {
		t.Errorf("defaulting twice differs from once (-once +twice):\n%s", diff)
	}
	if Object(&corev1.ConfigMap{}) {
		t.Error("Object(ConfigMap) = true")
	}
}

func TestAdmitted(t *testing.T) {
	old := deployment()
	created := deployment()
	_, got := Admitted(nil, created)
	if got.Generation != 1 || got.Status.Replicas != 0 || got.Spec.RevisionHistoryLimit == nil {
		t.Errorf("CREATE: generation %d, status %+v, defaulted %v; want 1, none, defaulted", got.Generation, got.Status, got.Spec.RevisionHistoryLimit != nil)
	}
	if created.Spec.RevisionHistoryLimit != nil || created.Status.Replicas != 8 {
		t.Error("Admitted wrote the object it was given")
	}

	cases := map[string]struct {
		change     func(*appsv1.Deployment)
		generation int64
	}{
		"nothing":       {change: func(*appsv1.Deployment) {}, generation: 4},
		"a default":     {change: func(d *appsv1.Deployment) { d.Spec.RevisionHistoryLimit = ptr.To[int32](10) }, generation: 4},
		"the template":  {change: func(d *appsv1.Deployment) { d.Spec.Template.Spec.Containers[0].Image = "app:v2" }, generation: 5},
		"an annotation": {change: func(d *appsv1.Deployment) { d.Annotations = map[string]string{"a": "b"} }, generation: 5},
		"a label":       {change: func(d *appsv1.Deployment) { d.Labels = map[string]string{"a": "b"} }, generation: 4},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sent := deployment()
			sent.Generation, sent.Status = 0, appsv1.DeploymentStatus{} // a manifest without them
			tc.change(sent)
			gotOld, got := Admitted(old, sent)
			if got.Generation != tc.generation {
				t.Errorf("generation %d, want %d", got.Generation, tc.generation)
			}
			if diff := cmp.Diff(old.Status, got.Status); diff != "" {
				t.Errorf("status is not the old object's (-old +got):\n%s", diff)
			}
			if gotOld.Spec.ProgressDeadlineSeconds == nil || old.Spec.ProgressDeadlineSeconds != nil {
				t.Error("the old object's copy is not defaulted, or the old object was written")
			}
		})
	}
}

func TestStatefulSetAndDaemonSetStrategies(t *testing.T) {
	st := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}}}
	StatefulSet(st)
	if st.Spec.UpdateStrategy.RollingUpdate != nil {
		t.Errorf("a RollingUpdate StatefulSet written without rollingUpdate got %+v; the API server adds none", st.Spec.UpdateStrategy.RollingUpdate)
	}
	st = &appsv1.StatefulSet{}
	StatefulSet(st)
	want := &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))}
	if diff := cmp.Diff(want, st.Spec.UpdateStrategy.RollingUpdate); diff != "" {
		t.Errorf("StatefulSet rollingUpdate (-want +got):\n%s", diff)
	}
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}}}
	DaemonSet(ds)
	if ds.Spec.UpdateStrategy.RollingUpdate != nil || *ds.Spec.RevisionHistoryLimit != 10 {
		t.Errorf("OnDelete DaemonSet: %+v", ds.Spec)
	}
}
