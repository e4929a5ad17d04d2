//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
	utiltesting "github.com/holdfast-dev/holdfast/test/util/testing"
)

// TestBoundedHoldBeforeAForcingDrainer: a platform drainer that force-deletes any pod
// still held 25 s after its first deferral drains three agents at once, under a policy that
// spaces their evictions 10 minutes apart. With afterMaxHold Release and maxHold 4s the
// holds end first: every agent leaves by an admitted eviction (EvictionReleased on the pod
// and its node), none is forced. With afterMaxHold Hold the same drainer forces the held
// agents out at its deadline, after holdfast warned (EvictionOutlastsDrainer) when.
func TestBoundedHoldBeforeAForcingDrainer(t *testing.T) {
	const drainer = "platform-drainer"
	// Two replacements must become Ready before it (kwok makes a pod Ready 1–6 s after it is
	// scheduled), with room for a loaded machine.
	const deadline = 25 * time.Second
	f := features.New("bounded holds").
		Assess("a release ends the hold before the drainer's deadline; a hold outlasts it", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := newClient(t, cfg)
			rc := rest.CopyConfig(cfg.Client().RESTConfig())
			rc.Impersonate = rest.ImpersonationConfig{UserName: drainer}
			as := kubernetes.NewForConfigOrDie(rc)
			run := func(after v1alpha1.AfterMaxHold) (ns string, evicted, forced int) {
				ns = newNamespace(ctx, t, c, "bh-"+strings.ToLower(string(after)))
				namespacePolicy(ctx, t, c, ns, func(s *v1alpha1.DisruptionPolicySpec) {
					s.Cooldown = &metav1.Duration{Duration: 10 * time.Minute}
					s.MaxHold = &metav1.Duration{Duration: 4 * time.Second}
					s.AfterMaxHold = after
					s.Requesters = []v1alpha1.Requester{{Users: []string{drainer},
						Deadline: &v1alpha1.DrainDeadline{After: &metav1.Duration{Duration: deadline}, Then: v1alpha1.DrainerForce}}}
				})
				role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evict"}, Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}}}}
				binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evict"},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "evict"},
					Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: drainer}}}
				for _, o := range []client.Object{role, binding} {
					if err := c.Create(ctx, o); err != nil {
						t.Fatal(err)
					}
				}
				if err := c.Create(ctx, utiltesting.MakeDeployment(ns, "agent").Replicas(3).Obj()); err != nil {
					t.Fatal(err)
				}
				pods := waitReadyPods(ctx, t, c, ns, "agent", 3)
				// The drainer: every pod at once, retrying 429s every second; at its deadline it
				// deletes what is still held (its deletes are not evictions: no budget).
				first := map[string]time.Time{}
				left := map[string]bool{}
				for _, p := range pods {
					left[p.Name] = true
				}
				stop := time.Now().Add(60 * time.Second)
				for len(left) > 0 && time.Now().Before(stop) {
					for name := range left {
						ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
						err := as.CoreV1().RESTClient().Post().Namespace(ns).Resource("pods").Name(name).SubResource("eviction").
							Body(ev).MaxRetries(0).Do(ctx).Error()
						switch {
						case err == nil || apierrors.IsNotFound(err):
							evicted++
							delete(left, name)
						case !apierrors.IsTooManyRequests(err):
							t.Fatalf("the drainer's eviction of %s: %v, want 429 or admitted", name, err)
						case first[name].IsZero():
							first[name] = time.Now()
						case time.Since(first[name]) >= deadline:
							pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
							if err := c.Delete(ctx, pod); client.IgnoreNotFound(err) != nil {
								t.Fatal(err)
							}
							forced++
							delete(left, name)
						}
					}
					time.Sleep(time.Second)
				}
				if len(left) > 0 {
					t.Errorf("afterMaxHold %s: %d pods still on their nodes after 60s", after, len(left))
				}
				return ns, evicted, forced
			}
			events := func(ns, reason string) (onPods, onNodes int) {
				_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 15*time.Second, true, func(ctx context.Context) (bool, error) {
					var list eventsv1.EventList
					if err := c.List(ctx, &list); err != nil {
						return false, err
					}
					onPods, onNodes = 0, 0
					for _, e := range list.Items {
						switch {
						case e.Reason != reason:
						case e.Regarding.Kind == "Pod" && e.Regarding.Namespace == ns:
							onPods++
						case e.Regarding.Kind == "Node" && strings.Contains(e.Note, ns+"/"):
							onNodes++
						}
					}
					return onPods > 0 && onNodes > 0, nil
				})
				return onPods, onNodes
			}

			ns, evicted, forced := run(v1alpha1.AfterMaxHoldRelease)
			onPods, onNodes := events(ns, "EvictionReleased")
			fmt.Printf("SCENARIO bounded-hold afterMaxHold=Release evicted=%d forced=%d releasedEventsOnPods=%d onNodes=%d\n", evicted, forced, onPods, onNodes)
			if evicted != 3 || forced != 0 {
				t.Errorf("under Release: %d evicted, %d forced; want 3 evicted, none forced", evicted, forced)
			}
			if onPods == 0 || onNodes == 0 {
				t.Errorf("EvictionReleased Events: %d on pods, %d on nodes; want both", onPods, onNodes)
			}

			ns, evicted, forced = run(v1alpha1.AfterMaxHoldHold)
			onPods, onNodes = events(ns, "EvictionOutlastsDrainer")
			fmt.Printf("SCENARIO bounded-hold afterMaxHold=Hold evicted=%d forced=%d outlastsEventsOnPods=%d onNodes=%d\n", evicted, forced, onPods, onNodes)
			if forced == 0 {
				t.Errorf("under Hold: %d evicted, none forced; want the drainer to force the held agents at its deadline", evicted)
			}
			if onPods == 0 || onNodes == 0 {
				t.Errorf("EvictionOutlastsDrainer Events: %d on pods, %d on nodes; want both", onPods, onNodes)
			}
			return ctx
		}).Feature()
	testenv.Test(t, f)
}
