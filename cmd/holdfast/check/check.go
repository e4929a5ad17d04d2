// Package check is `holdfast check`: the rollout guard's decision run offline on
// manifests, for CI, answering exactly as the webhook would.
package check

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spf13/cobra"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/defaults"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/manifests"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/validation"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// Options are the command's flags.
type Options struct {
	Policies, Files, History []string
	// Cluster reads what the webhook reads of the cluster (Cluster); Kubeconfig and Context
	// choose it as kubectl does, and either implies Cluster.
	Cluster             bool
	Kubeconfig, Context string
	// HoldfastNamespace is where holdfast keeps its revision journals and ledgers.
	HoldfastNamespace string
	// Now is the time the changes are decided at, RFC 3339; empty: the time check runs.
	Now string
	// Output is text, json, yaml, junit or policyreport.
	Output string
	// Namespace is where a workload without metadata.namespace is judged, as kubectl
	// would apply it.
	Namespace string
	// FailOnWarn ends the command with exit code 1 for a Warn policy's violation too, and
	// FailOnUndecided for a rule not decided without the cluster.
	FailOnWarn, FailOnUndecided bool
	User                        string
	Groups                      []string
}

// DefaultHoldfastNamespace is where the chart and config/ install holdfast.
const DefaultHoldfastNamespace = "holdfast-system"

// Formats are the values of --output.
var formats = []string{"text", "json", "yaml", "junit", "policyreport"}

// ExitError ends the command with its code: 1 for an enforced violation (or a warning,
// with --fail-on-warn; a rule not decided, with --fail-on-undecided), 2 for input or a
// cluster check cannot read and for usage errors.
type ExitError = app.ExitError

