// Package interception derives the webhook entries through which the API server calls holdfast
// from the policies in force: a workload, a scale or an eviction no policy can select is
// never sent. Pure: the leader's controller (internal/controller/webhooks.go) writes what
// Entries returns.
package interception

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/policy"
	"github.com/holdfast-dev/holdfast/internal/workload"
)

// Paths of holdfast's webhooks, as webhooks/rollout, webhooks/eviction and webhooks/floor
// serve them.
const (
	RolloutPath  = "/validate-rollout"
	EvictionPath = "/validate-eviction"
	// DeletePath serves pod DELETEs with the eviction guard's handler.
	DeletePath = "/validate-pod-delete"
	FloorPath  = "/validate-pdb"
	// NamespacePath serves namespace relabels that bring workloads into a RolloutPolicy's
	// selection (webhooks/rollout HandleNamespace).
	NamespacePath = "/validate-namespace"
	// PodRelabelPath serves pod relabels that release a pod from an OnDelete StatefulSet or
	// DaemonSet (webhooks/rollout HandlePodRelabel).
	PodRelabelPath = "/validate-pod-relabel"
)

// Entry types: the last labels of an entry's name, <policy>-<hash>.<type>.
const (
	TypeRollout   = "rollout.holdfast.dev"
	TypeScale     = "scale.holdfast.dev"
	TypeEviction  = "eviction.holdfast.dev"
	TypeDelete    = "delete.holdfast.dev"
	TypeFloor     = "pdb.holdfast.dev"
	TypeNamespace = "namespace.holdfast.dev"
	TypeRelabel   = "relabel.holdfast.dev"
)

// Name is the scoped configuration's name beside the installed one, anchor.
func Name(anchor string) string {
	return anchor + "-guards"
}

// Defaults are an entry's failure policy and timeout when its policies set none.
type Defaults struct {
	FailurePolicy  admissionregistrationv1.FailurePolicyType
	TimeoutSeconds int32
}

// Settings are what every entry shares.
type Settings struct {
	// Namespace is holdfast's own: no entry ever reaches into it.
	Namespace string
	// Client is how the API server reaches holdfast (the anchor configuration's), whatever
	// path it names; each entry sets its own.
	Client   admissionregistrationv1.WebhookClientConfig
	Rollout  Defaults
	Eviction Defaults
	// NeverHeldDeleters are users whose pod DELETEs are never sent to holdfast, beside
	// kube's own (KubeDeleters), e.g. Karpenter's service account, whose deletes come at
	// a NodeClaim's deadline, after its evictions were refused for as long as it waits.
	NeverHeldDeleters []string
}

// KubeDeleters are the users whose pod DELETEs kube makes itself and holdfast never holds
// (besides the kubelets, system:node:*): the controller-manager, as itself or as the
// service accounts its controllers use (--use-service-account-credentials; the names of
// plugin/pkg/auth/authorizer/rbac/bootstrappolicy/controller_policy.go whose roles may
// delete pods, and the garbage collector and namespace controller, which delete pods
// through their owners and namespaces), and the scheduler (preemption). The taint
// eviction controller runs as node-controller.
var KubeDeleters = []string{
	"system:kube-controller-manager",
	"system:kube-scheduler",
	"system:serviceaccount:kube-system:cronjob-controller",
	"system:serviceaccount:kube-system:daemon-set-controller",
	"system:serviceaccount:kube-system:device-taint-eviction-controller",
	"system:serviceaccount:kube-system:generic-garbage-collector",
	"system:serviceaccount:kube-system:job-controller",
	"system:serviceaccount:kube-system:namespace-controller",
	"system:serviceaccount:kube-system:node-controller",
	"system:serviceaccount:kube-system:persistent-volume-binder",
	"system:serviceaccount:kube-system:pod-garbage-collector",
	"system:serviceaccount:kube-system:replicaset-controller",
	"system:serviceaccount:kube-system:replication-controller",
	"system:serviceaccount:kube-system:resource-claim-controller",
	"system:serviceaccount:kube-system:statefulset-controller",
}

