package workload

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// packable is a template as a kube-apiserver's is written: flags, env, resources.
func packable() corev1.PodTemplateSpec {
	t := tmpl("registry.k8s.io/kube-apiserver:v1.37.2")
	t.Labels["tier"] = "control-plane"
	t.Annotations = map[string]string{"checksum/config": "abc"}
	c := &t.Spec.Containers[0]
	c.Command = []string{"kube-apiserver"}
	c.Args = []string{"--etcd-servers=https://etcd:2379", "--endpoint-reconciler-type=none", "--apiserver-count=3"}
	c.Env = []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "2"}}
	c.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	t.Spec.NodeSelector = map[string]string{"node-role": "control-plane"}
	t.Spec.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	return t
}

// TestPackKeepsWhatDecisionsRead: a workload the cache packed reads, through From, as the
// one it packed: the same fingerprint, spec, flags and shape, the template's labels still
// typed for the selections; only the typed spec is gone. Packing twice changes nothing.
func TestPackKeepsWhatDecisionsRead(t *testing.T) {
	objs := map[string]func(corev1.PodTemplateSpec) runtime.Object{
		"Deployment": func(t corev1.PodTemplateSpec) runtime.Object {
			return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n"}, Spec: appsv1.DeploymentSpec{Template: t}}
		},
		"StatefulSet": func(t corev1.PodTemplateSpec) runtime.Object {
			return &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "n", Annotations: map[string]string{"a": "b"}}, Spec: appsv1.StatefulSetSpec{Template: t}}
		},
		"DaemonSet": func(t corev1.PodTemplateSpec) runtime.Object {
			return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "ds", Namespace: "n"}, Spec: appsv1.DaemonSetSpec{Template: t}}
		},
	}
	flags := []v1alpha1.ArgMatchesReplicas{{Container: "c", Flag: "--apiserver-count"}}
	for kind, build := range objs {
		t.Run(kind, func(t *testing.T) {
			want := packable()
			typed, err := From(build(*want.DeepCopy()))
			if err != nil {
				t.Fatal(err)
			}
			obj := build(*want.DeepCopy())
			if _, err := Pack(obj); err != nil {
				t.Fatal(err)
			}
			if _, err := Pack(obj); err != nil { // a second pass finds it packed
				t.Fatal(err)
			}
			held := PodTemplate(obj)
			if held.Spec.Containers != nil || !equality.Semantic.DeepEqual(held.Labels, want.Labels) {
				t.Fatalf("cached template = %+v; want the labels %v and no spec", held, want.Labels)
			}
			if a := obj.(metav1.Object).GetAnnotations(); len(a) != 2 || a[FingerprintAnnotation] == "" || a[PackedTemplateAnnotation] == "" {
				t.Errorf("cached annotations %v: want the fingerprint and the packed template alone", a)
			}
			w, err := From(obj)
			if err != nil {
				t.Fatal(err)
			}
			sum, ok := w.Template.Sum()
			wantSum, _ := Fingerprint(&want)
			if !ok || sum != wantSum {
				t.Errorf("Sum = %q, %v; want %q", sum, ok, wantSum)
			}
			spec, err := w.Template.Spec()
			if err != nil || !equality.Semantic.DeepEqual(spec, &want) {
				t.Errorf("Spec = %+v, %v; want %+v", spec, err, want)
			}
			if !SameTemplate(w.Template, typed.Template) {
				t.Error("the packed template differs from the typed one")
			}
			f, ok, err := w.Template.Flag("c", "--apiserver-count")
			if err != nil || !ok || !f.Found || f.Value != "3" {
				t.Errorf("Flag = %+v, %v, %v; want --apiserver-count=3", f, ok, err)
			}
			got, err1 := w.Template.Shape(flags)
			wantShape, err2 := typed.Template.Shape(flags)
			if err1 != nil || err2 != nil || got != wantShape {
				t.Errorf("Shape = %q (%v); want %q (%v)", got, err1, wantShape, err2)
			}
			other := packable()
			other.Spec.Containers[0].Image = "registry.k8s.io/kube-apiserver:v1.37.3"
			changed := build(other)
			if _, err := Pack(changed); err != nil {
				t.Fatal(err)
			}
			if cw, err := From(changed); err != nil || SameTemplate(cw.Template, w.Template) {
				t.Errorf("a packed template with another image compares equal (%v)", err)
			}
		})
	}
}

// TestPackedTemplateThatDoesNotReadIsAnError: a corrupted packed template is an error when
// a decision reads it, never a template read as empty.
func TestPackedTemplateThatDoesNotReadIsAnError(t *testing.T) {
	for name, packed := range map[string]string{"not base64": "not base64!", "not DEFLATE": "bm90IGRlZmxhdGU="} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n",
			Annotations: map[string]string{PackedTemplateAnnotation: packed}}}
		w, err := From(d)
		if err != nil {
			t.Fatal(err)
		}
		if spec, err := w.Template.Spec(); err == nil {
			t.Errorf("%s: a corrupted packed template read as %+v", name, spec)
		}
		if _, ok := w.Template.Sum(); ok {
			t.Errorf("%s: a corrupted packed template has a fingerprint", name)
		}
	}
}

