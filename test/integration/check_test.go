//go:build integration

package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/check"
	"github.com/holdfast-dev/holdfast/internal/interception"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestCheckAgreesWithTheWebhook: with every sample RolloutPolicy in force, `holdfast
// check` gives exactly the answer the API server returns from holdfast's webhook for the
// same changes: the same denial message, or an admission. check defaults the manifests as
// the API server does (internal/defaults).
func TestCheckAgreesWithTheWebhook(t *testing.T) {
	ctx := context.Background()
	docs, err := check.ReadObjects([]string{"../../config/samples/"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var policies []v1alpha1.RolloutPolicy
	for _, d := range docs {
		if p, ok := d.Object.(*v1alpha1.RolloutPolicy); ok {
			policies = append(policies, *p)
			if err := k8s.Create(ctx, p.DeepCopy()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
			intercepted(t, p.DeepCopy())
		}
	}
	if len(policies) < 4 {
		t.Fatalf("found %d sample RolloutPolicies", len(policies))
	}
	hosted := createNamespace(t, map[string]string{"holdfast.dev/hosted-control-plane": "true"})
	kubeSystem := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem); err != nil {
		t.Fatal(err)
	}
	hostedNS := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: hosted}, hostedNS); err != nil {
		t.Fatal(err)
	}
	rolling := func(maxUnavailable int32) appsv1.DeploymentStrategy {
		return appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
			MaxUnavailable: ptr.To(intstr.FromInt32(maxUnavailable)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	}
	apiserver := func(replicas int32, serverCount string) *appsv1.Deployment {
		d := konnectivity(hosted, replicas, serverCount)
		d.Spec.Strategy = rolling(1)
		d.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](30)
		return d
	}
	kiam := utiltesting.MakeDeployment("kube-system", "kiam-server").Replicas(3).Obj()
	kiam.Spec.Strategy = rolling(2)
	kiam.Spec.Template.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	agent := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "konnectivity-agent", Labels: map[string]string{"k8s-app": "konnectivity-agent"}},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"k8s-app": "konnectivity-agent"}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(0))}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"k8s-app": "konnectivity-agent"}},
				Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30), Containers: []corev1.Container{{Name: "agent", Image: "proxy-agent:v0.33.0"}}}}}}

	cases := []struct {
		name     string
		old, new client.Object
	}{
		{"a kube-apiserver created with a matching --server-count", nil, apiserver(3, "3")},
		{"a scale without --server-count", apiserver(3, "3"), apiserver(5, "3")},
		{"a kube-apiserver created with a mismatched --server-count", nil, func() client.Object {
			d := apiserver(3, "1")
			d.Name = "kube-apiserver-b"
			return d
		}()},
		{"a kiam-server with an unsafe strategy and pod shape", nil, kiam},
		{"a konnectivity-agent DaemonSet without surge or readiness probe", nil, agent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := []check.Document{{Object: kubeSystem.DeepCopy()}, {Object: hostedNS.DeepCopy()}}
			if tc.old != nil {
				in = append(in, check.Document{Object: tc.old.DeepCopyObject()})
			}
			in = append(in, check.Document{Object: tc.new.DeepCopyObject()})
			results, err := check.Evaluate(policies, in, nil, nil, authenticationv1.UserInfo{}, time.Now())
			if err != nil || len(results) != 1 {
				t.Fatalf("check: %v, %d results", err, len(results))
			}
			var messages []string
			for _, v := range results[0].Violations {
				messages = append(messages, v.Message)
			}

			if tc.old != nil {
				old := tc.old.DeepCopyObject().(client.Object)
				if err := k8s.Create(ctx, old); err != nil {
					t.Fatalf("the webhook refused the old object: %v", err)
				}
				t.Cleanup(func() { _ = k8s.Delete(context.Background(), old) })
				err = k8s.Update(ctx, withVersion(tc.new.DeepCopyObject().(client.Object), old.GetResourceVersion()))
			} else {
				obj := tc.new.DeepCopyObject().(client.Object)
				err = k8s.Create(ctx, obj)
				t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
			}
			switch {
			case results[0].Action == check.ActionUndecided:
				// Offline, a rule that reads the cluster (a new DaemonSet's limits read the
				// nodes it runs on) is named, never passed; check --cluster decides it
				// (TestCheckCorpusAgreesWithTheWebhook).
				if len(results[0].Undecided) == 0 {
					t.Errorf("undecided without a rule named: %+v", results[0])
				}
			case results[0].Action == "deny":
				want := strings.Join(messages, "; ")
				got, ok := deniedBy(err, interception.TypeRollout)
				if d, named := decisionOf(got); !ok || !named || d != want {
					t.Errorf("the webhook answered\n  %v\nholdfast check says\n  %s", err, want)
				}
			case err != nil:
				t.Errorf("the webhook refused what holdfast check admits (%s): %v", results[0].Action, err)
			}
		})
	}
}