// NewCommand is `holdfast check`.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "check -p POLICIES -f OLD -f NEW",
		Short: "Evaluate workload changes against RolloutPolicies offline, as the rollout webhook would",
		Long: `check runs the rollout guard's decision on manifests and answers as the webhook would:
its verdict, HTTP code and messages. Each workload given once is a CREATE; a workload given
twice (same kind, namespace and name) is an UPDATE from the first to the second. Both are
judged as the API server sends them to the webhook: with its defaults (a Deployment without
a strategy takes 25% of its pods down at once; a field left out equals its default value),
the new object with the old one's status.

Without a cluster, check decides the rules that read only the two objects: strategy,
argsMatchReplicas and selection (an update that takes a workload out of a policy),
under each policy's mode and exemptions. The rules that read the cluster's state (settle,
minInterval, revertWindow, window, concurrency and sharedBudget, on a change that may start a
rollout) are not decided offline: the change's action is "undecided", never a pass, and each
such rule is named with what it reads. --history takes ReplicaSets and ControllerRevisions
(and the pods of StatefulSets and DaemonSets): on an UPDATE of a workload they hold revisions
of, settle, minInterval, revertWindow and window are decided from them, as the webhook decides
without a revision journal; concurrency and sharedBudget stay undecided.

--cluster reads what the webhook reads, read-only and through the webhook's own readers:
the revision journals and the fleet and group ledgers in --holdfast-namespace, the
workloads' ReplicaSets, ControllerRevisions and pods, the workloads a concurrency rule
selects, the DisruptionPolicies a sharedBudget names and the namespaces' labels. A workload
given once that exists in the cluster is an UPDATE from the cluster's object, status
included. Every rule is then decided, at --now (RFC 3339; default: now). --kubeconfig and
--context choose the cluster as kubectl does, and imply --cluster.

Namespace objects among the files give their namespaces' labels (over the cluster's); offline,
a policy whose namespaceSelector reads other labels of a namespace not given is not decided
(rule "targets"). A new DaemonSet's strategy limits (and a DaemonSet update's, from a manifest
without a status) resolve against the nodes it runs on: not decided offline either. Policies
are read as the API server,
with holdfast's policy webhook, would store them (schema, defaults, CEL rules, selectors and
windows); a policy it would refuse is an error naming the file, document and field. Documents
of other kinds (Services, ConfigMaps, ...) are skipped and counted. A workload without
metadata.namespace is judged in --namespace.

Exit code 1 when an Enforce policy would refuse a change (or, with --fail-on-warn, a Warn
policy would warn; with --fail-on-undecided, a rule is not decided), 2 when the input or the
cluster cannot be read, a policy would be refused or the command line is wrong, 0 otherwise.
Undecided rules alone exit 0: no edit of a manifest satisfies them (they hold the moment it is
applied, which the webhook decides then, or check --cluster now), and every output shows them.`,
		Example: `  # A change: the old object, then the new one.
  holdfast check -p config/samples/ -f kube-apiserver.old.yaml -f kube-apiserver.yaml

  # New objects from stdin, answers for machines.
  kustomize build overlays/prod | holdfast check -p policies/ -f - -o json

  # Every rule, against what the cluster of the current context holds (read-only).
  kustomize build overlays/prod | holdfast check -p policies/ -f - --cluster

  # The same at a pinned time, from another context, as a PolicyReport.
  holdfast check -p policies/ -f new.yaml --context prod --now 2026-12-01T09:00:00Z -o policyreport`,
		// Required flags are checked here, before cobra checks them, so that a missing
		// one is a usage error (exit 2) too.
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return app.UsageError(err)
			}
			return app.UsageError(cmd.ValidateRequiredFlags())
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := Run(cmd.OutOrStdout(), cmd.InOrStdin(), o, time.Now())
			var ee *ExitError
			if errors.As(err, &ee) && ee.Code == 1 {
				cmd.SilenceErrors = true // the violations are the output
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Policies, "policies", "p", nil, "files or directories of RolloutPolicies (- for stdin)")
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "files or directories of workloads and Namespaces, in order (- for stdin)")
	f.StringSliceVar(&o.History, "history", nil, "files or directories of the workloads' ReplicaSets, ControllerRevisions (and pods): on an UPDATE they decide settle, minInterval, revertWindow and window")
	f.BoolVar(&o.Cluster, "cluster", false, "read what the webhook reads from the cluster of the kubeconfig's context (read-only) and decide every rule")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "the kubeconfig file of --cluster (default: $KUBECONFIG or ~/.kube/config, as kubectl); implies --cluster")
	f.StringVar(&o.Context, "context", "", "the kubeconfig context of --cluster (default: the current one); implies --cluster")
	f.StringVar(&o.HoldfastNamespace, "holdfast-namespace", DefaultHoldfastNamespace, "the namespace holdfast runs in, where --cluster reads its revision journals and ledgers")
	f.StringVar(&o.Now, "now", "", "decide at this time, RFC 3339 (default: now)")
	f.StringVarP(&o.Output, "output", "o", "text", strings.Join(formats, ", ")+" (junit: one test case per workload and policy; policyreport: wgpolicyk8s.io/v1alpha2 PolicyReports)")
	f.StringVarP(&o.Namespace, "namespace", "n", metav1.NamespaceDefault, "the namespace of workloads without metadata.namespace")
	f.BoolVar(&o.FailOnWarn, "fail-on-warn", false, "exit 1 when a Warn policy would warn, as when an Enforce policy refuses")
	f.BoolVar(&o.FailOnUndecided, "fail-on-undecided", false, "exit 1 when a rule is not decided (offline, the rules that read the cluster's state)")
	f.StringVar(&o.User, "as", "", "the requester's user name, for exemptions")
	f.StringSliceVar(&o.Groups, "as-group", nil, "the requester's groups, for exemptions")
	_ = cmd.MarkFlagRequired("policies")
	_ = cmd.MarkFlagRequired("filename")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return app.UsageError(err) })
	return cmd
}

