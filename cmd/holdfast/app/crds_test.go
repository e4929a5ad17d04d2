package app

import (
	"context"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/holdfast-dev/holdfast/internal/validation"
)

// TestCRDCheck: an installed CRD without a field this build has, and a CRD not installed,
// are reported (the gauge at 1, a Warning Event on the outdated CRD, what is missing by
// name); the same CRDs as this build's report nothing and reset the gauge.
func TestCRDCheck(t *testing.T) {
	want, err := validation.CRDs()
	if err != nil || len(want) != 2 {
		t.Fatalf("embedded CRDs: %d, %v", len(want), err)
	}
	s := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	older := want[0].DeepCopy()
	spec := older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	delete(spec.Properties, "mode")
	older.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec

	gauge, err := NewCRDsOutdated(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	recorder := events.NewFakeRecorder(10)
	check := &CRDCheck{Reader: fake.NewClientBuilder().WithScheme(s).WithObjects(older).Build(), Events: recorder,
		Outdated: gauge, Log: logr.Discard()}
	got, err := check.Check(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string][]string{older.Name: {"v1alpha1 spec.mode"}, want[1].Name: {"the CRD"}}, got); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	if v := value(t, gauge); v != 1 {
		t.Errorf("holdfast_crds_outdated %v, want 1", v)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning "+ReasonCRDsOutdated) || !strings.Contains(e, "v1alpha1 spec.mode") {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event")
	}

	check.Reader = fake.NewClientBuilder().WithScheme(s).WithObjects(want[0].DeepCopy(), want[1].DeepCopy()).Build()
	if got, err := check.Check(context.Background()); err != nil || len(got) != 0 {
		t.Errorf("the same CRDs: missing %v, %v", got, err)
	}
	if v := value(t, gauge); v != 0 {
		t.Errorf("holdfast_crds_outdated %v after the CRDs were brought up to date, want 0", v)
	}
}

func value(t *testing.T, g prometheus.Gauge) float64 {
	t.Helper()
	var m dto.Metric
	if err := g.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetGauge().GetValue()
}
