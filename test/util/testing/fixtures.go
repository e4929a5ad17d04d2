package testing

import (
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// HostedKubeAPIServer is a tenant kube-apiserver Deployment as hosted-control-plane
// operators write it, with a konnectivity-server sidecar, probes, resources and the
// volumes both need: about 13 KB of JSON once the API server has defaulted it. image
// is the kube-apiserver image tag; the status says a complete rollout.
func HostedKubeAPIServer(ns string, replicas int32, image string) *appsv1.Deployment {
	labels := map[string]string{"app": "kube-apiserver", "kamaji.clastix.io/name": "tenant-a", "kamaji.clastix.io/component": "deployment"}
	args := []string{
		"--advertise-address=10.96.0.10", "--allow-privileged=true", "--authorization-mode=Node,RBAC",
		"--client-ca-file=/etc/kubernetes/pki/ca.crt", "--enable-admission-plugins=NodeRestriction,PodSecurity",
		"--enable-bootstrap-token-auth=true", "--etcd-compaction-interval=0", "--etcd-prefix=/tenant-a",
		"--etcd-servers=unix:///run/kine/kine.sock", "--kubelet-client-certificate=/etc/kubernetes/pki/apiserver-kubelet-client.crt",
		"--kubelet-client-key=/etc/kubernetes/pki/apiserver-kubelet-client.key", "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
		"--proxy-client-cert-file=/etc/kubernetes/pki/front-proxy-client.crt", "--proxy-client-key-file=/etc/kubernetes/pki/front-proxy-client.key",
		"--requestheader-allowed-names=front-proxy-client", "--requestheader-client-ca-file=/etc/kubernetes/pki/front-proxy-ca.crt",
		"--secure-port=6443",
		"--service-account-issuer=https://tenant-a.example.com:6443", "--service-account-key-file=/etc/kubernetes/pki/sa.pub",
		"--service-account-signing-key-file=/etc/kubernetes/pki/sa.key", "--service-cluster-ip-range=10.96.0.0/16",
		"--tls-cert-file=/etc/kubernetes/pki/apiserver.crt", "--tls-private-key-file=/etc/kubernetes/pki/apiserver.key",
		"--egress-selector-config-file=/etc/kubernetes/egress/egress-selector-configuration.yaml",
		"--profiling=false", "--v=2",
	}
	pki := []string{"ca", "apiserver", "apiserver-kubelet-client", "front-proxy-ca", "front-proxy-client"}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, name := range pki {
		volumes = append(volumes, corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: "tenant-a-" + name + "-certificate", DefaultMode: ptr.To[int32](420)}}})
		mounts = append(mounts, corev1.VolumeMount{Name: name, ReadOnly: true, MountPath: "/etc/kubernetes/pki/" + name})
	}
	for _, cm := range []string{"egress-selector-config"} {
		volumes = append(volumes, corev1.Volume{Name: cm, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "tenant-a-" + cm}, DefaultMode: ptr.To[int32](420)}}})
	}
	volumes = append(volumes,
		corev1.Volume{Name: "kine-uds", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		corev1.Volume{Name: "konnectivity-uds", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}})
	mounts = append(mounts,
		corev1.VolumeMount{Name: "egress-selector-config", MountPath: "/etc/kubernetes/egress"},
		corev1.VolumeMount{Name: "kine-uds", MountPath: "/run/kine"},
		corev1.VolumeMount{Name: "konnectivity-uds", MountPath: "/run/konnectivity"})
	probe := func(path string, period, failures int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromInt32(6443), Scheme: corev1.URISchemeHTTPS}},
			InitialDelaySeconds: 0, TimeoutSeconds: 1, PeriodSeconds: period, SuccessThreshold: 1, FailureThreshold: failures}
	}
	resources := func(cpu, mem string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(mem)}}
	}
	secure := &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	apiserver := corev1.Container{
		Name: "kube-apiserver", Image: "registry.k8s.io/kube-apiserver:" + image,
		Command: []string{"kube-apiserver"}, Args: args,
		Ports: []corev1.ContainerPort{{Name: "https", ContainerPort: 6443, Protocol: corev1.ProtocolTCP}},
		Env: []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "1800MiB"},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}}},
		Resources: resources("250m", "2Gi"), VolumeMounts: mounts,
		LivenessProbe: probe("/livez", 10, 8), ReadinessProbe: probe("/readyz", 1, 3),
		TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy: corev1.PullIfNotPresent, SecurityContext: secure,
	}
	konnectivity := corev1.Container{
		Name: "konnectivity-server", Image: "registry.k8s.io/kas-network-proxy/proxy-server:v0.31.0",
		Command: []string{"/proxy-server"},
		Args: []string{"--logtostderr=true", "--uds-name=/run/konnectivity/konnectivity-server.sock",
			"--cluster-cert=/etc/kubernetes/pki/apiserver/apiserver.crt", "--cluster-key=/etc/kubernetes/pki/apiserver/apiserver.key",
			"--mode=grpc", "--server-port=0", "--agent-port=8132", "--admin-port=8133", "--health-port=8134",
			"--agent-namespace=kube-system", "--agent-service-account=konnectivity-agent", "--kubeconfig=/etc/kubernetes/konnectivity.conf",
			"--authentication-audience=system:konnectivity-server", fmt.Sprintf("--server-count=%d", replicas)},
		Ports: []corev1.ContainerPort{{Name: "agent", ContainerPort: 8132, Protocol: corev1.ProtocolTCP},
			{Name: "admin", ContainerPort: 8133, Protocol: corev1.ProtocolTCP}, {Name: "health", ContainerPort: 8134, Protocol: corev1.ProtocolTCP}},
		Resources: resources("100m", "128Mi"),
		VolumeMounts: []corev1.VolumeMount{{Name: "konnectivity-uds", MountPath: "/run/konnectivity"},
			{Name: "apiserver", ReadOnly: true, MountPath: "/etc/kubernetes/pki/apiserver"}},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz",
			Port: intstr.FromInt32(8134), Scheme: corev1.URISchemeHTTP}}, InitialDelaySeconds: 30, TimeoutSeconds: 60, PeriodSeconds: 10,
			SuccessThreshold: 1, FailureThreshold: 3},
		TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
		ImagePullPolicy: corev1.PullIfNotPresent, SecurityContext: secure,
	}
	d := &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-apiserver", Labels: labels, UID: "5b1e0a7e-3f4c-4f0a-9d0e-8a8a1d2c3b4e",
			ResourceVersion: "48213", Generation: 4, CreationTimestamp: metav1.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC),
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "4", "kamaji.clastix.io/hash": "9c1fb2e0d1f2d6f0"}},
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To(replicas),
			Selector:                &metav1.LabelSelector{MatchLabels: labels},
			Strategy:                appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1))}},
			RevisionHistoryLimit:    ptr.To[int32](10),
			ProgressDeadlineSeconds: ptr.To[int32](600),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{"kamaji.clastix.io/config-hash": "5f7d8e9a0b1c2d3e"}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{apiserver, konnectivity}, Volumes: volumes,
					RestartPolicy: corev1.RestartPolicyAlways, TerminationGracePeriodSeconds: ptr.To[int64](30),
					DNSPolicy: corev1.DNSClusterFirst, SchedulerName: corev1.DefaultSchedulerName,
					ServiceAccountName: "tenant-a-kube-apiserver", DeprecatedServiceAccount: "tenant-a-kube-apiserver",
					SecurityContext:   &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					PriorityClassName: "system-cluster-critical",
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
						LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: corev1.LabelHostname}}}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: corev1.LabelTopologyZone,
						WhenUnsatisfiable: corev1.ScheduleAnyway, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}},
					Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
				},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 4, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", Message: "Deployment has minimum availability.",
					LastUpdateTime: metav1.Date(2026, 11, 2, 9, 1, 0, 0, time.UTC), LastTransitionTime: metav1.Date(2026, 11, 2, 9, 1, 0, 0, time.UTC)},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", Message: `ReplicaSet "kube-apiserver-6d5f8b7c9d" has successfully progressed.`,
					LastUpdateTime: metav1.Date(2026, 11, 2, 9, 2, 0, 0, time.UTC), LastTransitionTime: metav1.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)},
			}},
	}
	d.ManagedFields = []metav1.ManagedFieldsEntry{
		managedFields("kamaji", metav1.ManagedFieldsOperationUpdate, "", map[string]any{"metadata": d.ObjectMeta.Labels, "spec": d.Spec}),
		managedFields("kube-controller-manager", metav1.ManagedFieldsOperationUpdate, "status", map[string]any{"status": d.Status}),
	}
	return d
}

// managedFields records the fields of v as one manager's, in the API server's FieldsV1 form.
func managedFields(manager string, op metav1.ManagedFieldsOperationType, subresource string, v any) metav1.ManagedFieldsEntry {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var tree any
	if err := json.Unmarshal(raw, &tree); err != nil {
		panic(err)
	}
	set, err := json.Marshal(fieldSet(tree))
	if err != nil {
		panic(err)
	}
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "apps/v1", Subresource: subresource,
		Time: ptr.To(metav1.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)), FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: set}}
}

func fieldSet(v any) map[string]any {
	out := map[string]any{}
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			out["f:"+k] = fieldSet(c)
		}
	case []any:
		for i, c := range t {
			key := fmt.Sprintf("i:%d", i)
			if m, ok := c.(map[string]any); ok {
				if name, ok := m["name"].(string); ok {
					key = fmt.Sprintf(`k:{"name":%q}`, name)
				}
			}
			child := fieldSet(c)
			child["."] = map[string]any{}
			out[key] = child
		}
	}
	return out
}