// DefaultNeverHeldDeleters are Settings.NeverHeldDeleters' default: Karpenter's service
// account where its chart installs it.
var DefaultNeverHeldDeleters = []string{
	"system:serviceaccount:karpenter:karpenter",
	"system:serviceaccount:kube-system:karpenter",
}

// matchServingPod keeps deletes of pods that serve nothing away from holdfast: pods
// already terminating, terminal (Succeeded, Failed), Pending, or not Ready. A DELETE's
// oldObject is the pod as stored; its node is not in it, so a pod on a NotReady node that
// the node lifecycle controller has not yet marked not Ready is decided by the handler.
var matchServingPod = admissionregistrationv1.MatchCondition{
	Name: "pod-serving",
	Expression: "!has(oldObject.metadata.deletionTimestamp) && oldObject.status.?phase.orValue('') == 'Running' && " +
		"oldObject.status.?conditions.orValue([]).exists(c, c.type == 'Ready' && c.status == 'True')",
}

// matchDeleter keeps kube's own deleters, holdfast's (any service account of its
// namespace) and the configured ones away from holdfast.
func (b *builder) matchDeleter() admissionregistrationv1.MatchCondition {
	users := append(slices.Clone(KubeDeleters), b.s.NeverHeldDeleters...)
	slices.Sort(users)
	users = slices.Compact(users)
	quoted := make([]string, len(users))
	for i, u := range users {
		quoted[i] = strconv.Quote(u)
	}
	return admissionregistrationv1.MatchCondition{
		Name: "not-kube-or-holdfast",
		Expression: fmt.Sprintf("!request.userInfo.username.startsWith('system:node:') && !request.userInfo.username.startsWith(%s) && !(request.userInfo.username in [%s])",
			strconv.Quote("system:serviceaccount:"+b.s.Namespace+":"), strings.Join(quoted, ", ")),
	}
}

// Outcome is what the entries mean for one policy, for its Intercepted condition.
type Outcome struct {
	// Entries names the entries that send the policy's requests, sorted.
	Entries []string
	// Invalid says which of the policy's selectors holdfast cannot evaluate: the policy
	// then selects nothing (stored while the policy webhook was down) and has no entry.
	Invalid []string
}

// Key names a policy in Outcomes: its kind and name.
type Key struct {
	Kind, Name string
}

// matchSpecOrLabels keeps status updates, and metadata updates that keep the labels, away
// from the rollout webhook: they change no template, replicas, strategy or selection. A
// labels-only update is sent, so that a relabel out of a policy is seen. Through the
// status subresource only a relabel is sent: kube's status strategies put the old spec
// back before admission (PrepareForUpdate, pkg/registry/apps/*/strategy.go), so a
// controller's status write reaches holdfast never.
var matchSpecOrLabels = admissionregistrationv1.MatchCondition{
	Name:       "spec-or-label-changes",
	Expression: "request.operation == 'CREATE' || object.spec != oldObject.spec || object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({})",
}

// matchSpec keeps updates of a PDB that change neither its spec nor what makes it
// holdfast's floor (its labels and owners) away from the floor's webhook (its status has
// its own subresource, which the entry's rule does not name).
var matchSpec = admissionregistrationv1.MatchCondition{
	Name: "spec-or-ownership-changes",
	Expression: "request.operation == 'CREATE' || object.spec != oldObject.spec || " +
		"object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || " +
		"object.metadata.?ownerReferences.orValue([]) != oldObject.metadata.?ownerReferences.orValue([])",
}

