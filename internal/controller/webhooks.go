package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	"github.com/holdfast-dev/holdfast/internal/interception"
)

// WidenedAt is the annotation on holdfast's scoped webhook configuration that says when it
// was last widened to hold both the entries in force and those replacing them; they are
// narrowed to the new ones NarrowAfter later.
const WidenedAt = "holdfast.dev/widened-at"

// WebhookConfiguration keeps holdfast's scoped ValidatingWebhookConfiguration (Name) in
// step with the policies: the API server then calls holdfast only for what a policy can
// select. The anchor configuration, installed by the chart or kustomize, holds the policy
// validation webhook and says how the API server reaches holdfast (its CA bundle
// included, whoever injects it); it owns the scoped one, so that uninstalling holdfast
// removes both.
type WebhookConfiguration struct {
	Client client.Client
	// Name is the scoped configuration's; Anchor the installed one's.
	Name, Anchor string
	// Namespace is holdfast's own, never intercepted.
	Namespace         string
	Rollout, Eviction interception.Defaults
	// NeverHeldDeleters are users whose pod DELETEs no entry sends (Settings).
	NeverHeldDeleters []string
	// NarrowAfter is how long entries that policies no longer need stay beside their
	// replacements, so that no API server is left without either; 0 means 2 s.
	NarrowAfter time.Duration
	Metrics     *WebhookMetrics
	Clock       clock.PassiveClock
}

// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,verbs=create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations,resourceNames=holdfast-guards,verbs=get;update
// +kubebuilder:rbac:groups=holdfast.dev,resources=rolloutpolicies;disruptionpolicies,verbs=get;list;watch

