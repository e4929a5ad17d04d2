//go:build integration

package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/charts"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/check"
	"github.com/holdfast-dev/holdfast/internal/budget"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/interception"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// checkReader is the CI identity check --cluster runs as in the corpus: bound only to
// config/check-reader's roles (through its group), so that the corpus proves those roles
// are enough.
var checkReader = rest.ImpersonationConfig{UserName: "ci-check", Groups: []string{"holdfast-check-readers", "system:authenticated"}}

// corpusRequester is who the corpus's changes are sent by (the test's administrator), as
// the API server tells holdfast, and check is told.
var corpusRequester authenticationv1.UserInfo

// TestCheckCorpusAgreesWithTheWebhook holds holdfast check to the webhook, through the real
// API server, over the corpus (checkcorpus_cases_test.go). Each change is decided three
// ways: by the API server with holdfast serving; by check without a cluster, which must
// give the webhook's verdict, HTTP code and messages for the rules decided from the two
// objects, and name every rule that reads the cluster's state as not decided (never a
// pass); and by check --cluster, as the reader identity, at a pinned time, which must give
// the webhook's verdict, code and messages (durations aside, for the rules that read the
// state: the two decide milliseconds apart). The coverage of the rules, kinds, modes and
// operations is computed from what the webhook answered, and every combination of
// requiredCoverage must be held.
func TestCheckCorpusAgreesWithTheWebhook(t *testing.T) {
	ctx := context.Background()
	review := &authenticationv1.SelfSubjectReview{}
	if err := k8s.Create(ctx, review); err != nil {
		t.Fatal(err)
	}
	corpusRequester = authenticationv1.UserInfo{Username: review.Status.UserInfo.Username, Groups: review.Status.UserInfo.Groups}
	installCheckReader(t)
	readerCfg := rest.CopyConfig(restConfig)
	readerCfg.Impersonate = checkReader

	cases := corpus()
	var groups []string
	byGroup := map[string][]checkCase{}
	for _, c := range cases {
		if _, ok := byGroup[c.group]; !ok {
			groups = append(groups, c.group)
		}
		byGroup[c.group] = append(byGroup[c.group], c)
	}
	covered := map[coverageCell]int{}
	differences, n := 0, 0
	for _, g := range groups {
		t.Run(g, func(t *testing.T) {
			r := newCorpusRun(t, byGroup[g][0])
			for i, c := range byGroup[g] {
				t.Run(c.name, func(t *testing.T) {
					n++
					defer func() {
						if t.Failed() {
							differences++
						}
					}()
					found, ok := r.run(t, c, fmt.Sprintf("%s-%d", strings.ToLower(string(c.kind)), i), readerCfg)
					if !ok {
						return
					}
					if found != c.found {
						t.Errorf("the webhook's answer says %s is found=%t: the case does not hold what it says", c.rule, found)
						return
					}
					covered[coverageCell{c.rule, c.kind, c.mode, found}]++
					covered[coverageCell{"op " + c.op, c.kind, "", found}]++
				})
			}
		})
	}
	fmt.Printf("RELIABILITY check-vs-webhook cases=%d differences=%d\n", n, differences)
	var missing []string
	for _, cell := range requiredCoverage() {
		if covered[cell] == 0 {
			missing = append(missing, cell.String())
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the corpus does not hold %d required combinations:\n  %s", len(missing), strings.Join(missing, "\n  "))
	}
	if n < 60 {
		t.Errorf("%d cases, want at least 60", n)
	}
	partial := t.Failed() || strings.Contains(flag.Lookup("test.run").Value.String(), "/")
	if err := readerStayedWithinItsRole(partial); err != nil {
		t.Error(err)
	}
}

// corpusRun is one group of the corpus: its namespace and policy, as stored.
type corpusRun struct {
	t      *testing.T
	ns     string
	policy *v1alpha1.RolloutPolicy
}

func newCorpusRun(t *testing.T, first checkCase) *corpusRun {
	ctx := context.Background()
	r := &corpusRun{t: t, ns: createNamespace(t, nil)}
	p := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.ns + "-corpus"},
		Spec: v1alpha1.RolloutPolicySpec{Mode: first.mode, Targets: v1alpha1.WorkloadTargets{NamespaceSelector: namespaceNamed(r.ns)}}}
	first.policy(r.ns, p)
	if err := k8s.Create(ctx, p); err != nil {
		t.Fatalf("creating the corpus policy: %v", err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), p) })
	intercepted(t, p)
	r.policy = p
	if first.setup != nil {
		first.setup(r)
	}
	return r
}