// Entries is the webhook entries the policies need, sorted by name, and what they mean for
// each policy. Policies that select alike share an entry; a suspended policy has none.
func Entries(rollouts []v1alpha1.RolloutPolicy, evictions []v1alpha1.DisruptionPolicy, s Settings) ([]admissionregistrationv1.ValidatingWebhook, map[Key]*Outcome) {
	b := builder{s: s, names: map[string]string{}, outcomes: map[Key]*Outcome{}}
	// A shared entry is named after the first policy by name, whatever order the cache
	// lists them in: otherwise every reconcile could rename it.
	rollouts = slices.SortedFunc(slices.Values(rollouts), func(a, b v1alpha1.RolloutPolicy) int { return strings.Compare(a.Name, b.Name) })
	evictions = slices.SortedFunc(slices.Values(evictions), func(a, b v1alpha1.DisruptionPolicy) int { return strings.Compare(a.Name, b.Name) })
	for i := range rollouts {
		p := &rollouts[i]
		if p.Spec.Suspend {
			continue
		}
		key := Key{Kind: "RolloutPolicy", Name: p.Name}
		if b.invalid(key, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector) {
			continue
		}
		fp := failurePolicy(p.Spec.FailurePolicy, s.Rollout)
		nsSel, objSel := b.selectors(p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector)
		var resources, scales, statuses []string
		for _, k := range workload.Targeted(p.Spec.Targets) {
			r := workload.Resource(k)
			resources = append(resources, r)
			if workload.Scalable(k) {
				scales = append(scales, r+"/scale")
			}
			if workload.RelabelsThroughStatus(k) {
				statuses = append(statuses, r+"/status")
			}
		}
		slices.Sort(resources)
		slices.Sort(scales)
		slices.Sort(statuses)
		rules := []admissionregistrationv1.RuleWithOperations{appsRule(resources, admissionregistrationv1.Create, admissionregistrationv1.Update)}
		if len(statuses) > 0 {
			// A status update may relabel the workload into or out of the selection;
			// matchSpecOrLabels passes only those, never a controller's status write.
			rules = append(rules, appsRule(statuses, admissionregistrationv1.Update))
		}
		b.add(key, TypeRollout, admissionregistrationv1.ValidatingWebhook{
			ClientConfig:      b.client(RolloutPath),
			Rules:             rules,
			FailurePolicy:     &fp,
			NamespaceSelector: nsSel,
			ObjectSelector:    objSel,
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:    ptr.To(s.Rollout.TimeoutSeconds),
			MatchConditions:   []admissionregistrationv1.MatchCondition{matchSpecOrLabels},
		})
		if sel := p.Spec.Targets.NamespaceSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
			// Namespace relabels that change the policy's selection of the namespace: its
			// objectSelector matches the old labels or the new ones, and the condition
			// passes only a change of selection, so that Pod Security or mesh label edits
			// never reach holdfast. It fails open whatever the policy says: a namespace
			// relabel refused while holdfast is down would block whoever onboards namespaces.
			objSel, _ := b.selectors(sel, nil)
			b.add(key, TypeNamespace, admissionregistrationv1.ValidatingWebhook{
				ClientConfig: b.client(NamespacePath),
				Rules: []admissionregistrationv1.RuleWithOperations{{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: []string{"namespaces"}, Scope: ptr.To(admissionregistrationv1.ClusterScope)},
				}},
				FailurePolicy:  ptr.To(admissionregistrationv1.Ignore),
				ObjectSelector: objSel,
				SideEffects:    ptr.To(admissionregistrationv1.SideEffectClassNone),
				TimeoutSeconds: ptr.To(s.Rollout.TimeoutSeconds),
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "selection-changes",
					Expression: SelectsCEL(sel, "object") + " != " + SelectsCEL(sel, "oldObject")}},
			})
		}
		// A Scale carries no labels: its entry selects by namespace alone, and only for
		// the rules that read the replicas.
		if len(scales) > 0 && (p.Spec.Rules.Strategy != nil || len(p.Spec.Rules.ArgsMatchReplicas) > 0) {
			b.add(key, TypeScale, admissionregistrationv1.ValidatingWebhook{
				ClientConfig:      b.client(RolloutPath),
				Rules:             []admissionregistrationv1.RuleWithOperations{appsRule(scales, admissionregistrationv1.Update)},
				FailurePolicy:     &fp,
				NamespaceSelector: nsSel,
				SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
				TimeoutSeconds:    ptr.To(s.Rollout.TimeoutSeconds),
			})
		}
	}
	for i := range rollouts {
		p := &rollouts[i]
		key := Key{Kind: "RolloutPolicy", Name: p.Name}
		if p.Spec.Suspend || !judgesReplacements(p) || len(b.outcome(key).Invalid) > 0 {
			continue
		}
		// An OnDelete StatefulSet or DaemonSet rolls a staged template out one evicted or
		// deleted pod at a time: each such request is the rollout's start or next step,
		// judged by the rollout guard (webhooks/rollout Handler.Replacement, through the
		// eviction guard's handler). Evictions carry no labels: the entry selects by
		// namespace, as a DisruptionPolicy's does (and shares its entry when they select
		// alike). DELETEs carry the pod: only those of a pod a StatefulSet or DaemonSet
		// controls and not yet terminating, whether it is Ready or not (its replacement is
		// made from the same template), by anyone but kube and holdfast. Both fail open
		// whatever the policy says, as its namespace entry does: a drain or a delete
		// refused while holdfast is down would be a rollout rule holding what no
		// DisruptionPolicy floors.
		nsSel, _ := b.selectors(p.Spec.Targets.NamespaceSelector, nil)
		b.add(key, TypeEviction, b.evictionEntry(nsSel, admissionregistrationv1.Ignore))
		b.add(key, TypeDelete, admissionregistrationv1.ValidatingWebhook{
			ClientConfig:      b.client(DeletePath),
			Rules:             []admissionregistrationv1.RuleWithOperations{podDeletes},
			FailurePolicy:     ptr.To(admissionregistrationv1.Ignore),
			NamespaceSelector: nsSel,
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:    ptr.To(s.Eviction.TimeoutSeconds),
			MatchConditions:   []admissionregistrationv1.MatchCondition{matchReplacedPod, b.matchDeleter()},
		})
		// A relabel that takes a pod out of its workload's selector makes kube release it
		// and replace it from the template, with no eviction or DELETE of a pod the
		// workload controls: pod UPDATEs (and pods/status ones, which may change labels too)
		// that change the labels of a pod a StatefulSet or DaemonSet controls.
		b.add(key, TypeRelabel, admissionregistrationv1.ValidatingWebhook{
			ClientConfig: b.client(PodRelabelPath),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods", "pods/status"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			FailurePolicy:     ptr.To(admissionregistrationv1.Ignore),
			NamespaceSelector: nsSel,
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:    ptr.To(s.Rollout.TimeoutSeconds),
			MatchConditions:   []admissionregistrationv1.MatchCondition{matchRelabelledReplacedPod, b.matchDeleter()},
		})
	}
	for i := range evictions {
		p := &evictions[i]
		if p.Spec.Suspend {
			continue
		}
		key := Key{Kind: "DisruptionPolicy", Name: p.Name}
		if b.invalid(key, p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector) {
			continue
		}
		fp := failurePolicy(p.Spec.FailurePolicy, s.Eviction)
		// An Eviction carries no labels either: the pod's are read by the webhook.
		nsSel, _ := b.selectors(p.Spec.Targets.NamespaceSelector, nil)
		b.add(key, TypeEviction, b.evictionEntry(nsSel, fp))
	}
	for i := range evictions {
		p := &evictions[i]
		key := Key{Kind: "DisruptionPolicy", Name: p.Name}
		if p.Spec.Suspend || !p.Spec.GuardDeletes || len(b.outcome(key).Invalid) > 0 {
			continue
		}
		// Pod DELETEs carry the pod: the entry selects by its labels too. It fails open
		// unless the policy says Fail (then every guarded delete is refused while holdfast
		// does not answer), whatever the evictions' default: a delete has no floor to
		// keep, and Ignore keeps holdfast off the path of every kubectl delete pod.
		fp := failurePolicy(p.Spec.FailurePolicy, Defaults{FailurePolicy: admissionregistrationv1.Ignore})
		nsSel, objSel := b.selectors(p.Spec.Targets.NamespaceSelector, p.Spec.Targets.Selector)
		b.add(key, TypeDelete, admissionregistrationv1.ValidatingWebhook{
			ClientConfig:      b.client(DeletePath),
			Rules:             []admissionregistrationv1.RuleWithOperations{podDeletes},
			FailurePolicy:     &fp,
			NamespaceSelector: nsSel,
			ObjectSelector:    objSel,
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:    ptr.To(s.Eviction.TimeoutSeconds),
			MatchConditions:   []admissionregistrationv1.MatchCondition{matchServingPod, b.matchDeleter()},
		})
	}
	for i := range evictions {
		p := &evictions[i]
		if p.Spec.Suspend || p.Spec.PDB == nil || !p.Spec.PDB.Generate || len(b.outcome(Key{Kind: "DisruptionPolicy", Name: p.Name}).Invalid) > 0 {
			continue
		}
		// The floor's entry: PDBs created or changed in the namespaces the policy selects
		// (webhooks/floor). It fails open whatever the policy says: a PDB refused while
		// holdfast is down would keep a tenant from protecting its own workloads, and one
		// admitted then is reported (FloorWeakened) once holdfast is back.
		nsSel, _ := b.selectors(p.Spec.Targets.NamespaceSelector, nil)
		b.add(Key{Kind: "DisruptionPolicy", Name: p.Name}, TypeFloor, admissionregistrationv1.ValidatingWebhook{
			ClientConfig: b.client(FloorPath),
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
				Rule: admissionregistrationv1.Rule{APIGroups: []string{"policy"}, APIVersions: []string{"v1"},
					Resources: []string{"poddisruptionbudgets"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
			}},
			FailurePolicy:     ptr.To(admissionregistrationv1.Ignore),
			NamespaceSelector: nsSel,
			SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:    ptr.To(s.Eviction.TimeoutSeconds),
			MatchConditions:   []admissionregistrationv1.MatchCondition{matchSpec},
		})
	}
	out := b.entries
	slices.SortFunc(out, func(a, b admissionregistrationv1.ValidatingWebhook) int { return strings.Compare(a.Name, b.Name) })
	for _, o := range b.outcomes {
		slices.Sort(o.Entries)
		o.Entries = slices.Compact(o.Entries)
	}
	return out, b.outcomes
}

