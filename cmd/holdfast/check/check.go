// Package check is `holdfast check`: the rollout guard's decision run offline on
// manifests, for CI, answering exactly as the webhook would.
package check

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
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
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/spf13/cobra"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/decision"
	"github.com/holdfast-dev/holdfast/internal/defaults"
	"github.com/holdfast-dev/holdfast/internal/history"
	"github.com/holdfast-dev/holdfast/internal/informer"
	"github.com/holdfast-dev/holdfast/internal/journal"
	"github.com/holdfast-dev/holdfast/internal/manifests"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/validation"
	"github.com/holdfast-dev/holdfast/internal/workload"
	"github.com/holdfast-dev/holdfast/webhooks/rollout"
)

// Options are the command's flags.
type Options struct {
	Policies, Files, History []string
	// Kubeconfig, when set, reads the workloads' revisions from that cluster.
	Kubeconfig string
	// Output is text, json, yaml or junit.
	Output string
	// Namespace is where a workload without metadata.namespace is judged, as kubectl
	// would apply it.
	Namespace string
	// FailOnWarn ends the command with exit code 1 for a Warn policy's violation too.
	FailOnWarn bool
	User       string
	Groups     []string
}

// Formats are the values of --output.
var formats = []string{"text", "json", "yaml", "junit"}

// ExitError ends the command with its code: 1 for an enforced violation (or a warning,
// with --fail-on-warn), 2 for input check cannot read and for usage errors.
type ExitError = app.ExitError

// usageError makes cobra's own errors (unknown flags, bad flag values, arguments, missing
// required flags) exit 2, as input check cannot read does: cobra returns them as plain
// errors, which main would end with 1, the code CI reads as "refused".
func usageError(err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: 2, Err: err}
}

// NewCommand is `holdfast check`.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "check -p POLICIES -f OLD -f NEW",
		Short: "Evaluate workload changes against RolloutPolicies offline, as the rollout webhook would",
		Long: `check runs the rollout guard's decision on manifests, without a cluster: each workload
given once is a CREATE; a workload given twice (same kind, namespace and name) is an UPDATE
from the first to the second. Both are judged as the API server sends them to the webhook:
with its defaults (a Deployment without a strategy takes 25% of its pods down at once; a
field left out equals its default value), the new object with the old one's status. The
old object's status, when given (kubectl get -o yaml prints it), is read as the webhook
reads the stored object's: a rollout it shows under way has not finished; an old object
without a status is taken as fully rolled out. Violations print exactly as the webhook's
denial message.
Namespace objects among the files give their namespaces' labels; any other namespace has
only kubernetes.io/metadata.name. --history takes ReplicaSets and ControllerRevisions for
the rules that read a workload's revisions. Policies are read as the API server, with
holdfast's policy webhook, would store them (schema, defaults, CEL rules, selectors and
windows); a policy it would refuse is an error naming the file, document and field.
Documents of other kinds (Services, ConfigMaps, ...) are skipped and counted. A workload
without metadata.namespace is judged in --namespace.
Exit code 1 when an Enforce policy would refuse a change (or, with --fail-on-warn, a
Warn policy would warn), 2 when the input cannot be read, a policy would be refused or
the command line is wrong, 0 otherwise.`,
		Example: `  # A change: the old object, then the new one.
  holdfast check -p config/samples/ -f kube-apiserver.old.yaml -f kube-apiserver.yaml

  # New objects from stdin, answers for machines.
  kustomize build overlays/prod | holdfast check -p policies/ -f - -o json

  # minInterval and revertWindow with the workloads' revisions read from a cluster.
  holdfast check -p policies/ -f old.yaml -f new.yaml --kubeconfig ~/.kube/config`,
		// Required flags are checked here, before cobra checks them, so that a missing
		// one is a usage error (exit 2) too.
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return usageError(err)
			}
			return usageError(cmd.ValidateRequiredFlags())
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
	f.StringSliceVar(&o.History, "history", nil, "files or directories of the workloads' ReplicaSets and ControllerRevisions")
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "read the workloads' ReplicaSets and ControllerRevisions from this cluster (read-only)")
	f.StringVarP(&o.Output, "output", "o", "text", strings.Join(formats, ", ")+" (junit: one test case per workload and policy)")
	f.StringVarP(&o.Namespace, "namespace", "n", metav1.NamespaceDefault, "the namespace of workloads without metadata.namespace")
	f.BoolVar(&o.FailOnWarn, "fail-on-warn", false, "exit 1 when a Warn policy would warn, as when an Enforce policy refuses")
	f.StringVar(&o.User, "as", "", "the requester's user name, for exemptions")
	f.StringSliceVar(&o.Groups, "as-group", nil, "the requester's groups, for exemptions")
	_ = cmd.MarkFlagRequired("policies")
	_ = cmd.MarkFlagRequired("filename")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
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
	Object     string      `json:"object"`
	Operation  string      `json:"operation"`
	Action     string      `json:"action"`
	Violations []Violation `json:"violations"`
	// Policies are the policies that judged the change (rollout.Applies), by name.
	Policies []string `json:"policies"`
	decision decision.Violations
}