// admissionAnswer is what a change got (or would get): the verdict, the HTTP code, the refusal's message, the
// warnings and the audit annotations (by rule).
type admissionAnswer struct {
	Action   string
	Code     int32
	Message  string
	Warnings []string
	Audit    map[string]string
}

// durations are the runs of Go durations in a message ("1h0m5s", "250ms").
var durations = regexp.MustCompile(`([0-9]+(\.[0-9]+)?(ns|µs|us|ms|s|m|h))+`)

// normalised is the answer with its durations replaced, for rules that read the clock.
func (a admissionAnswer) normalised() admissionAnswer {
	n := a
	n.Message = durations.ReplaceAllString(a.Message, "D")
	n.Warnings = nil
	for _, w := range a.Warnings {
		n.Warnings = append(n.Warnings, durations.ReplaceAllString(w, "D"))
	}
	n.Audit = map[string]string{}
	for k, v := range a.Audit {
		n.Audit[k] = durations.ReplaceAllString(v, "D")
	}
	return n
}

// found is whether the answer reports the rule.
func (a admissionAnswer) found(rule string) bool {
	tag := "/" + rule + "]"
	if strings.Contains(a.Message, tag) || slices.ContainsFunc(a.Warnings, func(w string) bool { return strings.Contains(w, tag) }) {
		return true
	}
	_, ok := a.Audit[rule]
	return ok
}

// asAnswer is check's result as the webhook would answer it.
func asAnswer(r check.Result) admissionAnswer {
	a := admissionAnswer{Action: r.Action, Code: r.Code, Audit: map[string]string{}}
	var refusals []string
	for _, v := range r.Violations {
		switch v.Action {
		case decision.Deny.String():
			refusals = append(refusals, v.Message)
		case decision.Warn.String():
			a.Warnings = append(a.Warnings, v.Message)
		case decision.Audit.String():
			if prev, ok := a.Audit[v.Rule]; ok {
				a.Audit[v.Rule] = prev + "; " + v.Message
			} else {
				a.Audit[v.Rule] = v.Message
			}
		}
	}
	a.Message = strings.Join(refusals, "; ")
	slices.Sort(a.Warnings)
	return a
}

