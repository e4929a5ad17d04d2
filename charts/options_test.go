package charts

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// TestRenderAsDependency renders the chart as the dependency of an umbrella chart that
// passes global values and turns it on and off with the condition holdfast.enabled.
func TestRenderAsDependency(t *testing.T) {
	umbrella := func() *chart.Chart {
		hf, err := loader.Load(Dir())
		if err != nil {
			t.Fatal(err)
		}
		c := &chart.Chart{Metadata: &chart.Metadata{APIVersion: chart.APIVersionV2, Name: "platform", Version: "1.0.0",
			Dependencies: []*chart.Dependency{{Name: "holdfast", Version: hf.Metadata.Version, Condition: "holdfast.enabled"}}}}
		c.AddDependency(hf)
		return c
	}
	for _, enabled := range []bool{true, false} {
		objs, err := renderChart(umbrella(), "platform", "platform-system", map[string]any{
			"global":   map[string]any{"imageRegistry": "registry.example", "imagePullSecrets": []any{}},
			"holdfast": map[string]any{"enabled": enabled, "replicaCount": 3},
		})
		if err != nil {
			t.Fatalf("enabled=%t: %v", enabled, err)
		}
		d := byName(objs, "Deployment")["platform-holdfast"]
		if enabled && (d == nil || d.GetNamespace() != "platform-system") {
			t.Errorf("enabled: no Deployment platform-holdfast in platform-system among %d objects", len(objs))
		}
		if !enabled && len(objs) != 0 {
			t.Errorf("disabled: rendered %d objects", len(objs))
		}
	}
}

func TestRenderMonitoring(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"metrics": map[string]any{
		"serviceMonitor": map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kube-prometheus-stack"}},
		"prometheusRule": map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "kube-prometheus-stack", "team": "platform"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"ServiceMonitor/holdfast", "PrometheusRule/holdfast"} {
		u := objs[key]
		if u == nil {
			t.Fatalf("missing %s", key)
		}
		if l := u.GetLabels(); l["release"] != "kube-prometheus-stack" || l["app.kubernetes.io/name"] != "holdfast" {
			t.Errorf("%s labels %v: want the chart's and the additional ones", key, l)
		}
	}

	alerts := map[string]map[string]any{}
	groups, _, _ := unstructured.NestedSlice(objs["PrometheusRule/holdfast"].Object, "spec", "groups")
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			rule := r.(map[string]any)
			alerts[rule["alert"].(string)] = rule
		}
	}
	// Each policy's deferrals are set against its own admitted evictions
	// (holdfast_eviction_reviews_total carries the policy on every series), never against
	// every policy's: on(), or the deprecated holdfast_evictions_total whose admitted
	// evictions carry no policy, would let one policy's admissions silence another's alert.
	deferred := alerts["HoldfastEvictionsDeferredLong"]
	expr := fmt.Sprint(deferred["expr"])
	for _, bad := range []string{"on()", "on ()", "holdfast_evictions_total", `policy=""`} {
		if strings.Contains(expr, bad) {
			t.Errorf("HoldfastEvictionsDeferredLong reads %s: %s", bad, expr)
		}
	}
	if !strings.Contains(expr, `outcome="deferred"`) || strings.Count(expr, "sum by (policy) (increase(holdfast_eviction_reviews_total") != 2 {
		t.Errorf("HoldfastEvictionsDeferredLong does not match deferrals and admissions by policy: %s", expr)
	}
	if deferred["for"] != "30m" {
		t.Errorf("HoldfastEvictionsDeferredLong for %v, want deferredFor (30m)", deferred["for"])
	}
	// A stuck pod is read from the longest hold per policy, against deferredFor in seconds;
	// the per-policy deferral alert waits while it fires.
	if stuck := fmt.Sprint(alerts["HoldfastEvictionStuck"]["expr"]); stuck !=
		`max by (policy) (holdfast_eviction_longest_hold_seconds{namespace="holdfast-system"}) > 1800` {
		t.Errorf("HoldfastEvictionStuck: %s", stuck)
	}
	if !strings.HasSuffix(expr, `unless on (policy) (max by (policy) (holdfast_eviction_longest_hold_seconds{namespace="holdfast-system"}) > 1800)`) {
		t.Errorf("HoldfastEvictionsDeferredLong does not wait while HoldfastEvictionStuck fires: %s", expr)
	}
	// The Prometheus operator names a ServiceMonitor's job after the Service it scrapes.
	unavailable := alerts["HoldfastUnavailable"]
	if unavailable == nil {
		t.Fatalf("no HoldfastUnavailable alert among %v", slices.Sorted(maps.Keys(alerts)))
	}
	if expr := fmt.Sprint(unavailable["expr"]); objs["Service/holdfast-metrics"] == nil ||
		!strings.Contains(expr, `absent(up{namespace="holdfast-system", job="holdfast-metrics"} == 1)`) ||
		!strings.Contains(expr, `kube_deployment_status_replicas_available{namespace="holdfast-system", deployment="holdfast"} == 0`) {
		t.Errorf("HoldfastUnavailable does not watch the metrics Service's job and the Deployment: %s", expr)
	}
	if unavailable["for"] != "5m" {
		t.Errorf("HoldfastUnavailable for %v", unavailable["for"])
	}
}