// evictionEntry is the entry of pods/eviction CREATEs in the namespaces nsSel selects.
func (b *builder) evictionEntry(nsSel *metav1.LabelSelector, fp admissionregistrationv1.FailurePolicyType) admissionregistrationv1.ValidatingWebhook {
	return admissionregistrationv1.ValidatingWebhook{
		ClientConfig: b.client(EvictionPath),
		Rules: []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
			Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
				Resources: []string{"pods/eviction"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
		}},
		FailurePolicy:     &fp,
		NamespaceSelector: nsSel,
		SideEffects:       ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
		TimeoutSeconds:    ptr.To(b.s.Eviction.TimeoutSeconds),
	}
}

// podDeletes is the rule of pod DELETEs.
var podDeletes = admissionregistrationv1.RuleWithOperations{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Delete},
	Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
		Resources: []string{"pods"}, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
}

// judgesReplacements is whether the policy may refuse the replacement of a pod of an
// OnDelete workload it selects: it targets StatefulSets or DaemonSets and has a rule that
// Handler.Replacement judges a start by (settle's third template, minInterval,
// revertWindow, windows).
func judgesReplacements(p *v1alpha1.RolloutPolicy) bool {
	kinds := workload.Targeted(p.Spec.Targets)
	r := p.Spec.Rules
	return (slices.Contains(kinds, v1alpha1.KindStatefulSet) || slices.Contains(kinds, v1alpha1.KindDaemonSet)) &&
		(r.Settle != nil || r.MinInterval != nil || r.RevertWindow != nil || len(p.Spec.Windows) > 0)
}

