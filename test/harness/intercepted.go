package harness

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// apiServerFollows is how long an API server takes at most, here, to act on a webhook
// configuration it was sent by watch.
const apiServerFollows = 300 * time.Millisecond

// WaitIntercepted waits until holdfast's leader has brought its webhook configuration in
// step with the policy's generation (its Intercepted condition says so), and then for the
// API server to follow. policy is a *v1alpha1.RolloutPolicy or *v1alpha1.DisruptionPolicy;
// it is read again into.
func WaitIntercepted(ctx context.Context, c client.Reader, policy client.Object) error {
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(policy), policy); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		var conds []metav1.Condition
		switch p := policy.(type) {
		case *v1alpha1.RolloutPolicy:
			conds = p.Status.Conditions
		case *v1alpha1.DisruptionPolicy:
			conds = p.Status.Conditions
		default:
			return false, fmt.Errorf("%T is not a holdfast policy", policy)
		}
		last = meta.FindStatusCondition(conds, v1alpha1.ConditionIntercepted)
		return last != nil && last.ObservedGeneration == policy.GetGeneration() &&
			(last.Status == metav1.ConditionTrue || last.Reason == v1alpha1.ReasonNotGuarding), nil
	})
	if err != nil {
		return fmt.Errorf("policy %s never intercepted at generation %d (last condition %+v): %w", policy.GetName(), policy.GetGeneration(), last, err)
	}
	time.Sleep(apiServerFollows)
	return nil
}