// TestAnnotationsTheObjectArrivedWithAreNotRead: only the cache packs. A workload that has
// its containers is read as it is, whatever annotations of holdfast's it carries (written
// in the cluster, or in a file holdfast check reads), and Pack replaces them.
func TestAnnotationsTheObjectArrivedWithAreNotRead(t *testing.T) {
	old := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n"}, Spec: appsv1.DeploymentSpec{Template: packable()}}
	if _, err := Pack(old); err != nil {
		t.Fatal(err)
	}
	forged := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n", Annotations: old.Annotations}, Spec: appsv1.DeploymentSpec{Template: packable()}}
	forged.Spec.Template.Spec.Containers[0].Image = "evil:1"
	want, _ := Fingerprint(&forged.Spec.Template)
	w, err := From(forged)
	if err != nil {
		t.Fatal(err)
	}
	if sum, _ := w.Template.Sum(); sum != want {
		t.Errorf("the template reads as the forged annotation's %s, want its own %s", sum, want)
	}
	if _, err := Pack(forged); err != nil {
		t.Fatal(err)
	}
	if forged.Annotations[FingerprintAnnotation] != want || old.Annotations[FingerprintAnnotation] == want {
		t.Errorf("Pack kept the annotation the object arrived with, or wrote into the map it shared")
	}
}

// BenchmarkFromPacked is what a decision pays to read a cached workload's template: the
// inflate, and the decode when it reads the spec.
func BenchmarkFromPacked(b *testing.B) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n"}, Spec: appsv1.DeploymentSpec{Template: packable()}}
	if _, err := Pack(d); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		w, err := From(d)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Template.Spec(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPack is what the cache's transform pays for each workload it receives (every
// update, status ones included): the JSON, its hash and its compression.
func BenchmarkPack(b *testing.B) {
	t := packable()
	b.ReportAllocs()
	for b.Loop() {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n"}, Spec: appsv1.DeploymentSpec{Template: t}}
		d.Spec.Template.Spec.Containers = t.Spec.Containers // Pack clears the spec, not the slice
		if _, err := Pack(d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestPackSharesDefaultRollingUpdates: a workload whose rolling update holds kube's
// defaults holds the one struct of them every such workload shares, and reads the same;
// one with its own parameters keeps them, and a copied read shares nothing.
func TestPackSharesDefaultRollingUpdates(t *testing.T) {
	deployment := func(surge string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "d", Namespace: "n"}, Spec: appsv1.DeploymentSpec{Template: packable(),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString(surge))}}}}
	}
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Template: packable(), UpdateStrategy: appsv1.StatefulSetUpdateStrategy{
		Type: appsv1.RollingUpdateStatefulSetStrategyType, RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))}}}}
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: packable(), UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
		Type: appsv1.RollingUpdateDaemonSetStrategyType, RollingUpdate: &appsv1.RollingUpdateDaemonSet{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}}}}
	a, b, own := deployment("25%"), deployment("25%"), deployment("1")
	wantOwn := own.Spec.Strategy.RollingUpdate.DeepCopy()
	for _, obj := range []runtime.Object{a, b, own, sts, ds} {
		if _, err := Pack(obj); err != nil {
			t.Fatal(err)
		}
	}
	if a.Spec.Strategy.RollingUpdate != defaultRollingUpdates.deployment || b.Spec.Strategy.RollingUpdate != a.Spec.Strategy.RollingUpdate {
		t.Error("two Deployments with kube's default rolling update hold one each")
	}
	if sts.Spec.UpdateStrategy.RollingUpdate != defaultRollingUpdates.statefulSet || ds.Spec.UpdateStrategy.RollingUpdate != defaultRollingUpdates.daemonSet {
		t.Error("a StatefulSet's or DaemonSet's default rolling update is not the shared one")
	}
	if own.Spec.Strategy.RollingUpdate == defaultRollingUpdates.deployment || !reflect.DeepEqual(own.Spec.Strategy.RollingUpdate, wantOwn) {
		t.Errorf("a Deployment's own rolling update became %+v", own.Spec.Strategy.RollingUpdate)
	}
	if c := a.DeepCopy(); c.Spec.Strategy.RollingUpdate == defaultRollingUpdates.deployment ||
		*c.Spec.Strategy.RollingUpdate.MaxSurge != intstr.FromString("25%") {
		t.Error("a copied read shares the default, or reads otherwise")
	}
}