// run decides the case three ways and compares the answers; found is whether the webhook
// reported the case's rule, ok whether the three agreed.
func (r *corpusRun) run(t *testing.T, c checkCase, name string, readerCfg *rest.Config) (found, ok bool) {
	ctx := context.Background()
	obj := c.create(c.kind, r.ns, name)
	var stored client.Object
	if c.op != opCreate {
		if err := k8s.Create(ctx, obj.DeepCopyObject().(client.Object)); err != nil {
			t.Fatalf("creating the workload the case starts from: %v", err)
		}
		start := c.start
		if start == nil {
			start = rollingOut
		}
		stored = start(r, fetched(t, obj))
	}
	var sent client.Object
	switch c.op {
	case opCreate:
		sent = obj
	case opUpdate:
		sent = c.change(stored)
	case opScale:
		sent = stored.DeepCopyObject().(client.Object)
	}
	if c.scaleTo > 0 {
		workload.SetReplicas(sent, c.scaleTo)
	}

	now := time.Now()
	policies := []v1alpha1.RolloutPolicy{*r.policy}
	var docs []check.Document
	if stored != nil {
		docs = append(docs, check.Document{Source: "stored", Object: stored.DeepCopyObject()})
	}
	docs = append(docs, check.Document{Source: "sent", Object: sent.DeepCopyObject()})
	offline, err := check.Evaluate(policies, docs, nil, nil, corpusRequester, now)
	if err != nil || len(offline) != 1 {
		t.Fatalf("check: %v, %d results", err, len(offline))
	}
	cluster, err := check.NewCluster(readerCfg, holdfastNamespace)
	if err != nil {
		t.Fatalf("check --cluster: %v", err)
	}
	online, err := check.Evaluate(policies, []check.Document{{Source: "sent", Object: sent.DeepCopyObject()}}, nil, cluster, corpusRequester, now)
	if err != nil || len(online) != 1 {
		t.Fatalf("check --cluster: %v, %d results", err, len(online))
	}

	webhook := r.send(t, c, stored, sent)
	ok = true
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		ok = false
	}
	// A DaemonSet's strategy limits resolve against the nodes it runs on: the cluster's
	// nodes on a CREATE, the stored status on an UPDATE (envtest runs no DaemonSet
	// controller, so the stored status is empty).
	_, readsState := rollout.StateReads[c.rule]
	readsState = readsState || (c.rule == rollout.RuleStrategy && c.kind == v1alpha1.KindDaemonSet)
	want, got := webhook, asAnswer(online[0])
	if readsState {
		want, got = want.normalised(), got.normalised()
	}
	if diff := diffAnswers(want, got); diff != "" || len(online[0].Undecided) > 0 || online[0].Operation != opOf(c.op) {
		fail("check --cluster (%s, undecided %v) and the webhook differ (-webhook +check):\n%s", online[0].Operation, online[0].Undecided, diff)
	}
	if readsState {
		// Offline, a rule that reads the cluster's state is named, never passed.
		named := slices.ContainsFunc(offline[0].Undecided, func(u check.Undecided) bool { return u.Rule == c.rule && u.Policy == r.policy.Name })
		if !named || offline[0].Action != check.ActionUndecided || offline[0].Code != 0 {
			fail("offline, check answered %s (code %d, undecided %v): want %s not decided", offline[0].Action, offline[0].Code, offline[0].Undecided, c.rule)
		}
	} else if diff := diffAnswers(webhook, asAnswer(offline[0])); diff != "" || len(offline[0].Undecided) > 0 || offline[0].Operation != opOf(c.op) {
		fail("offline check (%s, undecided %v) and the webhook differ (-webhook +check):\n%s", offline[0].Operation, offline[0].Undecided, diff)
	}
	return webhook.found(c.rule), ok
}

func opOf(op string) string {
	if op == opScale {
		return opUpdate // a scale is judged as the full update with its replicas
	}
	return op
}

func diffAnswers(want, got admissionAnswer) string {
	if len(want.Audit) == 0 {
		want.Audit = map[string]string{}
	}
	if len(got.Audit) == 0 {
		got.Audit = map[string]string{}
	}
	w, _ := json.MarshalIndent(want, "", "  ")
	g, _ := json.MarshalIndent(got, "", "  ")
	if string(w) == string(g) {
		return ""
	}
	return "webhook: " + string(w) + "\ncheck:   " + string(g)
}