// Report is everything check found: a Result per change, and the documents of kinds it
// does not judge, skipped. JSON and YAML print it as it is.
type Report struct {
	Results []Result `json:"results"`
	// Skipped is how many documents were skipped, SkippedKinds how many of each kind.
	Skipped      int            `json:"skipped"`
	SkippedKinds map[string]int `json:"skippedKinds,omitempty"`
	skipped      []Document
}

// Violation is one policy rule's finding on a change, as the webhook reports it.
type Violation struct {
	Policy  string `json:"policy"`
	Rule    string `json:"rule"`
	Action  string `json:"action"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Run checks as the command does, writing to out.
func Run(out io.Writer, stdin io.Reader, o *Options, now time.Time) error {
	if !slices.Contains(formats, o.Output) {
		return &ExitError{Code: 2, Err: fmt.Errorf("--output %q: want one of %s", o.Output, strings.Join(formats, ", "))}
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
	var live client.Reader
	if o.Kubeconfig != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
		if err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("--kubeconfig: %w", err)}
		}
		if live, err = client.New(cfg, client.Options{Scheme: informer.NewScheme()}); err != nil {
			return &ExitError{Code: 2, Err: fmt.Errorf("--kubeconfig: %w", err)}
		}
	}
	results, err := Evaluate(policies, objs, revisions, live, authenticationv1.UserInfo{Username: o.User, Groups: o.Groups}, now)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	report := Report{Results: results, Skipped: len(skipped), skipped: skipped}
	if results == nil {
		report.Results = []Result{}
	}
	for _, doc := range skipped {
		if report.SkippedKinds == nil {
			report.SkippedKinds = map[string]int{}
		}
		report.SkippedKinds[kindOf(doc)]++
	}
	if err := write(out, o.Output, report, o.FailOnWarn); err != nil {
		return err
	}
	switch fails(results, o.FailOnWarn) {
	case decision.Deny:
		return &ExitError{Code: 1, Err: errors.New("an Enforce policy would refuse a change")}
	case decision.Warn:
		return &ExitError{Code: 1, Err: errors.New("a Warn policy would warn of a change (--fail-on-warn)")}
	}
	return nil
}

// fails is the most severe action among the results that fails the check: Deny, or Warn
// with failOnWarn; Allow when none does.
func fails(results []Result, failOnWarn bool) decision.Action {
	worst := decision.Allow
	for _, r := range results {
		a := r.decision.Action()
		if a == decision.Deny || (a == decision.Warn && failOnWarn) {
			worst = max(worst, a)
		}
	}
	return worst
}

// write prints the report in the format given.
func write(out io.Writer, format string, report Report, failOnWarn bool) error {
	switch format {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	case "yaml":
		b, err := yaml.Marshal(report)
		if err != nil {
			return err
		}
		_, err = out.Write(b)
		return err
	case "junit":
		if _, err := io.WriteString(out, xml.Header); err != nil {
			return err
		}
		enc := xml.NewEncoder(out)
		enc.Indent("", "  ")
		if err := enc.Encode(JUnit(report, failOnWarn)); err != nil {
			return err
		}
		_, err := io.WriteString(out, "\n")
		return err
	}
	for _, r := range report.Results {
		fmt.Fprintf(out, "%s %s: %s\n", r.Operation, r.Object, r.Action)
		for _, m := range r.decision.Messages(decision.Audit) {
			fmt.Fprintf(out, "  %s\n", m)
		}
	}
	if report.Skipped > 0 {
		var kinds []string
		for _, k := range slices.Sorted(maps.Keys(report.SkippedKinds)) {
			kinds = append(kinds, fmt.Sprintf("%s (%d)", k, report.SkippedKinds[k]))
		}
		fmt.Fprintf(out, "skipped %d documents of kinds holdfast does not judge: %s\n", report.Skipped, strings.Join(kinds, ", "))
	}
	return nil
}

// JUnitSuite is the report as a JUnit XML test suite, for CI systems that show tests.
type JUnitSuite struct {
	XMLName  xml.Name    `xml:"testsuite"`
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []JUnitCase `xml:"testcase"`
}

// JUnitCase is one workload change judged by one policy, or one document skipped.
type JUnitCase struct {
	// Classname is the change (e.g. "UPDATE Deployment ns/name") or the skipped
	// document's source; Name is the policy, or the skipped document's kind.
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Failure   *JUnitFailure `xml:"failure,omitempty"`
	Skipped   *JUnitSkipped `xml:"skipped,omitempty"`
	// SystemOut holds the violations that do not fail the case (warnings, audits).
	SystemOut string `xml:"system-out,omitempty"`
}

// JUnitFailure is a refusal (or a warning, with --fail-on-warn): its messages.
type JUnitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

// JUnitSkipped marks a document of a kind check does not judge.
type JUnitSkipped struct {
	Message string `xml:"message,attr"`
}

// JUnit is the report as a JUnit test suite: a test case per (change, policy) pair that
// was evaluated, failed when the policy refuses the change (or warns, with failOnWarn),
// and a skipped test case per document check does not judge.
func JUnit(report Report, failOnWarn bool) JUnitSuite {
	suite := JUnitSuite{Name: "holdfast check"}
	for _, r := range report.Results {
		class := r.Operation + " " + r.Object
		for _, p := range r.Policies {
			c := JUnitCase{Classname: class, Name: p}
			var mine decision.Violations
			for _, v := range r.decision {
				if v.Policy == p {
					mine = append(mine, v)
				}
			}
			messages := strings.Join(mine.Messages(decision.Audit), "\n")
			if a := mine.Action(); a == decision.Deny || (a == decision.Warn && failOnWarn) {
				c.Failure = &JUnitFailure{Message: a.String(), Type: a.String(), Text: messages}
				suite.Failures++
			} else {
				c.SystemOut = messages
			}
			suite.Cases = append(suite.Cases, c)
		}
	}
	for _, doc := range report.skipped {
		kind := kindOf(doc)
		suite.Cases = append(suite.Cases, JUnitCase{Classname: doc.Source, Name: kind,
			Skipped: &JUnitSkipped{Message: "holdfast does not judge " + kind}})
		suite.Skipped++
	}
	suite.Tests = len(suite.Cases)
	return suite
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

// Evaluate decides each workload change with the rollout webhook's decision. The history
// rules read the workload's revisions among revisions and, when live is not nil, from the
// cluster it reads.
func Evaluate(policies []v1alpha1.RolloutPolicy, docs, revisions []Document, live client.Reader, user authenticationv1.UserInfo, now time.Time) ([]Result, error) {
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
	matcher := policy.NewMatcher()
	var results []Result
	for _, key := range order {
		c := changes[key]
		// The webhook is sent both objects defaulted, the new one with the old one's status.
		c.old, c.new = defaults.Admitted(c.old, c.new)
		in := rollout.Input{Operation: admissionv1.Create, User: user, Policies: policies, Matcher: matcher, Now: now}
		var err error
		if in.New, err = workload.From(c.new); err != nil {
			return nil, err
		}
		labels := map[string]string{corev1.LabelMetadataName: c.new.GetNamespace()}
		for k, v := range nsLabels[c.new.GetNamespace()] {
			labels[k] = v
		}
		in.NamespaceLabels = labels
		if c.old != nil {
			in.Operation = admissionv1.Update
			if in.Old, err = workload.From(c.old); err != nil {
				return nil, err
			}
			in.TemplateChanged = !workload.SameTemplate(in.Old.Template, in.New.Template)
			known := revisions
			if live != nil {
				if known, err = liveRevisions(live, in.Old, c.old, revisions); err != nil {
					return nil, err
				}
			}
			if in.History, err = historyOf(in.Old, known); err != nil {
				return nil, err
			}
			switch {
			case live != nil:
				in.Journal = liveJournal(live, in.Old)
			case len(revisions) == 0:
				in.Journal = settled(in.Old, hasStatus(c.old), now)
			}
		}
		d, err := rollout.Decide(in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.New, err)
		}
		r := Result{Object: in.New.String(), Operation: string(in.Operation), Action: d.Action().String(), decision: d.Violations,
			Violations: []Violation{}, Policies: []string{}}
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

// liveRevisions adds the workload's ReplicaSets or ControllerRevisions, read from the
// cluster, to the revisions given; the workload's UID (which owns them) is the cluster's.
func liveRevisions(r client.Reader, w *workload.Workload, obj client.Object, given []Document) ([]Document, error) {
	ctx := context.Background()
	current := obj.DeepCopyObject().(client.Object)
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return nil, fmt.Errorf("reading %s from the cluster: %w", w, err)
	}
	w.UID = current.GetUID()
	out := slices.Clone(given)
	if w.Kind == v1alpha1.KindDeployment {
		var sets appsv1.ReplicaSetList
		if err := r.List(ctx, &sets, client.InNamespace(w.Namespace)); err != nil {
			return nil, fmt.Errorf("listing the ReplicaSets of %s: %w", w, err)
		}
		for i := range sets.Items {
			out = append(out, Document{Source: "the cluster", Object: &sets.Items[i]})
		}
		return out, nil
	}
	var revs appsv1.ControllerRevisionList
	if err := r.List(ctx, &revs, client.InNamespace(w.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the ControllerRevisions of %s: %w", w, err)
	}
	for i := range revs.Items {
		out = append(out, Document{Source: "the cluster", Object: &revs.Items[i]})
	}
	return out, nil
}

// liveJournal is the workload's revision journal in the cluster, nil when there is none or
// it cannot be read (the history then decides, as in the webhook).
func liveJournal(r client.Reader, w *workload.Workload) *journal.Journal {
	var cms corev1.ConfigMapList
	if err := r.List(context.Background(), &cms, client.MatchingLabels{journal.ComponentLabel: journal.Component}); err != nil {
		return nil
	}
	name := journal.Name(w.Kind, w.Namespace, w.Name)
	for i := range cms.Items {
		if cms.Items[i].Name == name {
			if j, err := journal.Decode(&cms.Items[i]); err == nil {
				return j
			}
		}
	}
	return nil
}

// settled is the journal check assumes without any history: the old object's template
// has long been current, so that only the rules that need no history decide (the webhook,
// which always has the cluster's, may refuse more). Its rollout is finished, unless the old
// object was given with a status (withStatus) that shows it under way: then it last
// progressed now, as the leader records a rollout it finds under way (journal.Observe),
// and settle refuses a new template as the webhook does.
func settled(w *workload.Workload, withStatus bool, now time.Time) *journal.Journal {
	sum, ok := w.Template.Sum()
	if !ok {
		return nil
	}
	long := time.Time{}.Add(time.Hour)
	r := journal.Revision{Template: sum, Since: long, Finished: &long, Progressed: long}
	if withStatus && w.Rollout.InProgress {
		r.Finished, r.Progressed = nil, now
	}
	return &journal.Journal{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID, Generation: w.Generation,
		Revisions: []journal.Revision{r}}
}

// hasStatus is an object given with a status, as kubectl get prints it; a manifest has
// none, which does not mean that no pod is ready.
func hasStatus(obj client.Object) bool {
	st := reflect.ValueOf(obj).Elem().FieldByName("Status")
	return st.IsValid() && !st.IsZero()
}

// historyOf is the workload's revisions among the objects given with --history.
func historyOf(w *workload.Workload, docs []Document) (history.History, error) {
	var sets []appsv1.ReplicaSet
	var revs []appsv1.ControllerRevision
	for _, doc := range docs {
		switch o := doc.Object.(type) {
		case *appsv1.ReplicaSet:
			sets = append(sets, *o)
		case *appsv1.ControllerRevision:
			revs = append(revs, *o)
		}
	}
	var h history.History
	var err error
	if w.Kind == v1alpha1.KindDeployment {
		h.Revisions = history.FromReplicaSets(w.UID, sets)
	} else {
		h.Revisions, err = history.FromControllerRevisions(w.UID, w.Name, revs, nil)
	}
	return h, err
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