func TestRenderPriorityClass(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"priorityClassName": "system-cluster-critical"})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	typed(t, objs["Deployment/holdfast"], &d)
	if d.Spec.Template.Spec.PriorityClassName != "system-cluster-critical" {
		t.Errorf("priorityClassName %q", d.Spec.Template.Spec.PriorityClassName)
	}
}

// TestRenderPDB: one replica gets no budget (minAvailable 1 would keep its node from ever
// draining); more replicas get the one asked for.
func TestRenderPDB(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"replicaCount": 1})
	if err != nil {
		t.Fatal(err)
	}
	if objs["PodDisruptionBudget/holdfast"] != nil {
		t.Error("replicaCount 1 renders a PodDisruptionBudget")
	}
	objs, err = render(t, "holdfast-system", map[string]any{"replicaCount": 3, "podDisruptionBudget": map[string]any{"minAvailable": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedFieldNoCopy(objs["PodDisruptionBudget/holdfast"].Object, "spec", "minAvailable"); fmt.Sprint(got) != "2" {
		t.Errorf("minAvailable %v, want 2", got)
	}
}

func TestRenderNetworkPolicy(t *testing.T) {
	objs, err := render(t, "holdfast-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	if objs["NetworkPolicy/holdfast"] != nil {
		t.Error("a NetworkPolicy by default")
	}
	monitoring := map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{corev1.LabelMetadataName: "monitoring"}}}
	objs, err = render(t, "holdfast-system", map[string]any{"networkPolicy": map[string]any{"enabled": true, "metricsFrom": []any{monitoring}}})
	if err != nil {
		t.Fatal(err)
	}
	var np networkingv1.NetworkPolicy
	typed(t, objs["NetworkPolicy/holdfast"], &np)
	var d appsv1.Deployment
	typed(t, objs["Deployment/holdfast"], &d)
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, np.Spec.PodSelector.MatchLabels); diff != "" {
		t.Errorf("the policy selects other pods than the Deployment's (-deployment +policy):\n%s", diff)
	}
	// Each rule admits one of the container's ports: the webhook from anywhere (the API
	// server), the metrics from the monitoring namespace.
	ports := map[string]int32{}
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		ports[p.Name] = p.ContainerPort
	}
	allowed := map[int32][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			port, ok := ports[p.Port.String()]
			if !ok {
				t.Errorf("the policy names port %s, which the container does not have", p.Port)
			}
			allowed[port] = rule.From
		}
	}
	if from, ok := allowed[9443]; !ok || len(from) != 0 {
		t.Errorf("the webhook port must be open to the API server (any source): %v, %v", ok, from)
	}
	if from := allowed[8080]; len(from) != 1 || from[0].NamespaceSelector == nil || from[0].NamespaceSelector.MatchLabels[corev1.LabelMetadataName] != "monitoring" {
		t.Errorf("the metrics port must be open to metricsFrom only: %v", from)
	}
	if len(allowed) != 2 || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("ingress only, to the webhook and metrics ports: %v, %v", allowed, np.Spec.PolicyTypes)
	}
}