// send makes the change through the API server and reads holdfast's answer: the refusal,
// or the warnings and audit annotations of an admission.
func (r *corpusRun) send(t *testing.T, c checkCase, stored, sent client.Object) admissionAnswer {
	ctx := context.Background()
	warnings.take()
	offset := auditLogSize(t)
	var err error
	switch c.op {
	case opCreate:
		err = k8s.Create(ctx, sent.DeepCopyObject().(client.Object))
	case opUpdate:
		err = k8s.Update(ctx, sent.DeepCopyObject().(client.Object))
	case opScale:
		err = k8s.SubResource("scale").Update(ctx, stored.DeepCopyObject().(client.Object),
			client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: c.scaleTo}}))
	}
	a := admissionAnswer{Audit: map[string]string{}}
	if err != nil {
		msg, byRollout := deniedBy(err, interception.TypeRollout)
		if !byRollout {
			msg, byRollout = deniedBy(err, interception.TypeScale)
		}
		var status apierrors.APIStatus
		if !byRollout || !errors.As(err, &status) {
			t.Fatalf("the API server refused the change, not holdfast: %v", err)
		}
		d, named := decisionOf(msg)
		if !named {
			t.Errorf("the refusal does not name its writers: %s", msg)
		}
		a.Action, a.Code, a.Message = decision.Deny.String(), status.Status().Code, d
	} else {
		a.Action, a.Code = decision.Allow.String(), 200
	}
	seen := map[string]bool{}
	for _, w := range warnings.take() {
		if !seen[w] { // two entries that match one request both answer
			seen[w] = true
			a.Warnings = append(a.Warnings, w)
		}
	}
	slices.Sort(a.Warnings)
	if err == nil || c.mode == v1alpha1.ModeAudit {
		a.Audit = auditAnnotations(t, offset, c, sent)
	}
	switch {
	case a.Action == decision.Deny.String():
	case len(a.Warnings) > 0:
		a.Action = decision.Warn.String()
	case len(a.Audit) > 0:
		a.Action = decision.Audit.String()
	}
	return a
}

// fetched is the object as the API server stores it now.
func fetched(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	cur := obj.DeepCopyObject().(client.Object)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), cur); err != nil {
		t.Fatal(err)
	}
	return cur
}

// rollingOut leaves the created workload rolling out (no controller acted on it: its
// status says so) and waits until holdfast's journal and caches have it.
func rollingOut(r *corpusRun, obj client.Object) client.Object {
	return r.journaled(obj, false)
}

// finished gives the workload the status of a finished rollout and waits until the
// journal records it.
func finished(r *corpusRun, obj client.Object) client.Object {
	r.t.Helper()
	writeFinishedStatus(r.t, obj)
	return r.journaled(obj, true)
}

// finishedLongEnough is finished, then waits until the current revision has been current
// for d.
func finishedLongEnough(d time.Duration) func(*corpusRun, client.Object) client.Object {
	return func(r *corpusRun, obj client.Object) client.Object {
		cur := finished(r, obj)
		m, _ := workload.MetaOf(cur)
		j := r.journal(m.Kind, cur.GetName())
		time.Sleep(time.Until(j.Current().Since.Add(d)))
		return cur
	}
}

// rolledOutTwice finishes the workload's first template, rolls it out to a second
// (main:2) and finishes that one.
func rolledOutTwice(r *corpusRun, obj client.Object) client.Object {
	r.t.Helper()
	cur := finished(r, obj)
	image("registry.example/main:2")(cur)
	if err := k8s.Update(context.Background(), cur); err != nil {
		r.t.Fatalf("rolling out the second template: %v", err)
	}
	return finished(r, cur)
}

// evicted finishes the workload and records an eviction of one of its pods, a moment
// ago, in its group's ledger, as the eviction guard would.
func evicted(r *corpusRun, obj client.Object) client.Object {
	r.t.Helper()
	cur := finished(r, obj)
	ctx := context.Background()
	l := &budget.Ledgers{Live: k8s, Namespace: holdfastNamespace, Identity: "corpus"}
	g, err := l.ReadGroup(ctx, budget.GroupID{UID: cur.GetUID()})
	if err != nil {
		r.t.Fatal(err)
	}
	if err := g.RecordEviction(ctx, l, budget.Eviction{Pod: cur.GetName() + "-0", UID: cur.GetUID() + "-0", At: time.Now()}, time.Hour); err != nil {
		r.t.Fatal(err)
	}
	return cur
}

