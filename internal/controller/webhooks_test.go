package controller

import (
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func entries(names ...string) []admissionregistrationv1.ValidatingWebhook {
	out := make([]admissionregistrationv1.ValidatingWebhook, len(names))
	for i, n := range names {
		out[i].Name = n
	}
	return out
}

func namesOf(ws []admissionregistrationv1.ValidatingWebhook) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.Name)
	}
	return out
}

func TestUnionWidensBeforeItNarrows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		cur, want []string
		widened   []string
		gone      bool
	}{
		{"nothing in force", nil, []string{"a"}, nil, false},
		{"only additions", []string{"a"}, []string{"a", "b"}, nil, false},
		{"a replacement holds both first", []string{"a"}, []string{"b"}, []string{"a", "b"}, true},
		{"only removals narrow at once", []string{"a", "b"}, []string{"b"}, nil, true},
		{"the last policy gone", []string{"a"}, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			widened, gone := union(entries(tc.cur...), entries(tc.want...))
			if gone != tc.gone || len(namesOf(widened)) != len(tc.widened) {
				t.Fatalf("union = %v, %v; want %v, %v", namesOf(widened), gone, tc.widened, tc.gone)
			}
			for i, n := range namesOf(widened) {
				if n != tc.widened[i] {
					t.Errorf("widened = %v, want %v", namesOf(widened), tc.widened)
				}
			}
		})
	}
}

func TestNormalizedReadsStoredEntriesAsWritten(t *testing.T) {
	written := admissionregistrationv1.ValidatingWebhook{Name: "a", ClientConfig: admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Name: "holdfast-webhook", Path: ptr.To("/validate-rollout")}}}
	stored := *written.DeepCopy()
	stored.ObjectSelector = &metav1.LabelSelector{}
	stored.ClientConfig.Service.Port = ptr.To[int32](443)
	a, b := normalized([]admissionregistrationv1.ValidatingWebhook{written}), normalized([]admissionregistrationv1.ValidatingWebhook{stored})
	if a[0].ObjectSelector != nil || b[0].ObjectSelector != nil || b[0].ClientConfig.Service.Port != nil {
		t.Errorf("defaults kept: %+v", b[0])
	}
	if stored.ClientConfig.Service.Port == nil {
		t.Error("normalized changed its input")
	}
}