func TestRenderHostNetwork(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"hostNetwork": true,
		"webhook": map[string]any{"port": 10260}, "metrics": map[string]any{"port": 10261}, "probes": map[string]any{"port": 10262}})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	typed(t, objs["Deployment/holdfast"], &d)
	pod := d.Spec.Template.Spec
	if !pod.HostNetwork || pod.DNSPolicy != corev1.DNSClusterFirstWithHostNet {
		t.Errorf("hostNetwork %t, dnsPolicy %q", pod.HostNetwork, pod.DNSPolicy)
	}
	c := pod.Containers[0]
	for _, p := range c.Ports {
		if p.HostPort != p.ContainerPort {
			t.Errorf("port %s: hostPort %d, containerPort %d", p.Name, p.HostPort, p.ContainerPort)
		}
	}
	for _, arg := range []string{"--webhook-port=10260", "--metrics-bind-address=:10261", "--health-probe-bind-address=:10262"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("missing %s in %v", arg, c.Args)
		}
	}
	if objs, _ := render(t, "holdfast-system", nil); objs != nil {
		var def appsv1.Deployment
		typed(t, objs["Deployment/holdfast"], &def)
		if def.Spec.Template.Spec.HostNetwork || def.Spec.Template.Spec.DNSPolicy != "" || def.Spec.Template.Spec.Containers[0].Ports[0].HostPort != 0 {
			t.Error("host network by default")
		}
	}
}

// TestRenderNamesAndPodMetadata: fullnameOverride names every object and every reference
// to one; podLabels and podAnnotations reach the pods without touching the selector.
func TestRenderNamesAndPodMetadata(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{"fullnameOverride": "guard",
		"podLabels": map[string]any{"team": "platform"}, "podAnnotations": map[string]any{"example.com/scrape": "true"}})
	if err != nil {
		t.Fatal(err)
	}
	for key, u := range objs {
		if u.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if name := u.GetName(); name != "guard" && !strings.HasPrefix(name, "guard-") {
			t.Errorf("%s is not named after fullnameOverride", key)
		}
	}
	var d appsv1.Deployment
	typed(t, objs["Deployment/guard"], &d)
	tmpl := d.Spec.Template
	if tmpl.Labels["team"] != "platform" || tmpl.Annotations["example.com/scrape"] != "true" {
		t.Errorf("pod labels %v, annotations %v", tmpl.Labels, tmpl.Annotations)
	}
	if diff := cmp.Diff(map[string]string{"app.kubernetes.io/name": "holdfast", "app.kubernetes.io/instance": "holdfast"}, d.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector changed (-want +got):\n%s", diff)
	}
	args := tmpl.Spec.Containers[0].Args
	for _, arg := range []string{"--webhook-secret=guard-webhook-cert", "--webhook-service=guard-webhook", "--webhook-configuration=guard", "--leader-election-id=guard"} {
		if !slices.Contains(args, arg) {
			t.Errorf("missing %s in %v", arg, args)
		}
	}
	if tmpl.Spec.ServiceAccountName != "guard" || tmpl.Spec.Volumes[0].Secret.SecretName != "guard-webhook-cert" {
		t.Errorf("service account %q, secret %q", tmpl.Spec.ServiceAccountName, tmpl.Spec.Volumes[0].Secret.SecretName)
	}
	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	typed(t, objs["ValidatingWebhookConfiguration/guard"], &vwc)
	for _, w := range vwc.Webhooks {
		if w.ClientConfig.Service.Name != "guard-webhook" {
			t.Errorf("%s calls Service %s", w.Name, w.ClientConfig.Service.Name)
		}
	}
	// The ClusterRole lets holdfast update its own webhook configurations only: the
	// installed one, and the one its leader derives from the policies.
	var cr rbacv1.ClusterRole
	typed(t, objs["ClusterRole/guard"], &cr)
	for _, r := range cr.Rules {
		if slices.Contains(r.Resources, "validatingwebhookconfigurations") && (slices.Contains(r.Verbs, "update") || slices.Contains(r.Verbs, "patch")) &&
			!slices.Equal(r.ResourceNames, []string{"guard"}) && !slices.Equal(r.ResourceNames, []string{"guard-guards"}) {
			t.Errorf("the ClusterRole may update webhook configurations %v, want only guard and guard-guards", r.ResourceNames)
		}
	}
}