// blocker is a workload of the group's fleet whose rollout is in flight.
func blocker(r *corpusRun) {
	r.t.Helper()
	ctx := context.Background()
	b := corpusWorkload(v1alpha1.KindDeployment, r.ns, "blocker")
	if err := k8s.Create(ctx, b); err != nil {
		r.t.Fatalf("creating the workload in flight: %v", err)
	}
	// It must have served to hold a slot (a workload whose pods never became available
	// holds none): its first revision rolls out, then a second starts.
	writeFinishedStatus(r.t, b)
	r.journaled(b, true)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(b), d); err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "registry.example/blocker:2"
		return k8s.Update(ctx, d)
	})
	if err != nil {
		r.t.Fatalf("starting the rollout in flight: %v", err)
	}
	r.journaled(b, false)
}

// sharedBudget is the DisruptionPolicy the group's policy shares: one pod at a time, an
// hour apart.
func sharedBudget(r *corpusRun) {
	r.t.Helper()
	dp := &v1alpha1.DisruptionPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.ns + "-budget"},
		Spec: v1alpha1.DisruptionPolicySpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Cooldown: &metav1.Duration{Duration: time.Hour},
			Targets: v1alpha1.PodTargets{NamespaceSelector: namespaceNamed(r.ns), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"corpus": "pod"}}}}}
	if err := k8s.Create(context.Background(), dp); err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = k8s.Delete(context.Background(), dp) })
	intercepted(r.t, dp)
}

// writeFinishedStatus writes the status kube's controller would once the workload's current
// generation rolled out: every replica updated and available (a DaemonSet on two nodes).
func writeFinishedStatus(t *testing.T, obj client.Object) {
	t.Helper()
	cur := fetched(t, obj)
	gen := cur.GetGeneration()
	switch o := cur.(type) {
	case *appsv1.Deployment:
		n := ptr.Deref(o.Spec.Replicas, 1)
		o.Status = appsv1.DeploymentStatus{ObservedGeneration: gen, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
	case *appsv1.StatefulSet:
		n := ptr.Deref(o.Spec.Replicas, 1)
		rev := fmt.Sprintf("%s-%d", o.Name, gen)
		o.Status = appsv1.StatefulSetStatus{ObservedGeneration: gen, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			CurrentReplicas: n, CurrentRevision: rev, UpdateRevision: rev}
	case *appsv1.DaemonSet:
		o.Status = appsv1.DaemonSetStatus{ObservedGeneration: gen, DesiredNumberScheduled: 2, CurrentNumberScheduled: 2, UpdatedNumberScheduled: 2,
			NumberReady: 2, NumberAvailable: 2}
	}
	if err := k8s.Status().Update(context.Background(), cur); err != nil {
		t.Fatalf("writing the status of %s: %v", cur.GetName(), err)
	}
}

// journal is the workload's revision journal as the API server holds it; nil when none.
func (r *corpusRun) journal(kind v1alpha1.WorkloadKind, name string) *journal.Journal {
	cm := &corev1.ConfigMap{}
	if k8s.Get(context.Background(), client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(kind, r.ns, name)}, cm) != nil {
		return nil
	}
	j, err := journal.Decode(cm)
	if err != nil {
		return nil
	}
	return j
}

// journaled waits until holdfast's leader has journaled the workload as it is stored now
// (its template current, finished or not) and holdfast's cache has both the journal and
// the workload, so that the webhook and check read the same; it returns the stored object.
func (r *corpusRun) journaled(obj client.Object, finished bool) client.Object {
	r.t.Helper()
	ctx := context.Background()
	var cur client.Object
	eventually(r.t, "the journal of "+obj.GetName()+" in holdfast's cache", func() bool {
		cur = fetched(r.t, obj)
		w, err := workload.From(cur)
		if err != nil {
			r.t.Fatal(err)
		}
		sum, _ := w.Template.Sum()
		cm := &corev1.ConfigMap{}
		key := client.ObjectKey{Namespace: holdfastNamespace, Name: journal.Name(w.Kind, r.ns, w.Name)}
		if k8s.Get(ctx, key, cm) != nil {
			return false
		}
		j, err := journal.Decode(cm)
		if err != nil || j.Generation < cur.GetGeneration() || j.Current() == nil || j.Current().Template != sum || (j.Current().Finished != nil) != finished {
			return false
		}
		inCache := &corev1.ConfigMap{}
		cachedObj := cur.DeepCopyObject().(client.Object)
		return cached.Get(ctx, key, inCache) == nil && inCache.ResourceVersion == cm.ResourceVersion &&
			cached.Get(ctx, client.ObjectKeyFromObject(cur), cachedObj) == nil && cachedObj.GetResourceVersion() == cur.GetResourceVersion()
	})
	return cur
}

