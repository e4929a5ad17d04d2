package events

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sevents "k8s.io/client-go/tools/events"
)

func TestLimiterOnePerObjectKeyAndMinute(t *testing.T) {
	rec := k8sevents.NewFakeRecorder(10)
	l := &Limiter{Recorder: rec}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "kas", UID: "u1"}}
	t0 := time.Now()

	l.Warn(d, "settle", t0, "RolloutDenied", "m")
	l.Warn(d, "settle", t0.Add(5*time.Second), "RolloutDenied", "m") // an operator retrying
	l.Warn(d, "settle", t0.Add(61*time.Second), "RolloutDenied", "m")
	l.Warn(d, "minInterval", t0.Add(5*time.Second), "RolloutDenied", "m")
	other := d.DeepCopy()
	other.UID, other.Name = "u2", "other"
	l.Warn(other, "settle", t0.Add(5*time.Second), "RolloutDenied", "m")

	if got := len(rec.Events); got != 4 {
		t.Fatalf("recorded %d events, want 4 (first, after a minute, another key, another object)", got)
	}
	if e := <-rec.Events; !strings.Contains(e, "Warning RolloutDenied") {
		t.Errorf("event %q, want a Warning with reason RolloutDenied", e)
	}

	var none *Limiter
	none.Warn(d, "settle", t0, "RolloutDenied", "m") // a nil Limiter records nothing, and does not panic
}
