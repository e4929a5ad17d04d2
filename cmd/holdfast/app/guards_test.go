package app

import (
	"reflect"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/memstore"
)

// unset are the fields Guards leaves zero on purpose: Typed is the rollout handler's
// reference decoding, for the differential tests only; a zero Timeout is the ledgers'
// default.
var unset = map[string]bool{"rollout.Handler.Typed": true, "budget.Ledgers.Timeout": true}

// Guards given every dependency sets every exported field of what it builds, so that a
// field added to a handler or the recorder fails here until Guards sets it, and the
// server and the simulator, which both build through Guards, get it together.
func TestGuardsSetEveryField(t *testing.T) {
	shared, err := NewShared(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New(nil)
	g := Guards{Cache: store, Live: memstore.Writer{Store: store}, Client: memstore.Writer{Store: store}, Scheme: informer.NewScheme(),
		Clock: clock.RealClock{}, Events: events.NewFakeRecorder(1), Namespace: "holdfast-system", Identity: "replica-0", Shared: shared}
	r, e := g.Handlers()
	for _, built := range []any{r, e, g.JournalRecorder(v1alpha1.KindDeployment), g.Ledgers()} {
		v := reflect.ValueOf(built).Elem()
		for i := range v.NumField() {
			f := v.Type().Field(i)
			name := v.Type().String() + "." + f.Name
			if f.IsExported() && !unset[name] && v.Field(i).IsZero() {
				t.Errorf("%s is not set by Guards", name)
			}
		}
	}
	if r.Ledgers != e.Ledgers {
		t.Error("the two handlers read different ledgers")
	}
}

// Without an Event recorder, the handlers record no Events (a nil Limiter), as the
// simulator builds them.
func TestGuardsWithoutEvents(t *testing.T) {
	shared, err := NewShared(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	r, e := Guards{Scheme: informer.NewScheme(), Shared: shared}.Handlers()
	if r.Events != nil || e.Events != nil {
		t.Errorf("Events %v, %v; want none", r.Events, e.Events)
	}
}
