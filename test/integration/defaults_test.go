//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/check"
	"github.com/holdfast-dev/holdfast/internal/defaults"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// defaultedFields are the fields internal/defaults fills in, by the kube function it
// follows: "Kind spec..." for a kind's own fields, "spec.template..." for the pod template's,
// which the three kinds default alike. "[]" is any element of a list, "*" any resource
// name. TestDefaultsAsTheAPIServer requires the corpus to set off each one, and every field
// the API server fills in to be one of them.
func defaultedFields() map[string]string {
	fields := map[string]string{}
	add := func(fn string, paths ...string) {
		for _, p := range paths {
			fields[p] = fn
		}
	}
	add("SetDefaults_Deployment", "Deployment spec.replicas", "Deployment spec.strategy.type",
		"Deployment spec.strategy.rollingUpdate.maxUnavailable", "Deployment spec.strategy.rollingUpdate.maxSurge",
		"Deployment spec.revisionHistoryLimit", "Deployment spec.progressDeadlineSeconds")
	add("SetDefaults_StatefulSet", "StatefulSet spec.podManagementPolicy", "StatefulSet spec.updateStrategy.type",
		"StatefulSet spec.updateStrategy.rollingUpdate.partition", "StatefulSet spec.replicas", "StatefulSet spec.revisionHistoryLimit",
		"StatefulSet spec.persistentVolumeClaimRetentionPolicy.whenDeleted", "StatefulSet spec.persistentVolumeClaimRetentionPolicy.whenScaled")
	add("SetDefaults_StatefulSet (MaxUnavailableStatefulSet)", "StatefulSet spec.updateStrategy.rollingUpdate.maxUnavailable")
	add("Convert_apps_StatefulSetSpec_To_v1_StatefulSetSpec", "StatefulSet spec.volumeClaimTemplates[].apiVersion", "StatefulSet spec.volumeClaimTemplates[].kind")
	add("SetDefaults_PersistentVolumeClaim", "StatefulSet spec.volumeClaimTemplates[].status.phase")
	add("SetDefaults_PersistentVolumeClaimSpec", "StatefulSet spec.volumeClaimTemplates[].spec.volumeMode",
		"spec.template.spec.volumes[].ephemeral.volumeClaimTemplate.spec.volumeMode")
	add("SetDefaults_ResourceList", "StatefulSet spec.volumeClaimTemplates[].spec.resources.limits.*",
		"StatefulSet spec.volumeClaimTemplates[].spec.resources.requests.*", "StatefulSet spec.volumeClaimTemplates[].status.capacity.*",
		"StatefulSet spec.volumeClaimTemplates[].status.allocatedResources.*",
		"spec.template.spec.volumes[].ephemeral.volumeClaimTemplate.spec.resources.limits.*",
		"spec.template.spec.volumes[].ephemeral.volumeClaimTemplate.spec.resources.requests.*",
		"spec.template.spec.overhead.*", "spec.template.spec.resources.limits.*", "spec.template.spec.resources.requests.*")
	add("SetDefaults_DaemonSet", "DaemonSet spec.updateStrategy.type", "DaemonSet spec.updateStrategy.rollingUpdate.maxUnavailable",
		"DaemonSet spec.updateStrategy.rollingUpdate.maxSurge", "DaemonSet spec.revisionHistoryLimit")
	pod := "spec.template.spec."
	add("SetDefaults_PodSpec", pod+"serviceAccountName", pod+"serviceAccount", pod+"dnsPolicy", pod+"restartPolicy",
		pod+"securityContext", pod+"terminationGracePeriodSeconds", pod+"schedulerName")
	v := pod + "volumes[]."
	add("SetDefaults_Volume", v+"emptyDir")
	add("SetDefaults_Volume (ImageVolume)", v+"image.pullPolicy")
	add("SetDefaults_HostPathVolumeSource", v+"hostPath.type")
	add("SetDefaults_SecretVolumeSource", v+"secret.defaultMode")
	add("SetDefaults_ConfigMapVolumeSource", v+"configMap.defaultMode")
	add("SetDefaults_DownwardAPIVolumeSource", v+"downwardAPI.defaultMode")
	add("SetDefaults_ProjectedVolumeSource", v+"projected.defaultMode")
	add("SetDefaults_ServiceAccountTokenProjection", v+"projected.sources[].serviceAccountToken.expirationSeconds")
	add("SetDefaults_ObjectFieldSelector", v+"downwardAPI.items[].fieldRef.apiVersion", v+"projected.sources[].downwardAPI.items[].fieldRef.apiVersion")
	add("+default (ISCSIVolumeSource)", v+"iscsi.iscsiInterface")
	add("+default (RBDVolumeSource)", v+"rbd.pool", v+"rbd.user", v+"rbd.keyring")
	add("+default (AzureDiskVolumeSource)", v+"azureDisk.cachingMode", v+"azureDisk.fsType", v+"azureDisk.readOnly", v+"azureDisk.kind")
	add("+default (ScaleIOVolumeSource)", v+"scaleIO.storageMode", v+"scaleIO.fsType")
	for _, list := range []string{"containers", "initContainers"} {
		c := pod + list + "[]."
		add("SetDefaults_Container", c+"imagePullPolicy", c+"terminationMessagePath", c+"terminationMessagePolicy")
		add("+default (ContainerPort)", c+"ports[].protocol")
		add("SetDefaults_ObjectFieldSelector", c+"env[].valueFrom.fieldRef.apiVersion")
		add("+default (FileKeySelector)", c+"env[].valueFrom.fileKeyRef.optional")
		add("SetDefaults_ResourceList", c+"resources.limits.*", c+"resources.requests.*")
		for _, p := range []string{"livenessProbe.", "readinessProbe.", "startupProbe."} {
			add("SetDefaults_Probe", c+p+"timeoutSeconds", c+p+"periodSeconds", c+p+"successThreshold", c+p+"failureThreshold")
			add("SetDefaults_HTTPGetAction", c+p+"httpGet.path", c+p+"httpGet.scheme")
			add("+default (GRPCAction)", c+p+"grpc.service")
		}
		for _, h := range []string{"lifecycle.postStart.", "lifecycle.preStop."} {
			add("SetDefaults_HTTPGetAction", c+h+"httpGet.path", c+h+"httpGet.scheme")
		}
	}
	return fields
}