func withVersion(obj client.Object, rv string) client.Object {
	obj.SetResourceVersion(rv)
	return obj
}

// TestCheckReadsHistoryFromTheCluster: with the cluster to read revisions from, `holdfast
// check` refuses a new revision of a konnectivity-agent Deployment sooner than the sample
// policy's minInterval after the last one, exactly as the webhook does; without it, it says
// it does not decide minInterval.
func TestCheckReadsHistoryFromTheCluster(t *testing.T) {
	ctx := context.Background()
	docs, err := check.ReadObjects([]string{"../../config/samples/rolloutpolicy_konnectivity_agent.yaml"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := docs[0].Object.(*v1alpha1.RolloutPolicy)
	if err := k8s.Create(ctx, p.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p.DeepCopy())

	d := utiltesting.MakeDeployment("kube-system", "konnectivity-agent").Replicas(3).Label("k8s-app", "konnectivity-agent").Obj()
	d.Spec.MinReadySeconds = 10
	d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
		MaxUnavailable: ptr.To(intstr.FromInt32(1)), MaxSurge: ptr.To(intstr.FromInt32(1))}}
	d.Spec.Template.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8093)}}}
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatalf("creating the agent: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), d) })
	// The Deployment controller's ReplicaSet for the current template, created just now.
	rs := &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "konnectivity-agent-1", Labels: d.Spec.Template.Labels,
		Annotations:     map[string]string{"deployment.kubernetes.io/revision": "1"},
		OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(d, appsv1.SchemeGroupVersion.WithKind("Deployment"))}},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: d.Spec.Selector, Template: d.Spec.Template}}
	if err := k8s.Create(ctx, rs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), rs) })
	eventually(t, "the ReplicaSet in holdfast's cache", func() bool {
		return cached.Get(ctx, client.ObjectKeyFromObject(rs), &appsv1.ReplicaSet{}) == nil
	})
	kubeSystem := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "kube-system"}, kubeSystem); err != nil {
		t.Fatal(err)
	}
	old := d.DeepCopy()
	old.Status = appsv1.DeploymentStatus{ObservedGeneration: old.Generation, Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3}
	next := old.DeepCopy()
	next.Spec.Template.Spec.Containers[0].Image = "proxy-agent:next"
	in := []check.Document{{Object: kubeSystem}, {Object: old}, {Object: next}}

	offline, err := check.Evaluate([]v1alpha1.RolloutPolicy{*p}, in, nil, nil, authenticationv1.UserInfo{}, time.Now())
	if err != nil || offline[0].Action != check.ActionUndecided {
		t.Fatalf("without the cluster: %v, %+v; want minInterval not decided", err, offline)
	}
	cluster, err := check.NewCluster(restConfig, holdfastNamespace)
	if err != nil {
		t.Fatal(err)
	}
	results, err := check.Evaluate([]v1alpha1.RolloutPolicy{*p}, in, nil, cluster, authenticationv1.UserInfo{}, time.Now())
	if err != nil || len(results) != 1 || results[0].Action != "deny" {
		t.Fatalf("with the cluster: %v, %+v; want minInterval to refuse", err, results)
	}
	// The webhook reads the status the API server holds: give it the same.
	old.Status.ObservedGeneration = 1
	if err := k8s.Status().Update(ctx, withVersion(old.DeepCopy(), d.ResourceVersion)); err != nil {
		t.Fatal(err)
	}
	cur := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(d), cur); err != nil {
		t.Fatal(err)
	}
	cur.Spec.Template.Spec.Containers[0].Image = "proxy-agent:next"
	err = k8s.Update(ctx, cur)
	// The two decided a few milliseconds apart: compare the answers with the durations out.
	durations := regexp.MustCompile(`[0-9]+(\.[0-9]+)?(ms|s|m)`)
	want := results[0].Violations[0].Message
	got, ok := deniedBy(err, interception.TypeRollout)
	if d, named := decisionOf(got); !ok || !named || durations.ReplaceAllString(d, "D") != durations.ReplaceAllString(want, "D") {
		t.Errorf("the webhook answered\n  %v\nholdfast check says\n  %s", err, want)
	}
}

