// Package check is `holdfast check`: the rollout guard's decision run offline on
// manifests, for CI, answering exactly as the webhook would.
package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/spf13/cobra"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/decision"
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
	Output     string
	User       string
	Groups     []string
}

// ExitError ends the command with its code: 1 for an enforced violation, 2 for input
// check cannot read.
type ExitError = app.ExitError

// NewCommand is `holdfast check`.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "check -p POLICIES -f OLD -f NEW",
		Short: "Evaluate workload changes against RolloutPolicies offline, as the rollout webhook would",
		Long: `check runs the rollout guard's decision on manifests, without a cluster: each workload
given once is a CREATE; a workload given twice (same kind, namespace and name) is an UPDATE
from the first to the second. Violations print exactly as the webhook's denial message.
Namespace objects among the files give their namespaces' labels; any other namespace has
only kubernetes.io/metadata.name. --history takes ReplicaSets and ControllerRevisions for
the rules that read a workload's revisions. Policies are read as the API server, with
holdfast's policy webhook, would store them (schema, defaults, CEL rules, selectors and
windows); a policy it would refuse is an error naming the file, document and field.
Exit code 1 when an Enforce policy would refuse a change, 2 when the input cannot be
read or a policy would be refused, 0 otherwise.`,
		Example: `  # A change: the old object, then the new one.
  holdfast check -p config/samples/ -f kube-apiserver.old.yaml -f kube-apiserver.yaml

  # New objects from stdin, answers for machines.
  kustomize build overlays/prod | holdfast check -p policies/ -f - -o json

  # minInterval and revertWindow with the workloads' revisions read from a cluster.
  holdfast check -p policies/ -f old.yaml -f new.yaml --kubeconfig ~/.kube/config`,
		Args: cobra.NoArgs,
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
	f.StringVarP(&o.Output, "output", "o", "text", "text or json")
	f.StringVar(&o.User, "as", "", "the requester's user name, for exemptions")
	f.StringSliceVar(&o.Groups, "as-group", nil, "the requester's groups, for exemptions")
	_ = cmd.MarkFlagRequired("policies")
	_ = cmd.MarkFlagRequired("filename")
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
	decision   decision.Violations
}

type Violation struct {
	Policy  string `json:"policy"`
	Rule    string `json:"rule"`
	Action  string `json:"action"`
	Field   string `json:"field,omitempty"`
	Message string `json:"message"`
}

// Run checks as the command does, writing to out.
func Run(out io.Writer, stdin io.Reader, o *Options, now time.Time) error {
	if o.Output != "text" && o.Output != "json" {
		return &ExitError{Code: 2, Err: fmt.Errorf("--output %q: want text or json", o.Output)}
	}
	policies, err := ReadPolicies(o.Policies, stdin)
	if err != nil {
		return &ExitError{Code: 2, Err: err}
	}
	objs, err := ReadObjects(o.Files, stdin)
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
	if o.Output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	} else {
		for _, r := range results {
			fmt.Fprintf(out, "%s %s: %s\n", r.Operation, r.Object, r.Action)
			for _, m := range r.decision.Messages(decision.Audit) {
				fmt.Fprintf(out, "  %s\n", m)
			}
		}
	}
	for _, r := range results {
		if r.decision.Action() == decision.Deny {
			return &ExitError{Code: 1, Err: errors.New("an Enforce policy would refuse a change")}
		}
	}
	return nil
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
				in.Journal = settled(in.Old)
			}
		}
		d, err := rollout.Decide(in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.New, err)
		}
		r := Result{Object: in.New.String(), Operation: string(in.Operation), Action: d.Action().String(), decision: d.Violations,
			Violations: []Violation{}}
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
// has long been current and its rollout finished, so that only the rules that need no
// history decide (the webhook, which always has the cluster's, may refuse more).
func settled(w *workload.Workload) *journal.Journal {
	sum, ok := w.Template.Sum()
	if !ok {
		return nil
	}
	long := time.Time{}.Add(time.Hour)
	return &journal.Journal{Kind: w.Kind, Namespace: w.Namespace, Name: w.Name, UID: w.UID, Generation: w.Generation,
		Revisions: []journal.Revision{{Template: sum, Since: long, Finished: &long, Progressed: long}}}
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
// ("-" is stdin), in order.
func ReadObjects(paths []string, stdin io.Reader) ([]Document, error) {
	decoder := serializer.NewCodecFactory(informer.NewScheme()).UniversalDeserializer()
	var out []Document
	err := manifests.Each(paths, stdin, func(source string, raw []byte) error {
		obj, _, err := decoder.Decode(raw, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", source, err)
		}
		out = append(out, Document{Source: source, Object: obj})
		return nil
	})
	return out, err
}