// TestDefaultsAsTheAPIServer holds internal/defaults to the real API server: every workload
// of the corpus (testdata/defaults), created with a server-side dry run, comes back with
// exactly the spec that defaults.Admitted gives it offline (and generation 1, no status).
// A field the server fills in that the package leaves unset fails, as does one the package
// fills in that the server does not; every field the package defaults (defaultedFields) must
// be filled in for at least one case, and every field the server filled in must be listed.
func TestDefaultsAsTheAPIServer(t *testing.T) {
	docs, err := check.ReadObjects([]string{"testdata/defaults/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, nil)
	fields := defaultedFields()
	setOff := map[string][]string{} // field -> the cases that set it off
	kinds := map[string]int{}
	differences := 0
	for _, doc := range docs {
		obj := doc.Object.(client.Object)
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		kinds[kind]++
		name := kind + " " + obj.GetName()
		t.Run(name, func(t *testing.T) {
			obj.SetNamespace(ns)
			_, offline := defaults.Admitted(client.Object(nil), obj)
			server := asJSON(t, obj)
			if err := k8s.Create(context.Background(), server, client.DryRunAll); err != nil {
				t.Fatalf("%s: the API server refuses the case: %v", doc.Source, err)
			}
			want, got := fieldOf(t, server, "spec"), fieldOf(t, offline, "spec")
			if diff := cmp.Diff(want, got); diff != "" {
				differences++
				t.Errorf("%s: the spec defaulted offline differs from the API server's (-server +offline):\n%s", doc.Source, diff)
			}
			if diff := cmp.Diff(fieldOf(t, server, "status"), fieldOf(t, offline, "status")); diff != "" {
				t.Errorf("%s: status (-server +offline):\n%s", doc.Source, diff)
			}
			if server.GetGeneration() != offline.GetGeneration() {
				t.Errorf("%s: generation %d offline, %d from the API server", doc.Source, offline.GetGeneration(), server.GetGeneration())
			}
			filled := map[string]bool{}
			fill("spec", fieldOf(t, obj, "spec"), want, filled)
			for path := range filled {
				key := path
				if !strings.HasPrefix(path, "spec.template.") {
					key = kind + " " + path
				}
				if _, ok := fields[key]; !ok {
					t.Errorf("%s: the API server fills in %s, which defaultedFields does not list", doc.Source, key)
				}
				setOff[key] = append(setOff[key], name)
			}
		})
	}
	for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet"} {
		if kinds[kind] == 0 {
			t.Errorf("the corpus has no %s", kind)
		}
	}
	var missing []string
	for f, fn := range fields {
		if len(setOff[f]) == 0 {
			missing = append(missing, fmt.Sprintf("%s (%s)", f, fn))
		}
	}
	slices.Sort(missing)
	for _, m := range missing {
		t.Errorf("no case of the corpus sets off the default of %s", m)
	}
	fmt.Printf("RELIABILITY defaults-vs-apiserver objects=%d defaultedFields=%d covered=%d differences=%d\n",
		len(docs), len(fields), len(fields)-len(missing), differences)
}

// asJSON is obj unstructured, which the client sends and receives as JSON, as the API
// server writes objects to webhooks (the typed client reads protobuf, which drops the
// claim templates' apiVersion and kind).
func asJSON(t *testing.T, obj client.Object) *unstructured.Unstructured {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	return u
}

// fieldOf is obj's top-level field (spec, status) as the API server's JSON writes it.
func fieldOf(t *testing.T, obj client.Object, name string) any {
	t.Helper()
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m[name]
}

// resourceName is a resource list's key, which fill names "*".
var resourceName = regexp.MustCompile(`\.(limits|requests|overhead|capacity|allocatedResources)\.[^.\[]+$`)

// fill records in filled the paths of the fields after has that before lacks or has
// otherwise: leaves, and maps that are empty (securityContext: {}).
func fill(path string, before, after any, filled map[string]bool) {
	switch a := after.(type) {
	case map[string]any:
		b, _ := before.(map[string]any)
		if len(a) == 0 && before == nil {
			filled[path] = true
		}
		for k, v := range a {
			fill(path+"."+k, b[k], v, filled)
		}
	case []any:
		b, _ := before.([]any)
		for i, v := range a {
			var was any
			if i < len(b) {
				was = b[i]
			}
			fill(path+"[]", was, v, filled)
		}
	default:
		if !reflect.DeepEqual(before, after) {
			filled[resourceName.ReplaceAllString(path, ".$1.*")] = true
		}
	}
}

// TestAdmittedUpdateAsTheAPIServer: on an UPDATE, the object the API server admits keeps
// the stored object's status whatever the request's says, and its generation moves only
// when its spec changes (or, for a Deployment, its annotations), as defaults.Admitted
// gives it offline from the old object and the new manifest.
func TestAdmittedUpdateAsTheAPIServer(t *testing.T) {
	ctx := context.Background()
	docs, err := check.ReadObjects([]string{"testdata/defaults/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, nil)
	changes := map[string]func(client.Object){
		"nothing":     func(client.Object) {},
		"annotations": func(o client.Object) { o.SetAnnotations(map[string]string{"note": "changed"}) },
		"template": func(o client.Object) {
			workload.PodTemplate(o).Spec.Containers[0].Image = "changed:v2"
		},
		"minReadySeconds": func(o client.Object) {
			switch w := o.(type) {
			case *appsv1.Deployment:
				w.Spec.MinReadySeconds = 7
			case *appsv1.StatefulSet:
				w.Spec.MinReadySeconds = 7
			case *appsv1.DaemonSet:
				w.Spec.MinReadySeconds = 7
			}
		},
	}
	for _, doc := range docs {
		manifest := doc.Object.(client.Object)
		if manifest.GetName() != "minimal" {
			continue
		}
		kind := manifest.GetObjectKind().GroupVersionKind().Kind
		t.Run(kind, func(t *testing.T) {
			manifest.SetNamespace(ns)
			stored := manifest.DeepCopyObject().(client.Object)
			if err := k8s.Create(ctx, stored); err != nil {
				t.Fatal(err)
			}
			rolling(stored, 1, 1)
			if err := k8s.Status().Update(ctx, stored); err != nil {
				t.Fatal(err)
			}
			for change, apply := range changes {
				t.Run(change, func(t *testing.T) {
					sent := manifest.DeepCopyObject().(client.Object)
					sent.SetResourceVersion(stored.GetResourceVersion())
					sent.SetGeneration(42)
					rolling(sent, 42, 8) // a stale status in the manifest, which the API server ignores
					apply(sent)
					_, offline := defaults.Admitted(stored, sent)
					admitted := asJSON(t, sent)
					if err := k8s.Update(ctx, admitted, client.DryRunAll); err != nil {
						t.Fatal(err)
					}
					for _, f := range []string{"spec", "status"} {
						if diff := cmp.Diff(fieldOf(t, admitted, f), fieldOf(t, offline, f)); diff != "" {
							t.Errorf("%s (-server +offline):\n%s", f, diff)
						}
					}
					if admitted.GetGeneration() != offline.GetGeneration() {
						t.Errorf("generation %d offline, %d from the API server", offline.GetGeneration(), admitted.GetGeneration())
					}
				})
			}
		})
	}
}

// rolling writes the status of a rollout under way, as a workload's controller would
// (envtest runs none): the generation observed, and how many pods are updated.
func rolling(obj client.Object, observed int64, updated int32) {
	switch w := obj.(type) {
	case *appsv1.Deployment:
		w.Status = appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: 8, UpdatedReplicas: updated, AvailableReplicas: 7, ReadyReplicas: 7}
	case *appsv1.StatefulSet:
		w.Status = appsv1.StatefulSetStatus{ObservedGeneration: observed, Replicas: 8, UpdatedReplicas: updated, CurrentRevision: "a", UpdateRevision: "b"}
	case *appsv1.DaemonSet:
		w.Status = appsv1.DaemonSetStatus{ObservedGeneration: observed, DesiredNumberScheduled: 8, CurrentNumberScheduled: 8, UpdatedNumberScheduled: updated,
			NumberAvailable: 7, NumberReady: 7}
	}
}