// TestCheckCommandReadsTheCluster: the command line, given a kubeconfig and a context
// whose user is bound only to config/check-reader, reads the cluster (--cluster implied),
// decides at --now, and says offline what it does not decide.
func TestCheckCommandReadsTheCluster(t *testing.T) {
	ctx := context.Background()
	installCheckReader(t)
	ns := createNamespace(t, nil)
	p := utiltesting.MakeRolloutPolicy("pace").Obj()
	p.Spec.Rules.MinInterval = &metav1.Duration{Duration: time.Hour}
	applyPolicy(t, ns, p)
	d := utiltesting.MakeDeployment(ns, "kas").Obj()
	if err := k8s.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	r := &corpusRun{t: t, ns: ns}
	stored := finished(r, d)
	next := withImage(stored.(*appsv1.Deployment), "registry.example/main:2")
	next.ManagedFields, next.ResourceVersion, next.UID, next.Status = nil, "", "", appsv1.DeploymentStatus{}
	dir := t.TempDir()
	files := filepath.Join(dir, "kas.yaml")
	policies := filepath.Join(dir, "policy.yaml")
	write := func(path string, obj any) {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	next.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
	write(files, next)
	write(policies, map[string]any{"apiVersion": "holdfast.dev/v1alpha1", "kind": "RolloutPolicy",
		"metadata": map[string]any{"name": p.Name}, "spec": p.Spec})

	kubeconfig := filepath.Join(dir, "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: restConfig.Host, CertificateAuthorityData: restConfig.CAData}
	kc.AuthInfos["ci"] = &clientcmdapi.AuthInfo{ClientCertificateData: restConfig.CertData, ClientKeyData: restConfig.KeyData, Token: restConfig.BearerToken,
		Impersonate: checkReader.UserName, ImpersonateGroups: checkReader.Groups}
	kc.Contexts["ci"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "ci"}
	kc.Contexts["elsewhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: "ci"}
	kc.CurrentContext = "elsewhere"
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		t.Fatal(err)
	}
	run := func(o check.Options) (check.Result, int) {
		t.Helper()
		o.Policies, o.Files, o.Output, o.HoldfastNamespace = []string{policies}, []string{files}, "json", holdfastNamespace
		var out bytes.Buffer
		err := check.Run(&out, nil, &o, time.Now())
		code := 0
		var ee *check.ExitError
		if errors.As(err, &ee) {
			code = ee.Code
		} else if err != nil {
			t.Fatal(err)
		}
		var report check.Report
		if code == 2 {
			return check.Result{}, code
		}
		if jerr := json.Unmarshal(out.Bytes(), &report); jerr != nil || len(report.Results) != 1 {
			t.Fatalf("exit %d (%v): %s", code, err, out.String())
		}
		return report.Results[0], code
	}
	if r, code := run(check.Options{}); code != 0 || r.Action != check.ActionUndecided || r.Operation != "CREATE" {
		t.Errorf("offline: exit %d, %+v; want an undecided CREATE (check does not know the workload exists)", code, r)
	}
	if r, code := run(check.Options{Kubeconfig: kubeconfig, Context: "ci"}); code != 1 || r.Action != "deny" || r.Code != 403 ||
		r.Operation != "UPDATE" || len(r.Violations) != 1 || r.Violations[0].Rule != "minInterval" {
		t.Errorf("with the cluster: exit %d, %+v; want the UPDATE refused by minInterval", code, r)
	}
	later := time.Now().Add(2 * time.Hour).UTC().Format(time.RFC3339)
	if r, code := run(check.Options{Kubeconfig: kubeconfig, Context: "ci", Now: later}); code != 0 || r.Action != "allow" || r.Code != 200 {
		t.Errorf("--now two hours later: exit %d, %+v; want it admitted", code, r)
	}
	if _, code := run(check.Options{Kubeconfig: kubeconfig}); code != 2 {
		t.Errorf("the kubeconfig's current context reaches no cluster: exit %d, want 2", code)
	}
}
