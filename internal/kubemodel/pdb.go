package kubemodel

import "time"

// DeletionTimeout is how long the disruption controller counts a pod whose eviction it
// admitted as disrupted when the pod does not go (pkg/controller/disruption/
// disruption.go, DeletionTimeout).
const DeletionTimeout = 2 * time.Minute

// PDBAllows is kube's PDB check of an eviction after the webhooks admitted it
// (pkg/registry/core/pod/storage/eviction.go: EvictionREST.Create and checkAndDecrement),
// against the PDB's status as the disruption controller computes it (disruption.go,
// trySync and countHealthyPods): healthy pods are Ready, not terminating and not disrupted;
// desired is the expected count less maxUnavailable. A pod not Ready is evicted without a
// decrement under unhealthyPodEvictionPolicy AlwaysAllow, or IfHealthyBudget while the
// budget is met; a Ready one only while healthy exceeds desired, and then counts as
// disrupted.
func PDBAllows(ready bool, healthy, desired int, alwaysAllow bool) (allowed, disrupts bool) {
	if !ready && (alwaysAllow || (healthy >= desired && desired > 0)) {
		return true, false
	}
	if healthy-desired <= 0 {
		return false, false // 429: "Cannot evict pod as it would violate the pod's disruption budget"
	}
	return true, true
}