// SetupWithManager reconciles the one configuration on every policy change and on any
// change to the anchor or the scoped configuration (a hand edit is reverted).
func (r *WebhookConfiguration) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: r.Name}}}
	})
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == r.Name || o.GetName() == r.Anchor })
	return ctrl.NewControllerManagedBy(mgr).
		Named("webhook-configuration").
		Watches(&admissionregistrationv1.ValidatingWebhookConfiguration{}, one, builder.WithPredicates(ours)).
		Watches(&v1alpha1.RolloutPolicy{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.DisruptionPolicy{}, one, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile writes the entries the policies need, widening first when some in force must
// go, and then sets each policy's Intercepted condition.
func (r *WebhookConfiguration) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	rollouts := &v1alpha1.RolloutPolicyList{}
	evictions := &v1alpha1.DisruptionPolicyList{}
	if err := r.Client.List(ctx, rollouts); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.Client.List(ctx, evictions); err != nil {
		return reconcile.Result{}, err
	}
	outcomes, res, syncErr := r.sync(ctx, rollouts.Items, evictions.Items)
	if apierrors.IsConflict(syncErr) {
		return reconcile.Result{}, syncErr // read again, and retry
	}
	r.Metrics.observe(syncErr)
	if err := r.setConditions(ctx, rollouts.Items, evictions.Items, outcomes, syncErr); err != nil {
		return reconcile.Result{}, err
	}
	if syncErr != nil {
		ctrl.LoggerFrom(ctx).Error(syncErr, "Could not update the scoped webhook configuration; the previous one stays in force", "name", r.Name)
		return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
	}
	return res, nil
}

// sync writes the entries the policies need and returns what they mean for each policy.
func (r *WebhookConfiguration) sync(ctx context.Context, rollouts []v1alpha1.RolloutPolicy, evictions []v1alpha1.DisruptionPolicy) (map[interception.Key]*interception.Outcome, reconcile.Result, error) {
	anchor := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: r.Anchor}, anchor); err != nil {
		return nil, reconcile.Result{}, fmt.Errorf("reading the installed webhook configuration %s, which says how the API server reaches holdfast: %w", r.Anchor, err)
	}
	if len(anchor.Webhooks) == 0 {
		return nil, reconcile.Result{}, fmt.Errorf("the installed webhook configuration %s has no webhook to say how the API server reaches holdfast", r.Anchor)
	}
	want, outcomes := interception.Entries(rollouts, evictions, interception.Settings{
		Namespace: r.Namespace, Client: anchor.Webhooks[0].ClientConfig, Rollout: r.Rollout, Eviction: r.Eviction,
		NeverHeldDeleters: r.NeverHeldDeleters})
	owner := metav1.OwnerReference{APIVersion: admissionregistrationv1.SchemeGroupVersion.String(), Kind: "ValidatingWebhookConfiguration",
		Name: anchor.Name, UID: anchor.UID}

	cur := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: r.Name}, cur)
	if apierrors.IsNotFound(err) {
		cur = &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: r.Name,
			Labels:          map[string]string{"app.kubernetes.io/managed-by": "holdfast", "app.kubernetes.io/component": "scoped-webhooks"},
			OwnerReferences: []metav1.OwnerReference{owner}}, Webhooks: want}
		return outcomes, reconcile.Result{}, r.Client.Create(ctx, cur)
	}
	if err != nil {
		return outcomes, reconcile.Result{}, err
	}

	next := cur.DeepCopy()
	next.OwnerReferences = []metav1.OwnerReference{owner}
	var requeue time.Duration
	widened, gone := union(cur.Webhooks, want)
	switch {
	case !gone:
		next.Webhooks = want
		delete(next.Annotations, WidenedAt)
	case widened != nil:
		// Some entries in force are to go and others to come: hold both for a while.
		next.Webhooks = widened
		metav1.SetMetaDataAnnotation(&next.ObjectMeta, WidenedAt, r.Clock.Now().UTC().Format(time.RFC3339Nano))
		requeue = r.narrowAfter()
	default:
		// Every entry wanted is in force: drop the others once the widening has stood.
		if at, err := time.Parse(time.RFC3339Nano, cur.Annotations[WidenedAt]); err == nil {
			// A widening stamped in the future (another clock, a hand edit) waits no longer.
			if wait := min(r.narrowAfter()-r.Clock.Since(at), r.narrowAfter()); wait > 0 {
				return outcomes, reconcile.Result{RequeueAfter: wait}, nil
			}
		}
		next.Webhooks = want
		delete(next.Annotations, WidenedAt)
	}
	if equality.Semantic.DeepEqual(normalized(cur.Webhooks), normalized(next.Webhooks)) &&
		equality.Semantic.DeepEqual(cur.OwnerReferences, next.OwnerReferences) &&
		equality.Semantic.DeepEqual(cur.Annotations, next.Annotations) {
		return outcomes, reconcile.Result{RequeueAfter: requeue}, nil
	}
	// Update carries the resourceVersion read: a concurrent writer makes it fail and retry.
	return outcomes, reconcile.Result{RequeueAfter: requeue}, r.Client.Update(ctx, next)
}

func (r *WebhookConfiguration) narrowAfter() time.Duration {
	if r.NarrowAfter == 0 {
		return 2 * time.Second
	}
	return r.NarrowAfter
}

// union is cur's entries that want has no entry of the same name for, followed by want's,
// when there are such entries and want adds entries cur lacks (nil otherwise); gone says
// whether cur has entries want lacks.
func union(cur, want []admissionregistrationv1.ValidatingWebhook) (widened []admissionregistrationv1.ValidatingWebhook, gone bool) {
	names := func(ws []admissionregistrationv1.ValidatingWebhook) map[string]bool {
		m := make(map[string]bool, len(ws))
		for _, w := range ws {
			m[w.Name] = true
		}
		return m
	}
	inCur, inWant := names(cur), names(want)
	var kept []admissionregistrationv1.ValidatingWebhook
	for _, w := range cur {
		if !inWant[w.Name] {
			kept = append(kept, w)
		}
	}
	if len(kept) == 0 {
		return nil, false
	}
	adds := false
	for _, w := range want {
		adds = adds || !inCur[w.Name]
	}
	if !adds {
		return nil, true
	}
	return append(kept, want...), true
}