// Document is one object read from a file, named by where it was read.
type Document struct {
	// Source is the file (or stdin) and the document's index in it, from 1.
	Source string
	Object runtime.Object
}

// Result is one change and what the rollout webhook would answer.
type Result struct {
	Object    string `json:"object"`
	Operation string `json:"operation"`
	// Action is allow, audit, warn or deny, as the webhook would answer; undecided when no
	// decided rule refuses the change and a rule was not decided (Undecided).
	Action string `json:"action"`
	// Code is the HTTP status the webhook would answer: 200 admitted, 403 refused; 0 when
	// undecided.
	Code       int32       `json:"code,omitempty"`
	Violations []Violation `json:"violations"`
	// Undecided are the rules that read the cluster's state, which check was not given.
	Undecided []Undecided `json:"undecided,omitempty"`
	// Policies are the policies that judged the change (rollout.Applies), by name.
	Policies []string `json:"policies"`
	decision decision.Violations
	workload workload.Ref
}

// Report is everything check found: a Result per change, and the documents of kinds it
// does not judge, skipped. JSON and YAML print it as it is.
type Report struct {
	Results []Result `json:"results"`
	// Skipped is how many documents were skipped, SkippedKinds how many of each kind.
	Skipped      int            `json:"skipped"`
	SkippedKinds map[string]int `json:"skippedKinds,omitempty"`
	skipped      []Document
	policies     []v1alpha1.RolloutPolicy
	now          time.Time
}

// Violation is one policy rule's finding on a change, as the webhook reports it.
type Violation struct {
	Policy  string `json:"policy"`
	Rule    string `json:"rule"`
	Action  string `json:"action"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Undecided is a policy's rule that reads what check was not given (rollout.StateRules):
// it may refuse the change, or not.
type Undecided struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`
	// Reads is what the rule reads of the cluster.
	Reads string `json:"reads"`
}

// ActionUndecided is the action of a change a rule not decided may refuse.
const ActionUndecided = "undecided"

func (u Undecided) String() string {
	return fmt.Sprintf("not decided offline: [%s/%s] %s reads %s; give --cluster", u.Policy, u.Rule, u.Rule, u.Reads)
}

// Run checks as the command does, writing to out; now is when the changes are decided,
// unless o.Now says.
func Run(out io.Writer, stdin io.Reader, o *Options, now time.Time) error {
	if !slices.Contains(formats, o.Output) {
		return &ExitError{Code: 2, Err: fmt.Errorf("--output %q: want one of %s", o.Output, strings.Join(formats, ", "))}
	}
	if o.Now != "" {
		t, err := time.Parse(time.RFC3339, o.Now)
		if err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("--now %q: want a time in RFC 3339, e.g. 2026-12-01T09:00:00Z", o.Now)}
		}
		now = t
	}
	if o.Namespace == "" {
		// A workload is never judged in "": kubectl would apply it in "default".
		o.Namespace = metav1.NamespaceDefault
	}
	policies, err := ReadPolicies(o.Policies, stdin)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	read, err := ReadObjects(o.Files, stdin)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	objs, skipped, err := Judged(read, o.Namespace)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	revisions, err := ReadObjects(o.History, stdin)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	var cluster *Cluster
	if o.Cluster || o.Kubeconfig != "" || o.Context != "" {
		if cluster, err = ConnectCluster(o.Kubeconfig, o.Context, o.HoldfastNamespace); err != nil {
			return &ExitError{Code: 2, Err: err}
		}
	}
	results, err := Evaluate(policies, objs, revisions, cluster, authenticationv1.UserInfo{Username: o.User, Groups: o.Groups}, now)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	report := Report{Results: results, Skipped: len(skipped), skipped: skipped, policies: policies, now: now}
	if results == nil {
		report.Results = []Result{}
	}
	for _, doc := range skipped {
		if report.SkippedKinds == nil {
			report.SkippedKinds = map[string]int{}
		}
		report.SkippedKinds[kindOf(doc)]++
	}
	if err := write(out, report, o); err != nil {
		return err
	}
	// A refusal is named before a warning or a rule not decided that fails the check too.
	var fail error
	for _, r := range results {
		switch a := r.decision.Action(); {
		case a == decision.Deny:
			return &ExitError{Code: 1, Err: errors.New("an Enforce policy would refuse a change")}
		case fail == nil && a == decision.Warn && o.FailOnWarn:
			fail = errors.New("a Warn policy would warn of a change (--fail-on-warn)")
		case fail == nil && len(r.Undecided) > 0 && o.FailOnUndecided:
			fail = errors.New("a rule was not decided without the cluster (--fail-on-undecided)")
		}
	}
	if fail != nil {
		return &ExitError{Code: 1, Err: fail}
	}
	return nil
}

