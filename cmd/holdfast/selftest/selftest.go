// Package selftest is `holdfast selftest`: it makes the API server call each of holdfast's
// webhook entries with a dry-run request that holdfast alone refuses in a recognisable way
// (app.SelfTestName, app.SelfTestCause), and reports per entry whether it answered.
package selftest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/interception"
)

// Status is the outcome of one entry's probe.
type Status string

const (
	// OK: the API server called the entry and holdfast answered the probe.
	OK Status = "OK"
	// Fail: the probe was admitted (the entry was not called, or did not answer and fails
	// open) or refused by something other than holdfast's answer.
	Fail Status = "FAIL"
	// Skip: the entry cannot be probed without touching a live object, or selects no
	// namespace now, or another entry answered for it.
	Skip Status = "SKIP"
)

// Result is one entry's probe.
type Result struct {
	Configuration string
	Entry         string
	Path          string
	// Probe says what was sent: "dry-run create apps/v1 Deployment ns/holdfast-selftest".
	Probe   string
	Status  Status
	Reason  string
	Elapsed time.Duration
}

// Options are the command's settings.
type Options struct {
	Kubeconfig string
	Context    string
	// Anchor is the installed ValidatingWebhookConfiguration (holdfast's
	// --webhook-configuration); the leader's is Anchor-guards.
	Anchor  string
	Timeout time.Duration
}

// NewCommand is `holdfast selftest`.
func NewCommand() *cobra.Command {
	o := &Options{Anchor: "holdfast", Timeout: 10 * time.Second}
	cmd := &cobra.Command{
		Use:   "selftest",
		Short: "Make the API server call each of holdfast's webhooks with a dry-run probe",
		Long: `selftest reads holdfast's webhook configurations (--webhook-configuration and the one
holdfast's leader derives from the policies, <name>-guards) and, for each entry, sends the
API server a dry-run request that the entry selects, for an object named holdfast-selftest:
a policy, a Deployment (StatefulSet, DaemonSet) with the labels the entry selects, an
eviction of a pod, a PodDisruptionBudget, in a namespace the entry selects. holdfast refuses
such a dry run with the cause holdfast.dev/SelfTest, which only it gives: an entry is OK
when the API server's refusal names it. Nothing is created (every request is a dry run) and
nothing is evicted (no pod of that name needs to exist; holdfast answers before the API
server looks).

FAIL: the probe was admitted (the entry was not called, or holdfast did not answer and the
entry's failurePolicy is Ignore) or refused for another reason, which is printed (holdfast
unreachable, a TLS error, a timeout). SKIP: entries whose requests need a live object
(scale, pod DELETE and namespace relabel entries), entries that select no namespace now,
and entries for which another entry answered first.

Exit code 1 when an entry FAILs, 2 when the configurations cannot be read or the command
line is wrong, 0 otherwise. The identity needs the rights of the chart's self-test role
(docs/operations.md, "Self-test").`,
		Example: `  # Against the cluster of the current context.
  holdfast selftest

  # A release installed under another name.
  holdfast selftest --webhook-configuration my-holdfast --context prod`,
		Args:         func(cmd *cobra.Command, args []string) error { return app.UsageError(cobra.NoArgs(cmd, args)) },
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := restConfig(o.Kubeconfig, o.Context)
			if err != nil {
				return &app.ExitError{Code: 2, Err: err}
			}
			results, err := Run(cmd.Context(), cfg, o.Anchor, o.Timeout)
			if err != nil {
				return &app.ExitError{Code: 2, Err: err}
			}
			Print(cmd.OutOrStdout(), results)
			if n := Failed(results); n > 0 {
				return &app.ExitError{Code: 1, Err: fmt.Errorf("%d of %d webhook entries failed the self-test", n, len(results))}
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return app.UsageError(err) })
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "the kubeconfig file (default: in-cluster, $KUBECONFIG or ~/.kube/config, as kubectl)")
	f.StringVar(&o.Context, "context", "", "the kubeconfig context (default: the current one)")
	f.StringVar(&o.Anchor, "webhook-configuration", o.Anchor, "holdfast's installed ValidatingWebhookConfiguration (its --webhook-configuration; the chart names it after the release)")
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "how long each probe may take")
	return cmd
}

func restConfig(kubeconfig, context string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: context}).ClientConfig()
}

// Failed counts the failed entries.
func Failed(results []Result) int {
	n := 0
	for _, r := range results {
		if r.Status == Fail {
			n++
		}
	}
	return n
}

// Print writes one line per entry.
func Print(w io.Writer, results []Result) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tCONFIGURATION\tENTRY\tPATH\tPROBE\tREASON")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Status, r.Configuration, r.Entry, r.Path, r.Probe, r.Reason)
	}
	_ = tw.Flush()
}