// matchReplacedPod keeps away the DELETEs that replace nothing from a template: of a pod
// already terminating, or of one no StatefulSet or DaemonSet controls (by the kind alone:
// kube's controllers resolve a controller reference by kind and UID, resolveControllerRef),
// unless no controller owns it and it is named as a StatefulSet's ordinal (<name>-<n>: one
// a StatefulSet released, whose ordinal kube creates once it is gone).
var matchReplacedPod = admissionregistrationv1.MatchCondition{
	Name: "replaced-from-a-template",
	Expression: "!has(oldObject.metadata.deletionTimestamp) && (oldObject.metadata.?ownerReferences.orValue([]).exists(r, " +
		"r.?controller.orValue(false) && (r.kind == 'StatefulSet' || r.kind == 'DaemonSet')) || " +
		"(!oldObject.metadata.?ownerReferences.orValue([]).exists(r, r.?controller.orValue(false)) && oldObject.metadata.name.matches('-[0-9]+$')))",
}

// matchRelabelledReplacedPod passes only an UPDATE that changes the labels or the owner
// references of a pod a StatefulSet or DaemonSet controls and that is not terminating.
var matchRelabelledReplacedPod = admissionregistrationv1.MatchCondition{
	Name: "relabels-a-replaced-pod",
	Expression: "(object.metadata.?labels.orValue({}) != oldObject.metadata.?labels.orValue({}) || " +
		"object.metadata.?ownerReferences.orValue([]) != oldObject.metadata.?ownerReferences.orValue([])) && " +
		"!has(oldObject.metadata.deletionTimestamp) && oldObject.metadata.?ownerReferences.orValue([]).exists(r, " +
		"r.?controller.orValue(false) && (r.kind == 'StatefulSet' || r.kind == 'DaemonSet'))",
}