// fails reports whether a policy's findings (and rules not decided) on a change fail the
// check: a refusal, a warning with --fail-on-warn, a rule not decided with
// --fail-on-undecided.
func fails(a decision.Action, undecided bool, o *Options) bool {
	return a == decision.Deny || (a == decision.Warn && o.FailOnWarn) || (undecided && o.FailOnUndecided)
}

// kindOf names a document's kind with its group, e.g. ConfigMap, Ingress.networking.k8s.io.
func kindOf(doc Document) string {
	return doc.Object.GetObjectKind().GroupVersionKind().GroupKind().String()
}

// Judged splits the documents into those check judges (the guarded workloads and the
// Namespaces that label their namespaces), in order, and those of other kinds, skipped as
// kubectl apply's neighbours in a CI stream. A workload without metadata.namespace is
// given namespace, as kubectl applies it. A policy among them is an error: policies are
// given with -p, and a policy read as a workload would be silently ignored.
func Judged(docs []Document, namespace string) (judged, skipped []Document, err error) {
	for _, doc := range docs {
		if _, ok := doc.Object.(*corev1.Namespace); ok {
			judged = append(judged, doc)
			continue
		}
		if m, ok := workload.MetaOf(doc.Object); ok {
			if m.Namespace == "" {
				doc.Object.(client.Object).SetNamespace(namespace)
			}
			judged = append(judged, doc)
			continue
		}
		gvk := doc.Object.GetObjectKind().GroupVersionKind()
		switch {
		case gvk.Group == v1alpha1.GroupVersion.Group:
			return nil, nil, fmt.Errorf("%s: a %s is a policy: give policies with -p", doc.Source, gvk.Kind)
		case gvk.Group == appsv1.GroupName && slices.Contains(workload.Kinds(), v1alpha1.WorkloadKind(gvk.Kind)):
			// A guarded kind in another version (apps/v1beta2) is a workload we would
			// otherwise skip without a word.
			return nil, nil, fmt.Errorf("%s: a %s of %s: holdfast judges apps/v1 workloads", doc.Source, gvk.Kind, gvk.GroupVersion())
		}
		skipped = append(skipped, doc)
	}
	return judged, skipped, nil
}

