package workload

import (
	"bytes"
	"compress/flate"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// PackedTemplateAnnotation is set by holdfast's cache (never in the cluster) on
// Deployments, StatefulSets and DaemonSets to their pod template: its JSON, compressed
// with DEFLATE, in base64. The typed template keeps its metadata (labels and annotations,
// which selections read) and drops its spec. A template's typed form is its workload's
// largest part, and only a few decisions read the spec of a workload the cache holds (the
// recorder's shapes, the background audit, a scale, a namespace bringing workloads into a
// selection): From unpacks it for them.
const PackedTemplateAnnotation = "holdfast.dev/template-deflate"

// Pack is the cache transform for Deployments, StatefulSets and DaemonSets: it records the
// template's fingerprint (FingerprintAnnotation) and packs its spec into
// PackedTemplateAnnotation, and keeps of the rest what decisions read (Slim). Other objects
// pass unchanged; a template that does not encode stays typed, without either annotation,
// so that none the object arrived with is read.
func Pack(obj any) (any, error) {
	f, ok := fieldsOf(obj)
	if !ok {
		return obj, nil
	}
	slim(obj, f)
	if f.template.Spec.Containers == nil { // packed already, or nothing to pack
		return obj, nil
	}
	// Its own two alone: no decision reads a cached workload's other annotations (a
	// Helm release's, a GitOps tool's tracking id), nor one of these it arrived with. A
	// new map: the object's own may be shared with another's.
	annotations := make(map[string]string, 2)
	f.meta.Annotations = annotations
	raw, err := json.Marshal(f.template)
	if err != nil {
		return obj, nil
	}
	// The fingerprint is this JSON's hash, unless it carries a hash label (Template.Sum).
	sum, ok := (&Template{raw: raw, typed: f.template}).Sum()
	if !ok {
		return obj, nil
	}
	packed, err := deflate(raw)
	if err != nil {
		return obj, nil
	}
	annotations[FingerprintAnnotation] = sum
	annotations[PackedTemplateAnnotation] = packed
	f.template.Spec = corev1.PodSpec{}
	return obj, nil
}

// slim trims a cached workload to what decisions read, beside its packed template:
//   - its label maps that hold the same labels become one map: a workload's own labels, its
//     selector's and its template's are most often one set, and a map costs a few hundred
//     bytes however few its entries (the cache's objects are read, never written);
//   - a rolling update's parameters that are kube's defaults (defaultRollingUpdates) become
//     one struct shared by every workload that has them: four small allocations each;
//   - of a Deployment's conditions, Progressing alone, without its message: decisions read
//     whether it is False for ProgressDeadlineExceeded (Rollout.DeadlineExceeded).
//
// At a management cluster's thousands of unguarded workloads, these are most of what each
// costs beside its struct.
func slim(obj any, f fields) {
	if f.selector != nil && maps.Equal(f.selector.MatchLabels, f.template.Labels) {
		f.selector.MatchLabels = f.template.Labels
	}
	if maps.Equal(f.meta.Labels, f.template.Labels) {
		f.meta.Labels = f.template.Labels
	}
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		shareDefault(&o.Spec.UpdateStrategy.RollingUpdate, defaultRollingUpdates.statefulSet)
	case *appsv1.DaemonSet:
		shareDefault(&o.Spec.UpdateStrategy.RollingUpdate, defaultRollingUpdates.daemonSet)
	}
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return
	}
	shareDefault(&d.Spec.Strategy.RollingUpdate, defaultRollingUpdates.deployment)
	var kept []appsv1.DeploymentCondition // a new array: the old one would keep the others
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			c.Message = ""
			kept = append(kept, c)
		}
	}
	d.Status.Conditions = kept
}

// packedTemplate is the template Pack packed into obj, known by its fingerprint and
// unpacked when a decision reads more (Template.Spec); nil when obj has none packed. Only
// a template without containers can be packed: an object that has them and the annotation
// (written in the cluster, or read by holdfast check) is read as it is.
func packedTemplate(obj any) *Template {
	f, ok := fieldsOf(obj)
	if !ok || f.template.Spec.Containers != nil {
		return nil
	}
	packed := f.meta.Annotations[PackedTemplateAnnotation]
	if packed == "" {
		return nil
	}
	t := new(Template).Wrap(nil, f.meta.Annotations[FingerprintAnnotation])
	t.packed = packed
	return t
}