// normalized drops what the API server defaults, so that an entry reads the same before
// and after it was stored.
func normalized(ws []admissionregistrationv1.ValidatingWebhook) []admissionregistrationv1.ValidatingWebhook {
	out := make([]admissionregistrationv1.ValidatingWebhook, len(ws))
	for i := range ws {
		w := ws[i].DeepCopy()
		if s := w.ObjectSelector; s != nil && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
			w.ObjectSelector = nil
		}
		if s := w.ClientConfig.Service; s != nil && ptr.Deref(s.Port, 443) == 443 {
			s.Port = nil
		}
		out[i] = *w
	}
	return out
}

// setConditions writes each policy's Intercepted condition where it changed.
func (r *WebhookConfiguration) setConditions(ctx context.Context, rollouts []v1alpha1.RolloutPolicy, evictions []v1alpha1.DisruptionPolicy, outcomes map[interception.Key]*interception.Outcome, syncErr error) error {
	var errs []error
	for i := range rollouts {
		p := &rollouts[i]
		c := r.condition(outcomes[interception.Key{Kind: "RolloutPolicy", Name: p.Name}], p.Spec.Suspend, p.Generation, syncErr)
		if meta.SetStatusCondition(&p.Status.Conditions, c) {
			errs = append(errs, client.IgnoreNotFound(r.Client.Status().Update(ctx, p)))
		}
	}
	for i := range evictions {
		p := &evictions[i]
		c := r.condition(outcomes[interception.Key{Kind: "DisruptionPolicy", Name: p.Name}], p.Spec.Suspend, p.Generation, syncErr)
		if meta.SetStatusCondition(&p.Status.Conditions, c) {
			errs = append(errs, client.IgnoreNotFound(r.Client.Status().Update(ctx, p)))
		}
	}
	return errors.Join(errs...)
}

func (r *WebhookConfiguration) condition(o *interception.Outcome, suspended bool, generation int64, syncErr error) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionIntercepted, ObservedGeneration: generation}
	switch {
	case suspended:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonNotGuarding, "spec.suspend is true: the API server sends holdfast nothing for this policy"
	case syncErr != nil:
		c.Status, c.Reason = metav1.ConditionFalse, v1alpha1.ReasonUpdateFailed
		c.Message = fmt.Sprintf("%v; the webhook configuration %s in force may not send this policy's requests to holdfast", syncErr, r.Name)
	case o != nil && len(o.Invalid) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonInvalidSelector, o.String()
	case o == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, v1alpha1.ReasonNotGuarding, "no webhook entry sends this policy's requests"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, v1alpha1.ReasonScoped, o.String()
	}
	return c
}

// WebhookMetrics count the scoped configuration's updates.
type WebhookMetrics struct {
	syncs   *prometheus.CounterVec
	failing prometheus.Gauge
}

// NewWebhookMetrics registers the scoped configuration's metrics with reg.
func NewWebhookMetrics(reg prometheus.Registerer) (*WebhookMetrics, error) {
	m := &WebhookMetrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "holdfast_webhook_configuration_syncs_total",
			Help: "Reconciles of holdfast's scoped webhook configuration with the policies, by result (ok, failed: the previous configuration stays in force).",
		}, []string{"result"}),
		failing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "holdfast_webhook_configuration_failing",
			Help: "1 while the leader's last reconcile of the scoped webhook configuration failed (the previous configuration stays in force), 0 otherwise and on other replicas.",
		}),
	}
	for _, c := range []prometheus.Collector{m.syncs, m.failing} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *WebhookMetrics) observe(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.syncs.WithLabelValues("failed").Inc()
		m.failing.Set(1)
		return
	}
	m.syncs.WithLabelValues("ok").Inc()
	m.failing.Set(0)
}