// Evaluate decides each workload change with the rollout webhook's decision. With a
// cluster, it reads what the webhook reads (Cluster) and decides every rule; without one,
// the rules that read the cluster's state are Undecided, but for those of
// rollout.RevisionRules on an UPDATE of a workload whose revisions are among revisions.
func Evaluate(policies []v1alpha1.RolloutPolicy, docs, revisions []Document, cluster *Cluster, user authenticationv1.UserInfo, now time.Time) ([]Result, error) {
	nsLabels := map[string]map[string]string{}
	type change struct{ old, new client.Object }
	var order []string
	changes := map[string]*change{}
	for _, doc := range docs {
		obj := doc.Object
		if ns, ok := obj.(*corev1.Namespace); ok {
			nsLabels[ns.Name] = ns.Labels
			continue
		}
		w, ok := obj.(client.Object)
		m, guarded := workload.MetaOf(obj)
		if !ok || !guarded {
			return nil, fmt.Errorf("%s: a %T: check reads Deployments, StatefulSets, DaemonSets and Namespaces", doc.Source, obj)
		}
		key := m.Ref.String()
		switch c := changes[key]; {
		case c == nil:
			changes[key] = &change{new: w}
			order = append(order, key)
		case c.old == nil:
			c.old, c.new = c.new, w
		default:
			return nil, fmt.Errorf("%s: %s is given a third time: give the old object, then the new one", doc.Source, key)
		}
	}
	ctx := context.Background()
	matcher := policy.NewMatcher()
	var results []Result
	for _, key := range order {
		c := changes[key]
		var err error
		if cluster != nil {
			// What the API server holds is the old object of a change given once.
			if c.old, err = cluster.old(ctx, c.old, c.new); err != nil {
				return nil, err
			}
		}
		// The webhook is sent both objects defaulted, the new one with the old one's status.
		c.old, c.new = defaults.Admitted(c.old, c.new)
		in := rollout.Input{Operation: admissionv1.Create, User: user, Policies: policies, Matcher: matcher, Now: now}
		if in.New, err = workload.From(c.new); err != nil {
			return nil, err
		}
		labels, err := namespaceLabels(ctx, cluster, c.new.GetNamespace(), nsLabels)
		if err != nil {
			return nil, err
		}
		in.NamespaceLabels = labels
		if c.old != nil {
			in.Operation = admissionv1.Update
			if in.Old, err = workload.From(c.old); err != nil {
				return nil, err
			}
			in.TemplateChanged = !workload.SameTemplate(in.Old.Template, in.New.Template)
		}
		_, nsGiven := nsLabels[c.new.GetNamespace()]
		d, undecided, err := decide(ctx, in, revisions, cluster, nsGiven)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.New, err)
		}
		r := Result{Object: in.New.String(), Operation: string(in.Operation), Action: d.Action().String(), decision: d.Violations,
			Violations: []Violation{}, Undecided: undecided, Policies: []string{}, workload: in.New.Ref}
		if in.Old != nil && r.workload.UID == "" {
			r.workload.UID = in.Old.UID // a manifest names the object the cluster holds
		}
		if len(undecided) > 0 && d.Action() != decision.Deny {
			r.Action = ActionUndecided // a rule not decided may refuse it
		} else {
			r.Code = rollout.Respond(d).Result.Code
		}
		for i := range policies {
			if rollout.Applies(&policies[i], in) {
				r.Policies = append(r.Policies, policies[i].Name)
			}
		}
		for _, v := range d.Violations {
			cv := Violation{Policy: v.Policy, Rule: v.Rule, Action: v.Action.String(), Message: v.String()}
			if v.Field != nil {
				cv.Field = v.Field.String()
			}
			r.Violations = append(r.Violations, cv)
		}
		results = append(results, r)
	}
	return results, nil
}

// namespaceLabels are the labels policies' namespace selectors read of the namespace: a
// Namespace among the files (what is applied with the workloads), else the cluster's, else
// only its name's.
func namespaceLabels(ctx context.Context, cluster *Cluster, namespace string, given map[string]map[string]string) (map[string]string, error) {
	labels := map[string]string{corev1.LabelMetadataName: namespace}
	from, ok := given[namespace]
	if !ok && cluster != nil {
		var err error
		if from, err = cluster.namespaceLabels(ctx, namespace); err != nil {
			return nil, err
		}
	}
	for k, v := range from {
		labels[k] = v
	}
	return labels, nil
}