// Run probes every entry of the anchor configuration and of the leader's. An error means
// a configuration could not be read, not that a probe failed.
func Run(ctx context.Context, cfg *rest.Config, anchor string, timeout time.Duration) ([]Result, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = timeout
	c, err := client.New(cfg, client.Options{Scheme: informer.NewScheme()})
	if err != nil {
		return nil, err
	}
	var results []Result
	var entries []probeEntry
	for _, name := range []string{anchor, interception.Name(anchor)} {
		vwc := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, vwc); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", name, err)
			}
			reason := "not found: the chart installs it"
			if name != anchor {
				reason = "not found: holdfast's leader writes it (does a replica lead?)"
			}
			results = append(results, Result{Configuration: name, Entry: "-", Path: "-", Probe: "-", Status: Fail, Reason: reason})
			continue
		}
		for _, w := range vwc.Webhooks {
			entries = append(entries, probeEntry{config: name, hook: w, path: pathOf(w.ClientConfig)})
		}
	}
	var namespaces corev1.NamespaceList
	if err := c.List(ctx, &namespaces); err != nil {
		return nil, fmt.Errorf("listing namespaces, to find those the entries select: %w", err)
	}
	p := prober{c: c, entries: entries, namespaces: namespaces.Items}
	for _, e := range entries {
		results = append(results, p.probe(ctx, e))
	}
	return results, nil
}

type probeEntry struct {
	config string
	hook   admissionregistrationv1.ValidatingWebhook
	path   string
}

// pathOf is the path an entry calls, cleaned ("https://host//validate-policy" is served
// as /validate-policy).
func pathOf(cc admissionregistrationv1.WebhookClientConfig) string {
	switch {
	case cc.Service != nil:
		return path.Clean("/" + ptr.Deref(cc.Service.Path, "/"))
	case cc.URL != nil:
		if u, err := url.Parse(*cc.URL); err == nil {
			return path.Clean("/" + u.Path)
		}
	}
	return ""
}

type prober struct {
	c          client.Client
	entries    []probeEntry
	namespaces []corev1.Namespace
}

var dryRun = &client.CreateOptions{DryRun: []string{metav1.DryRunAll}}

// probe sends e's probe and judges the API server's answer.
func (p *prober) probe(ctx context.Context, e probeEntry) Result {
	r := Result{Configuration: e.config, Entry: e.hook.Name, Path: e.path}
	skip := func(probe, reason string) Result {
		r.Probe, r.Status, r.Reason = probe, Skip, reason
		return r
	}
	var send func() error
	switch e.path {
	case "/validate-policy":
		pol := &v1alpha1.RolloutPolicy{ObjectMeta: metav1.ObjectMeta{Name: app.SelfTestName}, Spec: v1alpha1.RolloutPolicySpec{
			Mode:    v1alpha1.ModeAudit,
			Targets: v1alpha1.WorkloadTargets{Kinds: []v1alpha1.WorkloadKind{v1alpha1.KindDeployment}, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{probeLabel: "probe"}}},
			Rules:   v1alpha1.RolloutRules{Settle: &v1alpha1.SettleRule{}},
		}}
		r.Probe = "dry-run create holdfast.dev/v1alpha1 RolloutPolicy " + app.SelfTestName
		send = func() error { return p.c.Create(ctx, pol, dryRun) }
	case interception.RolloutPath:
		resource := workloadResource(e.hook.Rules)
		if resource == "" {
			return skip("-", "a scale request needs a live workload; the rollout entries probe "+e.path)
		}
		ns, why := p.namespaceFor(e)
		if ns == "" {
			return skip("-", why)
		}
		lbls, ok := labelsFor(e.hook.ObjectSelector)
		if !ok {
			return skip("-", "no labels satisfy the entry's objectSelector")
		}
		obj := newWorkload(resource, ns, lbls)
		r.Probe = fmt.Sprintf("dry-run create apps/v1 %s %s/%s", obj.GetObjectKind().GroupVersionKind().Kind, ns, app.SelfTestName)
		send = func() error { return p.c.Create(ctx, obj, dryRun) }
	case interception.EvictionPath:
		ns, why := p.namespaceFor(e)
		if ns == "" {
			return skip("-", why)
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app.SelfTestName}}
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app.SelfTestName},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
		r.Probe = fmt.Sprintf("dry-run eviction of pod %s/%s", ns, app.SelfTestName)
		send = func() error {
			return p.c.SubResource("eviction").Create(ctx, pod, ev, &client.SubResourceCreateOptions{CreateOptions: *dryRun})
		}
	case interception.FloorPath:
		ns, why := p.namespaceFor(e)
		if ns == "" {
			return skip("-", why)
		}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: app.SelfTestName},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intOne),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{probeLabel: "probe"}}}}
		r.Probe = fmt.Sprintf("dry-run create policy/v1 PodDisruptionBudget %s/%s", ns, app.SelfTestName)
		send = func() error { return p.c.Create(ctx, pdb, dryRun) }
	case interception.DeletePath:
		return skip("-", "a pod DELETE reaches holdfast only for a live, Ready pod; the eviction entries probe the same handler")
	case interception.NamespacePath:
		return skip("-", "a namespace relabel would name a live namespace")
	case interception.PodRelabelPath:
		return skip("-", "a pod relabel would name a live pod")
	default:
		return skip("-", "not a path holdfast serves")
	}
	// Entries that select alike may both match the probe (a RolloutPolicy's eviction entry
	// beside a DisruptionPolicy's): the API server calls both at once and answers with the
	// denial that came back first. A probe another entry answered is sent again, a few
	// times, until this entry's answer is the one returned.
	for range probeAttempts {
		start := time.Now()
		err := send()
		r.Elapsed = time.Since(start).Round(time.Millisecond)
		if r.Status, r.Reason = judge(e.hook.Name, err); r.Status != Skip {
			break
		}
	}
	if r.Status == OK {
		r.Reason = fmt.Sprintf("answered in %s", r.Elapsed)
	}
	return r
}