type builder struct {
	s       Settings
	entries []admissionregistrationv1.ValidatingWebhook
	// names are the entries' names by what they select and their type.
	names    map[string]string
	outcomes map[Key]*Outcome
}

func (b *builder) outcome(key Key) *Outcome {
	o := b.outcomes[key]
	if o == nil {
		o = &Outcome{}
		b.outcomes[key] = o
	}
	return o
}

// invalid records the selectors of a policy that holdfast cannot evaluate: such a policy
// selects nothing (policy.Matcher), so no request of it is sent to holdfast.
func (b *builder) invalid(key Key, nsSel, objSel *metav1.LabelSelector) bool {
	var bad []string
	for _, f := range []struct {
		path string
		sel  *metav1.LabelSelector
	}{{"spec.targets.namespaceSelector", nsSel}, {"spec.targets.selector", objSel}} {
		if _, err := policy.Compile(f.sel); err != nil {
			bad = append(bad, f.path)
		}
	}
	if len(bad) > 0 {
		b.outcome(key).Invalid = bad
	}
	return len(bad) > 0
}

// selectors are a policy's selectors as webhook selectors (Entries has left out policies
// whose selectors holdfast cannot evaluate): the namespace one never reaches holdfast's
// own namespace.
func (b *builder) selectors(nsSel, objSel *metav1.LabelSelector) (*metav1.LabelSelector, *metav1.LabelSelector) {
	own := metav1.LabelSelectorRequirement{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: []string{b.s.Namespace}}
	ns := &metav1.LabelSelector{}
	if nsSel != nil {
		ns = nsSel.DeepCopy()
	}
	ns.MatchExpressions = append(ns.MatchExpressions, own)
	var obj *metav1.LabelSelector
	if objSel != nil {
		obj = objSel.DeepCopy()
	}
	return ns, obj
}

