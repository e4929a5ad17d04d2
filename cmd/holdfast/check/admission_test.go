package check

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/holdfast-dev/holdfast/internal/defaults"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// safePolicy refuses a rollout that takes more than one pod down at once, and a new
// template while the current one is still rolling out.
const safePolicy = `apiVersion: holdfast.dev/v1alpha1
kind: RolloutPolicy
metadata: {name: safe}
spec:
  targets: {kinds: [Deployment]}
  rules:
    strategy: {maxUnavailable: 1}
    settle: {}
`

// web is an 8-replica Deployment manifest; the parts given are written, the others left to
// the API server's defaults.
func web(image, pullPolicy, strategy, status string) string {
	m := "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: shop, uid: 6f1c2d3e-0000-4000-8000-000000000001, generation: 3}\n" +
		"spec:\n  replicas: 8\n  selector: {matchLabels: {app: web}}\n"
	if strategy != "" {
		m += "  strategy: " + strategy + "\n"
	}
	m += "  template:\n    metadata: {labels: {app: web}}\n    spec:\n      containers:\n      - name: web\n        image: " + image + "\n"
	if pullPolicy != "" {
		m += "        imagePullPolicy: " + pullPolicy + "\n"
	}
	if status != "" {
		m += "status: " + status + "\n"
	}
	return m
}

const (
	underWay = "{observedGeneration: 3, replicas: 8, updatedReplicas: 3, readyReplicas: 7, availableReplicas: 7}"
	finished = "{observedGeneration: 3, replicas: 8, updatedReplicas: 8, readyReplicas: 8, availableReplicas: 8}"
)

// TestCheckDecidesAsTheWebhookIsSent: check judges a change on the objects the API server
// sends the webhook (defaulted, the new one with the stored status: internal/defaults,
// held to the API server by test/integration's TestDefaultsAsTheAPIServer), and reads the
// old object's status as the webhook reads the stored one's: its verdict and messages are
// the production handler's, serving the same objects with the journal the leader records
// for the old object.
func TestCheckDecidesAsTheWebhookIsSent(t *testing.T) {
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	cases := map[string]struct {
		old, new string // old empty: a CREATE
		want     string // the action
		rule     string // of the violation, when refused
	}{
		// The API server defaults RollingUpdate 25%/25%: two of 8 pods down at once.
		"8 replicas without a strategy":    {new: web("web:v1", "", "", ""), want: "deny", rule: rollout.RuleStrategy},
		"8 replicas with maxUnavailable 1": {new: web("web:v1", "", "{rollingUpdate: {maxUnavailable: 1}}", ""), want: ActionUndecided},
		"the strategy left out of an update": {old: web("web:v1", "", "{rollingUpdate: {maxUnavailable: 1, maxSurge: 1}}", finished),
			new: web("web:v1", "", "", ""), want: "deny", rule: rollout.RuleStrategy},
		// The default spelled out is no template change: settle has nothing to decide.
		"imagePullPolicy spelled out during a rollout": {old: web("web:v1", "", "", underWay),
			new: web("web:v1", "IfNotPresent", "", ""), want: "allow"},
		// settle reads the rollout's state, which only the cluster holds: never a pass offline.
		"a new image during a rollout": {old: web("web:v1", "", "", underWay), new: web("web:v2", "", "", ""), want: ActionUndecided},
		"a new image after a rollout":  {old: web("web:v1", "", "", finished), new: web("web:v2", "", "", ""), want: ActionUndecided},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := []string{}
			if tc.old != "" {
				files = append(files, writeTemp(t, "old.yaml", tc.old))
			}
			files = append(files, writeTemp(t, "new.yaml", tc.new))
			var out strings.Builder
			err := Run(&out, nil, &Options{Policies: []string{writeTemp(t, "policy.yaml", safePolicy)}, Files: files, Output: "json"}, now)
			var report Report
			if jerr := json.Unmarshal([]byte(out.String()), &report); jerr != nil || len(report.Results) != 1 {
				t.Fatalf("check: %v, output %s", err, out.String())
			}
			got := report.Results[0]
			var messages []string
			for _, v := range got.Violations {
				messages = append(messages, v.Message)
			}
			if got.Action != tc.want || (tc.rule != "" && (len(got.Violations) != 1 || got.Violations[0].Rule != tc.rule)) {
				t.Errorf("check: %s %v, want %s by %q", got.Action, messages, tc.want, tc.rule)
			}

			answer := webhookAnswer(t, tc.old, tc.new, now)
			switch {
			case got.Action == ActionUndecided:
				// Undecided is never a pass: the webhook, with the journal the leader
				// records, may answer either way.
			case answer.Allowed != (got.Action != "deny"):
				t.Errorf("the webhook allows: %t (%s); check: %s %v", answer.Allowed, answer.Result.Message, got.Action, messages)
			case !answer.Allowed && !strings.HasPrefix(answer.Result.Message, strings.Join(messages, "; ")+" (request by user "):
				// The webhook's refusal ends with the request's writers, which check has not.
				t.Errorf("the webhook answers\n  %s\ncheck says\n  %s", answer.Result.Message, strings.Join(messages, "; "))
			}
		})
	}
}

// webhookAnswer is the production rollout handler's answer to the review the API server
// sends for the manifests (old empty: a CREATE), in a cluster that holds the policy, and,
// on an UPDATE, the journal the leader recorded for the old object.
func webhookAnswer(t *testing.T, oldManifest, newManifest string, now time.Time) admission.Response {
	t.Helper()
	policies, err := ReadPolicies([]string{"-"}, strings.NewReader(safePolicy))
	if err != nil {
		t.Fatal(err)
	}
	decode := func(manifest string) client.Object {
		if manifest == "" {
			return nil
		}
		docs, err := ReadObjects([]string{"-"}, strings.NewReader(manifest))
		if err != nil {
			t.Fatal(err)
		}
		return docs[0].Object.(client.Object)
	}
	// What the API server holds and sends: both objects defaulted, the new one with the
	// stored object's status.
	stored, sent := defaults.Admitted(decode(oldManifest), decode(newManifest))
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{UID: "1",
		Kind:      metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
		Resource:  metav1.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"},
		Namespace: sent.GetNamespace(), Name: sent.GetName(), Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: mustJSON(t, sent)}}}
	journals := &journal.Store{}
	if stored != nil {
		req.Operation, req.OldObject = admissionv1.Update, runtime.RawExtension{Raw: mustJSON(t, stored)}
		w, err := workload.From(stored)
		if err != nil {
			t.Fatal(err)
		}
		// The leader, observing the stored object (its history has no other revision).
		cm, err := journal.Encode(journal.Observe(nil, w, history.History{}, nil, now), "holdfast")
		if err != nil {
			t.Fatal(err)
		}
		journals.Add(cm)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sent.GetNamespace(), Labels: map[string]string{corev1.LabelMetadataName: sent.GetNamespace()}}}
	sch := informer.NewScheme()
	h := &rollout.Handler{Reader: utiltesting.NewMemReader(map[string]client.IndexerFunc{informer.OwnerIndex: informer.ControllerUID}, &policies[0], ns), Decoder: admission.NewDecoder(sch),
		Clock: clocktesting.NewFakePassiveClock(now), Matcher: policy.NewMatcher(), Journals: journals}
	return h.Handle(context.Background(), req)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