// probeAttempts bounds the probes of an entry that another entry's answer shadows.
const probeAttempts = 16

// judge reads the API server's answer to a probe of the entry named hook.
func judge(hook string, err error) (Status, string) {
	if err == nil || apierrors.IsNotFound(err) {
		// NotFound: the eviction of a pod that does not exist passed admission.
		return Fail, "the probe was admitted: the API server did not call the entry, or holdfast did not answer and the entry fails open (failurePolicy Ignore)"
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) || !apierrors.HasStatusCause(err, app.SelfTestCause) {
		return Fail, err.Error()
	}
	if strings.Contains(se.Status().Message, fmt.Sprintf("admission webhook %q", hook)) {
		return OK, ""
	}
	return Skip, "another holdfast entry answered first: " + se.Status().Message
}

// namespaceFor is a namespace the entry selects, preferring those the fewest other entries
// of its path select, so that the answer names this entry; "" and why when there is none.
func (p *prober) namespaceFor(e probeEntry) (string, string) {
	sel, err := selectorOf(e.hook.NamespaceSelector)
	if err != nil {
		return "", "its namespaceSelector cannot be read: " + err.Error()
	}
	best, bestShared := "", 0
	for _, ns := range p.namespaces {
		if ns.Status.Phase == corev1.NamespaceTerminating || !sel.Matches(labels.Set(ns.Labels)) {
			continue
		}
		shared := 0
		for _, o := range p.entries {
			if o.path != e.path || o.hook.Name == e.hook.Name {
				continue
			}
			if s, err := selectorOf(o.hook.NamespaceSelector); err == nil && s.Matches(labels.Set(ns.Labels)) {
				shared++
			}
		}
		if best == "" || shared < bestShared {
			best, bestShared = ns.Name, shared
		}
	}
	if best == "" {
		return "", "no namespace is selected by the entry now"
	}
	return best, ""
}

// selectorOf reads a webhook's selector as the API server does: nil selects everything.
func selectorOf(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// probeLabel selects the probe's pods and nothing else.
const probeLabel = "holdfast.dev/selftest"

var intOne = intstr.FromInt32(1)

// labelsFor are labels the objectSelector selects (nil selects everything), with
// probeLabel; false when none can.
func labelsFor(s *metav1.LabelSelector) (map[string]string, bool) {
	out := map[string]string{probeLabel: "probe"}
	if s == nil {
		return out, true
	}
	for k, v := range s.MatchLabels {
		out[k] = v
	}
	for _, r := range s.MatchExpressions {
		if _, set := s.MatchLabels[r.Key]; set {
			continue
		}
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			if len(r.Values) > 0 {
				out[r.Key] = r.Values[0]
			}
		case metav1.LabelSelectorOpExists:
			out[r.Key] = "probe"
		case metav1.LabelSelectorOpNotIn, metav1.LabelSelectorOpDoesNotExist:
			if r.Key == probeLabel {
				delete(out, r.Key)
			}
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	return out, err == nil && sel.Matches(labels.Set(out))
}

// workloadResource is the workload resource an entry's rules name for CREATE, preferring
// deployments; "" for an entry of scale subresources alone.
func workloadResource(rules []admissionregistrationv1.RuleWithOperations) string {
	var found []string
	for _, r := range rules {
		if !slices.Contains(r.Operations, admissionregistrationv1.Create) && !slices.Contains(r.Operations, admissionregistrationv1.OperationAll) {
			continue
		}
		for _, res := range r.Resources {
			if !strings.Contains(res, "/") {
				found = append(found, res)
			}
		}
	}
	if slices.Contains(found, "deployments") {
		return "deployments"
	}
	if len(found) == 0 {
		return ""
	}
	return found[0]
}

// newWorkload is a minimal valid workload of the resource, named app.SelfTestName.
func newWorkload(resource, ns string, lbls map[string]string) client.Object {
	meta := metav1.ObjectMeta{Namespace: ns, Name: app.SelfTestName, Labels: lbls}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{probeLabel: lbls[probeLabel]}}
	if sel.MatchLabels[probeLabel] == "" {
		// The objectSelector refuses probeLabel: select the pods by its own labels.
		sel.MatchLabels = lbls
	}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "probe", Image: "registry.k8s.io/pause:3.10"}}}}
	var obj client.Object
	switch resource {
	case "statefulsets":
		obj = &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: tmpl}}
	case "daemonsets":
		obj = &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tmpl}}
	default:
		obj = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: tmpl}}
	}
	gvk, _ := apiutil.GVKForObject(obj, informer.NewScheme())
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	return obj
}