// decide decides the change with what check was given of the cluster's state: with the
// cluster, everything the webhook reads; offline, the history among revisions (on an
// UPDATE of a workload they hold revisions of) decides rollout.RevisionRules, and the
// rules that read what check was not given are returned undecided, decided without.
func decide(ctx context.Context, in rollout.Input, revisions []Document, cluster *Cluster, nsGiven bool) (rollout.Decision, []Undecided, error) {
	if cluster != nil {
		if err := cluster.handler.ReadState(ctx, &in); err != nil {
			return rollout.Decision{}, nil, err
		}
		d, err := rollout.Decide(in)
		return d, nil, err
	}
	known := []string(nil)
	if in.Old != nil && len(revisions) > 0 {
		h, ok, err := historyOf(in.Old, revisions)
		if err != nil {
			return rollout.Decision{}, nil, err
		}
		if ok {
			in.History, known = h, rollout.RevisionRules
		}
	}
	var undecided []Undecided
	decided := make([]v1alpha1.RolloutPolicy, len(in.Policies))
	for i := range in.Policies {
		p := &in.Policies[i]
		if !nsGiven && readsNamespaceLabels(p) {
			// Which namespaces it selects is cluster state too: without the namespace's
			// labels it might select the workload or not, so none of its rules is decided.
			undecided = append(undecided, Undecided{Policy: p.Name, Rule: ruleTargets, Reads: namespaceReads})
			decided[i] = *p
			decided[i].Spec.Suspend = true
			continue
		}
		rules, err := rollout.StateRules(p, in)
		if err != nil {
			return rollout.Decision{}, nil, err
		}
		noStatus := unstatused(p, in)
		if noStatus && !slices.Contains(rules, rollout.RuleStrategy) {
			rules = append(rules, rollout.RuleStrategy)
		}
		var unknown []string
		for _, rule := range rules {
			if !slices.Contains(known, rule) {
				unknown = append(unknown, rule)
				reads := rollout.ReadsOf(rule)
				if noStatus && rule == rollout.RuleStrategy {
					reads = statusReads
				}
				undecided = append(undecided, Undecided{Policy: p.Name, Rule: rule, Reads: reads})
			}
		}
		decided[i] = rollout.Without(*p, unknown...)
	}
	in.Policies = decided
	d, err := rollout.Decide(in)
	return d, undecided, err
}

// ruleTargets names, among the rules not decided offline, a policy's selection of
// namespaces by labels the files do not give.
const ruleTargets = "targets"

const (
	namespaceReads = "the labels of the workload's namespace, which its namespaceSelector selects by (or give the Namespace among the files)"
	statusReads    = "how many nodes the DaemonSet runs on, which its percentages resolve against, from the old object's status (the manifest has none)"
)

// readsNamespaceLabels is a policy whose namespaceSelector reads a label other than
// kubernetes.io/metadata.name, the one label check knows of a namespace not given.
func readsNamespaceLabels(p *v1alpha1.RolloutPolicy) bool {
	sel := p.Spec.Targets.NamespaceSelector
	if sel == nil {
		return false
	}
	for k := range sel.MatchLabels {
		if k != corev1.LabelMetadataName {
			return true
		}
	}
	for _, e := range sel.MatchExpressions {
		if e.Key != corev1.LabelMetadataName {
			return true
		}
	}
	return false
}

// unstatused is a DaemonSet UPDATE from an old manifest without a status, judged by a
// strategy rule: its percentages (and its capped absolute values) resolve against the
// nodes it runs on, which the webhook reads from the stored object's status.
func unstatused(p *v1alpha1.RolloutPolicy, in rollout.Input) bool {
	r := p.Spec.Rules.Strategy
	if r == nil || (r.MaxUnavailable == nil && !r.DaemonSetSurge) || p.Spec.Suspend {
		return false
	}
	if in.Old == nil || in.New.Kind != v1alpha1.KindDaemonSet || in.Old.Expected > 0 {
		return false
	}
	return rollout.Applies(p, in)
}