// auditLogSize is where the audit log ends now: the events of a request sent after start
// beyond it.
func auditLogSize(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(auditLogPath)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// auditEvent is what the corpus reads of the API server's audit events.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	ObjectRef *struct {
		Resource, Subresource, Namespace, Name, APIGroup string
	} `json:"objectRef"`
	ImpersonatedUser *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

// auditAnnotations are the audit annotations holdfast's rollout webhook gave the change, by
// rule, from the API server's audit log after offset.
func auditAnnotations(t *testing.T, offset int64, c checkCase, sent client.Object) map[string]string {
	t.Helper()
	verb := map[string]string{opCreate: "create", opUpdate: "update", opScale: "update"}[c.op]
	var out map[string]string
	deadline := time.Now().Add(10 * time.Second)
	for out == nil {
		err := readAudit(offset, func(ev auditEvent) {
			ref := ev.ObjectRef
			if ev.Stage != "ResponseComplete" || ev.Verb != verb || ref == nil || ref.Namespace != sent.GetNamespace() || ref.Name != sent.GetName() ||
				(ref.Subresource == "scale") != (c.op == opScale) {
				return
			}
			out = map[string]string{}
			for k, v := range ev.Annotations {
				entry, rule, ok := strings.Cut(k, "/")
				if ok && (strings.HasSuffix(entry, "."+interception.TypeRollout) || strings.HasSuffix(entry, "."+interception.TypeScale)) {
					out[rule] = v
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if out == nil && time.Now().After(deadline) {
			t.Fatalf("no audit event of the change to %s", sent.GetName())
		}
		if out == nil {
			time.Sleep(50 * time.Millisecond)
		}
	}
	return out
}

// readAudit calls f with every audit event after offset.
func readAudit(offset int64, f func(auditEvent)) error {
	file, err := os.Open(auditLogPath)
	if err != nil {
		return err
	}
	defer file.Close()
	if _, err := file.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil {
			f(ev)
		}
	}
	return sc.Err()
}

// installCheckReader applies config/check-reader: the roles check --cluster needs, bound to
// the readers' group.
func installCheckReader(t *testing.T) {
	t.Helper()
	objs, err := charts.Kustomize("check-reader")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if err := k8s.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// readerStayedWithinItsRole holds config/check-reader to what check --cluster did in the
// run, as the audit log recorded it: none of the reader's calls was forbidden, and, when
// the corpus ran whole, every verb the roles grant was used.
func readerStayedWithinItsRole(partial bool) error {
	granted, err := granted("check-reader")
	if err != nil {
		return err
	}
	// The audit log is written as requests complete: wait for the reader's calls.
	var used map[string]bool
	var forbidden []string
	for deadline := time.Now().Add(5 * time.Second); len(used) == 0 && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if used, forbidden, err = callsOf(checkReader.UserName); err != nil {
			return err
		}
	}
	var unused []string
	for _, g := range granted {
		if !used[g] {
			unused = append(unused, g)
		}
	}
	var problems []string
	if len(forbidden) > 0 {
		problems = append(problems, "check --cluster was refused what config/check-reader does not grant: "+strings.Join(forbidden, ", "))
	}
	if len(unused) > 0 && !partial {
		problems = append(problems, "config/check-reader grants what check --cluster never read: "+strings.Join(unused, ", "))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
