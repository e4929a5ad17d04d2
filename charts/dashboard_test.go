package charts

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
)

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int    `json:"id"`
		Type       string `json:"type"`
		Title      string `json:"title"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
		GridPos struct{ H, W, X, Y int } `json:"gridPos"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

var (
	// A metric is the name before a selector's braces or a range's brackets; the
	// dashboard writes every selector with braces.
	metricRef = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\s*[{\[]`)
	// A file that defines metrics: prometheus.CounterOpts{…}.
	metricOpts = regexp.MustCompile(`prometheus\.((Counter|Gauge|Histogram|Summary)Opts\b|NewDesc\()`)
	// Go's metric definitions: Name: "holdfast_evictions_total".
	metricName = regexp.MustCompile(`(?:Name:\s+|prometheus\.NewDesc\()"([a-z_:][a-z0-9_:]*)"`)
	// PromQL's string literals, where a regular expression may look like a metric.
	stringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	// Grafana variables: $namespace, ${datasource}; $__rate_interval and $__range are Grafana's.
	variableRef = regexp.MustCompile(`\$\{?([a-zA-Z_][a-zA-Z0-9_]*)`)
)

// TestDashboard holds files/dashboard.json to being a dashboard Grafana loads whose every
// query names metrics that exist: holdfast's own (read from its production code, which
// TestEveryRegistryIsRead holds to what the binary registers), controller-runtime's webhook
// metrics and the API server's admission webhook metrics, read from their sources. Every
// holdfast metric is shown somewhere, but those notOnTheDashboard names with a reason.
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(Dir(), "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("dashboard.json is not valid JSON: %v", err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatalf("uid %q, title %q, %d panels", d.UID, d.Title, len(d.Panels))
	}

	holdfast := holdfastMetrics(t)
	known := slices.Clone(holdfast)
	known = append(known, moduleMetrics(t, "sigs.k8s.io/controller-runtime", "pkg/webhook/internal/metrics/metrics.go", "")...)
	known = append(known, moduleMetrics(t, "k8s.io/apiserver", "pkg/admission/metrics/metrics.go", "apiserver_admission_")...)
	known = append(known, moduleMetrics(t, "sigs.k8s.io/controller-runtime", "pkg/metrics/leaderelection.go", "")...)
	known = append(known, processMetrics(t, "process_resident_memory_bytes")...)
	// Not Go modules here: Prometheus' own up, and kube-state-metrics' Deployment replicas,
	// which HoldfastUnavailable reads too.
	known = append(known, "up", "kube_deployment_status_replicas_available")

	vars := map[string]bool{}
	var exprs []string
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		if q, ok := v.Query.(map[string]any); ok {
			exprs = append(exprs, q["query"].(string))
		}
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel %q: id %d is used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit Grafana's 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: datasource %+v, want the dashboard's ${datasource}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no queries", p.Title)
		}
		for _, q := range p.Targets {
			if q.Expr == "" || q.RefID == "" {
				t.Errorf("panel %q: a query without expr or refId", p.Title)
			}
			if !strings.Contains(q.Expr, `namespace="$namespace"`) && !strings.Contains(q.Expr, "holdfast[.]dev") {
				t.Errorf("panel %q: %s reads every namespace's holdfast, not $namespace's", p.Title, q.Expr)
			}
			exprs = append(exprs, q.Expr)
		}
	}

	shown := map[string]bool{}
	for _, expr := range exprs {
		refs := metricRef.FindAllStringSubmatch(stringLiteral.ReplaceAllString(expr, `""`), -1)
		if len(refs) == 0 {
			t.Errorf("%s names no metric", expr)
		}
		for _, m := range refs {
			name := definedAs(m[1], known)
			if name == "" {
				t.Errorf("%s: no metric %s in holdfast's code, controller-runtime, client_golang's process collector, the API server or kube-state-metrics", expr, m[1])
			}
			shown[name] = true
		}
		for _, v := range variableRef.FindAllStringSubmatch(expr, -1) {
			if !strings.HasPrefix(v[1], "__") && !vars[v[1]] {
				t.Errorf("%s: variable $%s is not defined in templating", expr, v[1])
			}
		}
	}
	for _, m := range holdfast {
		_, excluded := notOnTheDashboard[m]
		switch {
		case excluded && shown[m]:
			t.Errorf("holdfast's metric %s is on a panel, but %s", m, notOnTheDashboard[m])
		case !excluded && !shown[m]:
			t.Errorf("holdfast's metric %s is on no panel", m)
		}
	}
}

// notOnTheDashboard are holdfast's metrics the dashboard leaves out on purpose, and why.
var notOnTheDashboard = map[string]string{
	// Kept for one release beside the metrics that replace them (docs/operations.md): the
	// dashboard reads the new ones, which count requests and findings apart.
	"holdfast_evictions_total":         "it is deprecated: holdfast_eviction_requests_total, _reviews_total and _findings_total replace it",
	"holdfast_rollout_decisions_total": "it is deprecated: holdfast_rollout_requests_total, _reviews_total and _findings_total replace it",
}

// TestEveryRegistryIsRead: the metrics TestDashboard holds to a panel are every metric
// the composition root registers (app.NewShared: the webhooks', the controllers', the
// journal's, the webhook configuration's, the CRD check's), and every metric defined in
// holdfast's production code is registered there. The excluded ones say why in their HELP.
func TestEveryRegistryIsRead(t *testing.T) {
	registered := registeredMetrics(t)
	defined := holdfastMetrics(t)
	for name := range registered {
		if !slices.Contains(defined, name) {
			t.Errorf("app.NewShared registers %s, which TestDashboard did not find in the source", name)
		}
	}
	for _, name := range defined {
		if _, ok := registered[name]; !ok {
			t.Errorf("%s is defined but app.NewShared does not register it: a registry the binary does not serve", name)
		}
	}
	for name := range notOnTheDashboard {
		if help, ok := registered[name]; !ok || !strings.HasPrefix(help, "Deprecated") {
			t.Errorf("%s is left off the dashboard as deprecated, but its HELP is %q", name, help)
		}
	}
}

// describer is a prometheus.Registerer that records the name and HELP of every metric
// registered with it.
type describer map[string]string

// fqName and help as prometheus.Desc prints them.
var descFields = regexp.MustCompile(`fqName: "([^"]*)", help: "((?:[^"\\]|\\.)*)"`)

func (d describer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	for desc := range ch {
		m := descFields.FindStringSubmatch(desc.String())
		if m == nil {
			return fmt.Errorf("unreadable %s", desc)
		}
		help, err := strconv.Unquote(`"` + m[2] + `"`)
		if err != nil {
			return err
		}
		d[m[1]] = help
	}
	return nil
}

func (d describer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := d.Register(c); err != nil {
			panic(err)
		}
	}
}

func (d describer) Unregister(prometheus.Collector) bool { return false }

// registeredMetrics returns the name and HELP of every metric the composition root
// registers, as the binary registers them with controller-runtime's registry.
func registeredMetrics(t *testing.T) map[string]string {
	t.Helper()
	d := describer{}
	if _, err := app.NewShared(d); err != nil {
		t.Fatal(err)
	}
	if len(d) == 0 {
		t.Fatal("app.NewShared registered no metric")
	}
	return d
}

// definedAs returns the defined metric a series name belongs to (a histogram's _bucket,
// _sum and _count series belong to the histogram), or "".
func definedAs(series string, known []string) string {
	for _, name := range []string{series, strings.TrimSuffix(series, "_bucket"), strings.TrimSuffix(series, "_sum"), strings.TrimSuffix(series, "_count")} {
		if slices.Contains(known, name) {
			return name
		}
	}
	return ""
}

// holdfastMetrics reads the names of the metrics holdfast defines, in every production
// Go file of the repository (not tests, the test harness under test/ and e2e/, or hack/).
func holdfastMetrics(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("..", func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() && slices.Contains([]string{"test", "e2e", "hack", "testdata", ".git"}, e.Name()) {
			return filepath.SkipDir
		}
		if e.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if src, err := os.ReadFile(path); err != nil || !metricOpts.Match(src) {
			return err // defines no metric
		}
		out = append(out, metricsIn(t, path, "")...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) == 0 {
		t.Fatal("no metric defined in holdfast's production code")
	}
	return out
}

// moduleMetrics reads the metric names defined in file of module, at the version go.mod
// requires, prefixed as the file's namespace and subsystem prefix them.
func moduleMetrics(t *testing.T, module, file, prefix string) []string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", module).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", module, err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download %s: no directory in %s (%v)", module, out, err)
	}
	return metricsIn(t, filepath.Join(m.Dir, file), prefix)
}

func metricsIn(t *testing.T, file, prefix string) []string {
	t.Helper()
	src, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range metricName.FindAllStringSubmatch(string(src), -1) {
		out = append(out, prefix+m[1])
	}
	if len(out) == 0 {
		t.Fatalf("%s defines no metrics", file)
	}
	return out
}

// TestRenderDashboard: metrics.dashboard.enabled ships dashboard.json unchanged in a
// ConfigMap Grafana's sidecar picks up by its label, in the namespace asked for.
func TestRenderDashboard(t *testing.T) {
	objs, err := render(t, "holdfast-system", nil)
	if err != nil {
		t.Fatal(err)
	}
	if objs["ConfigMap/holdfast-dashboard"] != nil {
		t.Error("a dashboard by default")
	}
	objs, err = render(t, "holdfast-system", map[string]any{"metrics": map[string]any{"dashboard": map[string]any{
		"enabled": true, "namespace": "monitoring", "annotations": map[string]any{"grafana_folder": "Platform"}}}})
	if err != nil {
		t.Fatal(err)
	}
	u := objs["ConfigMap/holdfast-dashboard"]
	if u == nil {
		t.Fatalf("no ConfigMap holdfast-dashboard among %v", keys(objs))
	}
	var cm corev1.ConfigMap
	typed(t, u, &cm)
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Platform" || cm.Namespace != "monitoring" {
		t.Errorf("labels %v, annotations %v, namespace %q", cm.Labels, cm.Annotations, cm.Namespace)
	}
	raw, err := os.ReadFile(filepath.Join(Dir(), "files", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Data["holdfast.json"]; got != strings.TrimRight(string(raw), "\n") {
		t.Errorf("the ConfigMap's holdfast.json differs from files/dashboard.json (%d and %d bytes)", len(got), len(raw))
	}
}

// processMetrics returns names after checking that client_golang's process collector,
// which controller-runtime registers, defines each of them.
func processMetrics(t *testing.T, names ...string) []string {
	t.Helper()
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/prometheus/client_golang").Output()
	if err != nil {
		t.Fatalf("go mod download client_golang: %v", err)
	}
	var m struct{ Dir string }
	if err := json.Unmarshal(out, &m); err != nil || m.Dir == "" {
		t.Fatalf("go mod download client_golang: no directory in %s (%v)", out, err)
	}
	src, err := os.ReadFile(filepath.Join(m.Dir, "prometheus", "process_collector.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if !strings.Contains(string(src), `"`+n+`"`) {
			t.Errorf("client_golang's process collector defines no %s", n)
		}
	}
	return names
}