// historyOf is the workload's revisions among the objects given with --history, and
// whether they hold any: its ReplicaSets or ControllerRevisions (those its UID controls,
// or, for an object without one, its namespace's of its kind and name) and, for the
// Ready counts of a StatefulSet's or DaemonSet's revisions, the pods among them.
func historyOf(w *workload.Workload, docs []Document) (history.History, bool, error) {
	var sets []appsv1.ReplicaSet
	var revs []appsv1.ControllerRevision
	var pods []corev1.Pod
	owner := w.UID
	for _, doc := range docs {
		o, ok := doc.Object.(client.Object)
		if !ok || o.GetNamespace() != w.Namespace {
			continue
		}
		if c := metav1.GetControllerOfNoCopy(o); owner == "" && c != nil && c.Kind == string(w.Kind) && c.Name == w.Name {
			owner = c.UID
		}
		switch o := o.(type) {
		case *appsv1.ReplicaSet:
			rs := o.DeepCopy()
			defaults.ReplicaSet(rs) // as the cluster's are: its Deployment's template, defaulted
			sets = append(sets, *rs)
		case *appsv1.ControllerRevision:
			revs = append(revs, *o)
		case *corev1.Pod:
			pods = append(pods, *o)
		}
	}
	if owner == "" {
		return history.History{}, false, nil
	}
	var h history.History
	var err error
	if w.Kind == v1alpha1.KindDeployment {
		h.Revisions = history.FromReplicaSets(owner, sets)
	} else {
		h.Revisions, err = history.FromControllerRevisions(owner, w.Name, revs, pods, nil)
	}
	return h, len(h.Revisions) > 0, err
}

// ReadPolicies reads the RolloutPolicies in the files and directories given ("-" is
// stdin) as the API server, with holdfast's policy webhook, would store them: defaulted,
// or refused with every field's error (internal/validation), named by file and document.
// DisruptionPolicies are validated too (a rollout may share one's budget), but not
// returned: evictions are not changes to manifests.
func ReadPolicies(paths []string, stdin io.Reader) ([]v1alpha1.RolloutPolicy, error) {
	decoder := serializer.NewCodecFactory(informer.NewScheme()).UniversalDeserializer()
	var out []v1alpha1.RolloutPolicy
	err := manifests.Each(paths, stdin, func(source string, raw []byte) error {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		if u.GroupVersionKind().Group != v1alpha1.GroupVersion.Group {
			obj, _, err := decoder.Decode(raw, nil, nil)
			if err != nil {
				return fmt.Errorf("%s: %w", source, err)
			}
			return fmt.Errorf("%s: a %T is not a policy", source, obj)
		}
		p, errs := validation.Admit(u)
		if len(errs) > 0 {
			return fmt.Errorf("%s: %w", source, apierrors.NewInvalid(u.GroupVersionKind().GroupKind(), u.GetName(), errs))
		}
		if rp, ok := p.(*v1alpha1.RolloutPolicy); ok {
			out = append(out, *rp)
		}
		return nil
	})
	return out, err
}

// ReadObjects decodes every YAML or JSON document in the files and directories given
// ("-" is stdin), in order: typed when the scheme knows its kind, unstructured otherwise
// (custom resources, which check skips). A document without apiVersion or kind is not a
// Kubernetes object, and an error.
func ReadObjects(paths []string, stdin io.Reader) ([]Document, error) {
	decoder := serializer.NewCodecFactory(informer.NewScheme()).UniversalDeserializer()
	var out []Document
	err := manifests.Each(paths, stdin, func(source string, raw []byte) error {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s: not a Kubernetes object: %w", source, err)
		}
		if u.GetAPIVersion() == "" || u.GetKind() == "" {
			return fmt.Errorf("%s: not a Kubernetes object: it needs apiVersion and kind", source)
		}
		obj, _, err := decoder.Decode(raw, nil, nil)
		if runtime.IsNotRegisteredError(err) {
			obj, err = u, nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		out = append(out, Document{Source: source, Object: obj})
		return nil
	})
	return out, err
}
