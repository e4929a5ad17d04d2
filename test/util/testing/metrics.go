package testing

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// Counts gathers g and returns the values of metric name's series (counters and gauges),
// each keyed by its labels as `label=value` pairs sorted by label name (as Prometheus
// gathers them), joined by commas: {"outcome=deferred,policy=agents": 1}. A metric with no series
// returns an empty map.
func Counts(t testing.TB, g prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	families, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue()
			out[strings.Join(labels, ",")] = v
		}
	}
	return out
}