// add records that key is intercepted through w, named after what it selects so that
// policies selecting alike share it, and a changed selection is a new entry (which is
// what lets the controller widen before it narrows).
func (b *builder) add(key Key, typ string, w admissionregistrationv1.ValidatingWebhook) {
	w.AdmissionReviewVersions = []string{"v1"}
	w.MatchPolicy = ptr.To(admissionregistrationv1.Equivalent)
	// What the entry selects and how it fails, not how it reaches holdfast: a rotated CA
	// bundle keeps every name.
	selects := w
	selects.ClientConfig = admissionregistrationv1.WebhookClientConfig{}
	raw, _ := json.Marshal(selects)
	sum := sha256.Sum256(raw)
	hash := hex.EncodeToString(sum[:])[:10]
	id := hash + "." + typ
	name, ok := b.names[id]
	if !ok {
		name = prefix(key.Name) + "-" + id
		w.Name = name
		b.names[id] = name
		b.entries = append(b.entries, w)
	}
	b.outcome(key).Entries = append(b.outcome(key).Entries, name)
}

// prefix is the readable start of an entry's name: the policy's name, shortened so that
// the entry's stays a valid DNS subdomain.
func prefix(name string) string {
	if len(name) > 40 {
		name = name[:40]
	}
	return strings.TrimRight(name, "-.")
}

func (b *builder) client(path string) admissionregistrationv1.WebhookClientConfig {
	c := *b.s.Client.DeepCopy()
	switch {
	case c.Service != nil:
		c.Service.Path = ptr.To(path)
	case c.URL != nil:
		c.URL = ptr.To(withPath(*c.URL, path))
	}
	return c
}

// withPath replaces the path of the anchor's URL, e.g. https://127.0.0.1:9443/validate-policy.
func withPath(url, path string) string {
	scheme, rest, ok := strings.Cut(url, "://")
	if !ok {
		return url
	}
	host, _, _ := strings.Cut(rest, "/")
	return scheme + "://" + host + path
}

func appsRule(resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{
		Operations: ops,
		Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"},
			Resources: resources, Scope: ptr.To(admissionregistrationv1.NamespacedScope)},
	}
}

func failurePolicy(p *v1alpha1.FailurePolicy, d Defaults) admissionregistrationv1.FailurePolicyType {
	if p != nil {
		return admissionregistrationv1.FailurePolicyType(*p)
	}
	return d.FailurePolicy
}

// String describes an outcome for a condition message.
func (o *Outcome) String() string {
	if len(o.Invalid) > 0 {
		return fmt.Sprintf("%s cannot be evaluated: the policy selects nothing, and the API server sends holdfast nothing for it, until it is fixed",
			strings.Join(o.Invalid, " and "))
	}
	return fmt.Sprintf("the API server sends the requests this policy guards through %s", strings.Join(o.Entries, ", "))
}

// SelectsCEL is a CEL expression over the labels of the object named by root ("object",
// "oldObject") that is true when sel selects them, as a label selector selects: every
// matchLabels pair and every requirement (NotIn and DoesNotExist match an absent key). sel
// must be valid (Entries leaves out policies whose selectors are not).
func SelectsCEL(sel *metav1.LabelSelector, root string) string {
	labels := root + ".metadata.?labels.orValue({})"
	var terms []string
	for _, k := range slices.Sorted(maps.Keys(sel.MatchLabels)) {
		terms = append(terms, fmt.Sprintf("(%s in %s && %s[%s] == %s)", strconv.Quote(k), labels, labels, strconv.Quote(k), strconv.Quote(sel.MatchLabels[k])))
	}
	for _, r := range sel.MatchExpressions {
		k := strconv.Quote(r.Key)
		values := make([]string, len(r.Values))
		for i, v := range r.Values {
			values[i] = strconv.Quote(v)
		}
		list := "[" + strings.Join(values, ", ") + "]"
		switch r.Operator {
		case metav1.LabelSelectorOpIn:
			terms = append(terms, fmt.Sprintf("(%s in %s && %s[%s] in %s)", k, labels, labels, k, list))
		case metav1.LabelSelectorOpNotIn:
			terms = append(terms, fmt.Sprintf("(!(%s in %s) || !(%s[%s] in %s))", k, labels, labels, k, list))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, fmt.Sprintf("(%s in %s)", k, labels))
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, fmt.Sprintf("!(%s in %s)", k, labels))
		}
	}
	if len(terms) == 0 {
		return "true"
	}
	return "(" + strings.Join(terms, " && ") + ")"
}
