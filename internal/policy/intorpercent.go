package policy

import (
	"math"

	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/holdfast-dev/holdfast/api/v1alpha1"
)

// Field names an int-or-percent field holdfast resolves against a count of pods. Each
// resolves as the kube code that acts on the field it mirrors does, which is why they
// differ in rounding and in what an unset or unreadable value means.
type Field int

const (
	// DisruptionBudget is a DisruptionPolicy's maxUnavailable, resolved as kube's
	// disruption controller resolves a PodDisruptionBudget's: rounded up. Unset is 1;
	// unreadable is 0, guarding as strictly as possible.
	DisruptionBudget Field = iota
	// MaxUnavailable is a rolling update's maxUnavailable (the workload's, or a
	// RolloutPolicy's limit on it), rounded as the controller of the workload's kind
	// rounds it: down for Deployments and StatefulSets, up for DaemonSets. Unset is 0;
	// unreadable is every pod, assuming the worst.
	MaxUnavailable
	// MaxSurge is a rolling update's maxSurge, rounded up as kube rounds it. Unset and
	// unreadable are 0.
	MaxSurge
	// MaxInFlight is a RolloutPolicy's concurrency.maxInFlight, resolved against the
	// workloads the policy selects rather than pods: rounded up, and at least 1, so that
	// some rollout can always start. Unset and unreadable are 1.
	MaxInFlight
)

// Resolve resolves v, a field of a workload of the given kind (or of a policy about it),
// against total pods (for MaxInFlight, workloads; only MaxUnavailable reads the kind).
func Resolve(f Field, kind v1alpha1.WorkloadKind, v *intstr.IntOrString, total int32) int32 {
	up, unset, unreadable, least := true, int32(0), int32(0), int32(0)
	switch f {
	case DisruptionBudget:
		unset = 1
	case MaxUnavailable:
		up, unreadable = kind == v1alpha1.KindDaemonSet, total
	case MaxInFlight:
		unset, unreadable, least = 1, 1, 1
	}
	if v == nil {
		return unset
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(total), up)
	if err != nil || n < 0 {
		return unreadable
	}
	return max(int32(min(n, math.MaxInt32)), least)
}

// Fenceposts are a Deployment's maxSurge and maxUnavailable resolved against its replicas
// as kube's deployment controller resolves them (ResolveFenceposts): surge rounded up,
// unavailable down, and one pod unavailable when both come to 0, or no pod could ever be
// replaced.
func Fenceposts(surge, unavailable *intstr.IntOrString, replicas int32) (maxSurge, maxUnavailable int32) {
	maxSurge = Resolve(MaxSurge, v1alpha1.KindDeployment, surge, replicas)
	maxUnavailable = Resolve(MaxUnavailable, v1alpha1.KindDeployment, unavailable, replicas)
	if maxSurge == 0 && maxUnavailable == 0 {
		maxUnavailable = 1
	}
	return maxSurge, maxUnavailable
}