// TestRenderSecurityContext: the pod's and the container's securityContext and extra
// flags are values. The defaults are restricted (assertRestricted, TestRenderDefaults); an
// OpenShift-style install unsets the user and group, which the platform assigns, and
// keeps everything else; extra flags follow the chart's, so that a repeated flag wins.
func TestRenderSecurityContext(t *testing.T) {
	objs, err := render(t, "holdfast-system", map[string]any{
		"podSecurityContext": map[string]any{"runAsUser": nil, "runAsGroup": nil},
		"extraArgs":          []any{"--v=2", "--pprof-bind-address=:6060"},
	})
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	typed(t, objs["Deployment/holdfast"], &d)
	pod := d.Spec.Template.Spec
	assertRestricted(t, &pod)
	if psc := pod.SecurityContext; psc.RunAsUser != nil || psc.RunAsGroup != nil {
		t.Errorf("runAsUser %v, runAsGroup %v: want both unset", psc.RunAsUser, psc.RunAsGroup)
	}
	args := pod.Containers[0].Args
	if n := len(args); n < 3 || !slices.Equal(args[n-2:], []string{"--v=2", "--pprof-bind-address=:6060"}) || args[0] != "serve" {
		t.Errorf("args %v: want serve first and the extra flags last", args)
	}

	// The defaults, spelled out: non-root 65532, no privilege escalation, a read-only root
	// filesystem, every capability dropped, seccomp RuntimeDefault.
	def, err := render(t, "holdfast-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	typed(t, def["Deployment/holdfast"], &d)
	want := corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}
	if diff := cmp.Diff(&want, d.Spec.Template.Spec.SecurityContext); diff != "" {
		t.Errorf("default pod securityContext (-want +got):\n%s", diff)
	}
	wantC := corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
		Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}
	if diff := cmp.Diff(&wantC, d.Spec.Template.Spec.Containers[0].SecurityContext); diff != "" {
		t.Errorf("default container securityContext (-want +got):\n%s", diff)
	}

	// The schema refuses what is no securityContext or flag: a misspelt key, a wrong type,
	// an argument that is not a flag.
	for name, vals := range map[string]map[string]any{
		"misspelt":         {"securityContext": map[string]any{"readOnlyRootFileSystem": true}},
		"not a boolean":    {"securityContext": map[string]any{"privileged": "no"}},
		"negative user":    {"podSecurityContext": map[string]any{"runAsUser": -1}},
		"seccomp type":     {"podSecurityContext": map[string]any{"seccompProfile": map[string]any{"type": "Default"}}},
		"arg without flag": {"extraArgs": []any{"v=2"}},
		"args not a list":  {"extraArgs": "--v=2"},
	} {
		if _, err := render(t, "holdfast-system", vals); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestDeferredForInSeconds renders deferredFor in each unit the values schema allows as the
// seconds HoldfastEvictionStuck compares the longest hold with.
func TestDeferredForInSeconds(t *testing.T) {
	for deferredFor, seconds := range map[string]string{"90s": "90", "45m": "2700", "2h": "7200"} {
		objs, err := render(t, "holdfast-system", map[string]any{"metrics": map[string]any{
			"prometheusRule": map[string]any{"enabled": true, "deferredFor": deferredFor}}})
		if err != nil {
			t.Fatalf("deferredFor %s: %v", deferredFor, err)
		}
		groups, _, _ := unstructured.NestedSlice(objs["PrometheusRule/holdfast"].Object, "spec", "groups")
		var stuck string
		for _, g := range groups {
			for _, r := range g.(map[string]any)["rules"].([]any) {
				if rule := r.(map[string]any); rule["alert"] == "HoldfastEvictionStuck" {
					stuck = fmt.Sprint(rule["expr"])
				}
			}
		}
		if !strings.HasSuffix(stuck, "> "+seconds) {
			t.Errorf("deferredFor %s: HoldfastEvictionStuck is %q, want a threshold of %s seconds", deferredFor, stuck, seconds)
		}
	}
}