// unpack reads the packed template's JSON, once.
func (t *Template) unpack() {
	if t.packed == "" || t.raw != nil || t.err != nil {
		return
	}
	raw, err := inflate(t.packed)
	if err != nil {
		t.err = fmt.Errorf("reading the pod template the cache packed: %w", err)
		return
	}
	t.raw = raw
}

// maxTemplate bounds what a packed template inflates to: more than any object etcd stores.
const maxTemplate = 4 << 20

// packDictionary is what most pod templates' JSON repeats, as kube defaults and writes
// it: DEFLATE's preset dictionary, it halves a small template's packed size. It lives in
// this process only (the cache never leaves it), so it may change with any release.
var packDictionary = []byte(`{"metadata":{"creationTimestamp":null,"labels":{"app":""},"annotations":{}},` +
	`"spec":{"volumes":[{"name":"","configMap":{"name":"","defaultMode":420}},{"secret":{"secretName":"","defaultMode":420}},` +
	`{"emptyDir":{}},{"hostPath":{"path":"","type":""}},{"projected":{"sources":[]}}],` +
	`"containers":[{"name":"","image":"","command":[""],"args":["--"],"ports":[{"name":"","containerPort":,"protocol":"TCP"}],` +
	`"env":[{"name":"","value":""},{"valueFrom":{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"}}}],` +
	`"resources":{"limits":{"cpu":"","memory":""},"requests":{"cpu":"","memory":""}},` +
	`"volumeMounts":[{"name":"","readOnly":true,"mountPath":"/etc/"}],` +
	`"livenessProbe":{"httpGet":{"path":"/healthz","port":,"scheme":"HTTP"},"initialDelaySeconds":,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},` +
	`"readinessProbe":{"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent","securityContext":{}}],` +
	`"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","nodeSelector":{},` +
	`"serviceAccountName":"","serviceAccount":"","securityContext":{},"affinity":{},"schedulerName":"default-scheduler",` +
	`"tolerations":[{"key":"","operator":"Exists","effect":"NoSchedule"}],"priorityClassName":""}}`)

var (
	writers = sync.Pool{New: func() any {
		w, _ := flate.NewWriterDict(nil, flate.DefaultCompression, packDictionary)
		return w
	}}
	readers = sync.Pool{New: func() any { return flate.NewReaderDict(strings.NewReader(""), packDictionary) }}
)

func deflate(raw []byte) (string, error) {
	var buf bytes.Buffer
	w := writers.Get().(*flate.Writer)
	defer writers.Put(w)
	w.Reset(&buf)
	if _, err := w.Write(raw); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

func inflate(packed string) ([]byte, error) {
	compressed, err := base64.StdEncoding.DecodeString(packed)
	if err != nil {
		return nil, err
	}
	r := readers.Get().(io.ReadCloser)
	defer readers.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(compressed), packDictionary); err != nil {
		return nil, err
	}
	raw, err := io.ReadAll(io.LimitReader(r, maxTemplate+1))
	if err == nil && len(raw) > maxTemplate {
		err = fmt.Errorf("more than %d bytes", maxTemplate)
	}
	return raw, err
}

// defaultRollingUpdates are the rolling update parameters kube 1.37 defaults each kind's to
// (internal/defaults), shared by the cached workloads that have them (slim). Never
// written: every field is set, and defaulting fills only unset ones.
var defaultRollingUpdates = struct {
	deployment  *appsv1.RollingUpdateDeployment
	statefulSet *appsv1.RollingUpdateStatefulSetStrategy
	daemonSet   *appsv1.RollingUpdateDaemonSet
}{
	deployment:  &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromString("25%"))},
	statefulSet: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](0), MaxUnavailable: ptr.To(intstr.FromInt32(1))},
	daemonSet:   &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))},
}

// shareDefault points *p at def when it holds what def holds.
func shareDefault[T any](p **T, def *T) {
	if *p != nil && *p != def && reflect.DeepEqual(*p, def) {
		*p = def
	}
}
