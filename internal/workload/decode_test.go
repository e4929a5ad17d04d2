package workload

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	sigsjson "sigs.k8s.io/json"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestDecodeReadsAsTyped holds Decode, which walks the JSON for what decisions read, to
// From over the same JSON decoded whole as the API machinery decodes it.
func TestDecodeReadsAsTyped(t *testing.T) {
	hosted := utiltesting.HostedKubeAPIServer("tenant-a", 3, "v1.37.1")
	hosted.Status.Conditions = []appsv1.DeploymentCondition{
		{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
		{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"},
	}
	hosted.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxUnavailable: ptr.To(intstr.FromString("25%")), MaxSurge: ptr.To(intstr.FromInt32(0))}
	sts := &appsv1.StatefulSet{Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](5), Template: hosted.Spec.Template, Ordinals: &appsv1.StatefulSetOrdinals{Start: 2},
		UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3)}}},
		Status: appsv1.StatefulSetStatus{CurrentRevision: "a", UpdateRevision: "b", UpdatedReplicas: 1, ReadyReplicas: 4}}
	sts.Name, sts.Namespace, sts.Generation = "konnectivity", "tenant-a", 4
	ds := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: hosted.Spec.Template, MinReadySeconds: 10,
		UpdateStrategy: appsv1.DaemonSetUpdateStrategy{Type: appsv1.OnDeleteDaemonSetStrategyType}},
		Status: appsv1.DaemonSetStatus{DesiredNumberScheduled: 6, CurrentNumberScheduled: 6, UpdatedNumberScheduled: 5, NumberAvailable: 6}}
	ds.Name, ds.Namespace = "agent", "kube-system"

	if w, err := Decode(v1alpha1.KindStatefulSet, []byte(mustJSON(t, sts))); err != nil || w.OrdinalStart != 2 {
		t.Errorf("spec.ordinals.start read as %v (%v), want 2", w, err)
	}
	cases := map[string]struct {
		kind string
		json string
	}{
		"hosted kube-apiserver":   {"Deployment", mustJSON(t, hosted)},
		"partitioned StatefulSet": {"StatefulSet", mustJSON(t, sts)},
		"OnDelete DaemonSet":      {"DaemonSet", mustJSON(t, ds)},
		// Names may be escaped; strings may hold escapes and non-ASCII; whitespace anywhere.
		"escapes and whitespace": {"Deployment", `{ "metadata" : {"name":"d\u0031","labels":{"app":"x"}},
			"sp\u0065c": {"replicas": 2, "progressDeadlineSeconds": 1, "strategy": {"rollingUpdate": {"maxSurge": "50%"}},
			"template": { "spec" : { "containers" : [ {"n\u0061me": "srv", "args" : [ "--a=\u00e9", "--server-count" , "2", "--b=\"q\"", "--c=ü" ] },
				null, {"name":"other","command":null} ] } } },
			"status": {"conditions": [null, {"type":"Progressing","status":"False","reason":"ProgressDeadline\u0045xceeded"}]}}`},
		"nulls": {"Deployment", `{"metadata":null,"spec":{"replicas":null,"strategy":null,"template":{"spec":{"containers":null}}},"status":{"conditions":null}}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			if !readsAsTyped(t, c.kind, []byte(c.json)) {
				t.Fatal("one of the decoders refused the object")
			}
		})
	}
}

// FuzzDecodeReadsAsTyped: whenever both Decode and the API machinery's decoder read an
// object, they read the same workload; nothing panics.
func FuzzDecodeReadsAsTyped(f *testing.F) {
	f.Add(mustJSON(f, utiltesting.HostedKubeAPIServer("tenant-a", 3, "v1.37.1")))
	f.Add(`{"spec":{"template":{"spec":{"containers":[{"name":"a","args":["--x","1"]}]}}},"status":{"conditions":[{"type":"Progressing","status":"False","reason":"ProgressDeadlineExceeded"}]}}`)
	f.Add(`{"metadata":{"labels":{"a":"b"}},"spec":{"replicas":2,"strategy":{"rollingUpdate":{"maxSurge":"1%","maxUnavailable":0}},"template":{"spec":{"containers":[{"name":"\u0061","command":["x\"y"]}]}}}}`)
	f.Fuzz(func(t *testing.T, raw string) {
		for _, kind := range []string{"Deployment", "StatefulSet", "DaemonSet"} {
			readsAsTyped(t, kind, []byte(raw))
		}
	})
}

// readsAsTyped compares Decode with From over the object decoded whole, when both read it.
func readsAsTyped(t *testing.T, kind string, raw []byte) bool {
	t.Helper()
	lean, err := Decode(v1alpha1.WorkloadKind(kind), raw)
	if err != nil {
		t.Logf("Decode: %v", err)
		return false
	}
	obj, _ := New(v1alpha1.WorkloadKind(kind))
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, obj); err != nil {
		t.Logf("typed: %v", err)
		return false
	}
	typed, err := From(obj)
	if err != nil {
		t.Fatal(err)
	}
	opts := cmp.Options{cmp.Comparer(func(a, b *Template) bool { return SameTemplate(a, b) }), cmpopts.IgnoreUnexported(Workload{})}
	if diff := cmp.Diff(typed, lean, opts); diff != "" {
		t.Errorf("Decode reads differently from From over the typed object (-typed +lean):\n%s", diff)
	}
	ts, terr := typed.Selector()
	ls, lerr := lean.Selector()
	if diff := cmp.Diff(ts, ls); diff != "" || (terr == nil) != (lerr == nil) {
		t.Errorf("Decode reads spec.selector differently from From (%v, %v; -typed +lean):\n%s", terr, lerr, diff)
	}
	containers := []string{"missing"}
	spec, err := typed.Template.Spec()
	if err != nil {
		t.Fatal(err)
	}
	// The flags asked about: every element of every command line, and its name before an
	// "=", as well as one no command line has.
	flags := []string{"--missing"}
	for _, c := range spec.Spec.Containers {
		containers = append(containers, c.Name)
		for _, a := range slices.Concat(c.Command, c.Args) {
			name, _, _ := strings.Cut(a, "=")
			flags = append(flags, a, name)
		}
	}
	for _, ctr := range containers {
		for _, flag := range flags {
			lf, lok, lerr := lean.Template.Flag(ctr, flag)
			tf, tok, terr := typed.Template.Flag(ctr, flag)
			if diff := cmp.Diff(tf, lf); diff != "" || lok != tok || (lerr == nil) != (terr == nil) {
				t.Errorf("container %q, flag %q: lean %t %v, typed %t %v (-typed +lean):\n%s", ctr, flag, lok, lerr, tok, terr, diff)
			}
			if lerr != nil {
				t.Errorf("reading %s of %q decoded the template and failed: %v", flag, ctr, lerr)
			}
		}
	}
	return true
}

func TestDecodeRefusesWrongShapes(t *testing.T) {
	for _, raw := range []string{
		`{"spec":{"template":{"spec":{"containers":5}}}}`,
		`{"spec":{"template":{"spec":{"containers":[{"name":5}]}}}}`,
		`{"spec":{"template":{"spec":{"containers":[[]]}}}}`,
		`{"spec":{"template":[]}}`,
		`{"spec":{"template":{}},"status":{"conditions":{}}}`,
		`{"spec":{"template":{}},"status":{"conditions":[{"type":true}]}}`,
		`{"spec":{"replicas":"3","template":{}}}`,
		`{"spec":{"strategy":{"rollingUpdate":{"maxSurge":true}},"template":{}}}`,
		`{"spec":{"template":{"spec":`,
		`{"spec":{}}`,
		`{"spec":{"template":null}}`,
	} {
		if w, err := Decode("Deployment", []byte(raw)); err == nil {
			t.Errorf("%s: decoded as %+v, want an error", raw, w)
		}
	}
}

// TestRawFlag holds rawJSON.flag to FlagValue over the array decoded as encoding/json/v2
// decodes it.
func TestRawFlag(t *testing.T) {
	cases := map[string][]string{
		`null`:                         nil,
		``:                             nil,
		`[]`:                           {},
		` [ "a" , "--n=c" ] `:          {"a", "--n=c"},
		`["--n", "1", "--n=2", "--n"]`: {"--n", "1", "--n=2", "--n"},
		`["--n=1", "--n", "--n", "3"]`: {"--n=1", "--n", "--n", "3"},
		`["--n", "--n=2"]`:             {"--n", "--n=2"},
		`["\u002d-n", "\u00e9\"x\""]`:  {"--n", `é"x"`},
		`["--n=\u00e9", "ü", ""]`:      {"--n=é", "ü", ""},
		"[\"--n\", \"\xff\"]":          {"--n", "\ufffd"},
		`["--n="]`:                     {"--n="},
		`["--nn=1", "-n", "--n-x=2"]`:  {"--nn=1", "-n", "--n-x=2"},
	}
	for raw, argv := range cases {
		value, at, found, err := rawJSON(raw).flag("--n")
		wantValue, wantAt, wantFound := FlagValue(nil, argv, "--n")
		if err != nil || string(value) != wantValue || at != wantAt.Index || found != wantFound {
			t.Errorf("%s: got %q at %d (%t), %v; want %q at %d (%t)", raw, value, at, found, err, wantValue, wantAt.Index, wantFound)
		}
	}
	for _, raw := range []string{`{}`, `"a"`, `[1]`, `["a",2]`, `["a" "b"]`, `["a"`, `["a`, `[`, `["--n", null]`} {
		if value, _, _, err := rawJSON(raw).flag("--n"); err == nil {
			t.Errorf("%s: got %q, want an error", raw, value)
		}
	}
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
