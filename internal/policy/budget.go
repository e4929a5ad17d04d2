package policy

import (
	"math"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// Budget resolves maxUnavailable against the expected count, rounding up as kube's
// disruption controller does for a PodDisruptionBudget's maxUnavailable. Unset is 1.
func Budget(maxUnavailable *intstr.IntOrString, expected int32) int32 {
	if maxUnavailable == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, int(expected), true)
	if err != nil || n < 0 {
		return 0 // unreadable: guard as strictly as possible
	}
	return int32(min(n, math.MaxInt32))
}
