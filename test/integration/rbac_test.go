//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/holdfast-dev/holdfast/charts"
)

// holdfastUser is the service account config/rbac binds, installed under its own name so
// that the chart and kustomize tests can still create theirs; holdfast runs as it in the
// integration tests (impersonated), so every call it makes meets the generated rules.
const (
	rbacSuffix   = "-integration"
	holdfastUser = "system:serviceaccount:holdfast-system:holdfast" + rbacSuffix
)

// auditPolicy records every request's metadata.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// enableAudit makes the API server write an audit log to dir and returns its path.
func enableAudit(env *envtest.Environment, dir string) (string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return "", err
	}
	log := filepath.Join(dir, "audit.log")
	args := env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policy)
	args.Set("audit-log-path", log)
	return log, nil
}

// installRBAC applies config/rbac (the generated roles, the service account and the
// bindings) and returns a copy of cfg that impersonates the service account.
func installRBAC(cfg *rest.Config) (*rest.Config, error) {
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	objs, err := charts.Kustomize("rbac")
	if err != nil {
		return nil, err
	}
	for _, u := range objs {
		u.SetName(u.GetName() + rbacSuffix)
		if ref, ok := u.Object["roleRef"].(map[string]any); ok {
			ref["name"] = ref["name"].(string) + rbacSuffix
		}
		if subjects, ok := u.Object["subjects"].([]any); ok {
			for _, sub := range subjects {
				m := sub.(map[string]any)
				m["name"] = m["name"].(string) + rbacSuffix
			}
		}
		if err := c.Create(context.Background(), u); err != nil {
			return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
		}
	}
	hcfg := rest.CopyConfig(cfg)
	hcfg.Impersonate = rest.ImpersonationConfig{UserName: holdfastUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:holdfast-system", "system:authenticated"}}
	return hcfg, nil
}

// notExercised are granted verbs the integration run does not use, with the reason.
var notExercised = map[string]string{
	"/secrets/create": "certificate rotation (cert-controller) is off in the integration run",
	"/secrets/update": "certificate rotation",
	"/secrets/patch":  "certificate rotation",
	"/secrets/get":    "certificate rotation",
	"/secrets/list":   "certificate rotation",
	"/secrets/watch":  "certificate rotation",
	"admissionregistration.k8s.io/validatingwebhookconfigurations/get":    "certificate rotation injects the CA",
	"admissionregistration.k8s.io/validatingwebhookconfigurations/list":   "certificate rotation",
	"admissionregistration.k8s.io/validatingwebhookconfigurations/watch":  "certificate rotation",
	"admissionregistration.k8s.io/validatingwebhookconfigurations/update": "certificate rotation",
	"events.k8s.io/events/patch":                                          "the event recorder patches an Event that repeats (a series)",
	"apps/deployments/finalizers/update":                                  "needed where owner-reference permissions are enforced (the PDBs block their workload's deletion); envtest does not enforce them",
	"apps/statefulsets/finalizers/update":                                 "the same, for StatefulSets",
	"apps/daemonsets/finalizers/update":                                   "the same, for DaemonSets",
	"coordination.k8s.io/leases/update":                                   "leader election renews its Lease (the integration manager does not elect) and a ledger records into an existing group",
	"karpenter.sh/nodeclaims/list":                                        "read only while a requester with deadline.nodeClaim is held; Karpenter's CRD is not installed here (TestNodeClaimDeadline reads a NodeClaim through the same code)",
}

// checkRBACAgainstAudit holds the generated ClusterRole and Role to what holdfast did in
// the run, as the API server's audit log recorded it: no call was forbidden, and every
// granted verb was used or is listed in notExercised with the reason. Informers list
// through watches (watch-list) and gets are served from them, so get and list count as
// used on a resource holdfast watched. Unused grants are judged only when the whole suite
// ran (wholeSuite): a run of some tests (-run) exercises only some verbs.
func checkRBACAgainstAudit(wholeSuite bool) error {
	used, forbidden, err := callsOf(holdfastUser)
	if err != nil {
		return err
	}
	granted, err := granted("rbac")
	if err != nil {
		return err
	}
	var unused []string
	for _, g := range granted {
		base, verb := g[:strings.LastIndex(g, "/")], g[strings.LastIndex(g, "/")+1:]
		if (verb == "get" || verb == "list") && used[base+"/watch"] {
			continue
		}
		if !used[g] && notExercised[g] == "" {
			unused = append(unused, g)
		}
	}
	slices.Sort(unused)
	fmt.Printf("RELIABILITY rbac-audit granted=%d used=%d forbidden=%d unusedGranted=%d\n", len(granted), len(used), len(forbidden), len(unused))
	var problems []string
	if len(forbidden) > 0 {
		problems = append(problems, "calls the generated RBAC forbids: "+strings.Join(forbidden, ", "))
	}
	if len(unused) > 0 && wholeSuite {
		problems = append(problems, "granted but never used in the run (drop them, or say why in notExercised): "+strings.Join(unused, ", "))
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

// granted is every group/resource/verb the roles of a config/ kustomization grant.
func granted(dir string) ([]string, error) {
	objs, err := charts.Kustomize(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, u := range objs {
		var rules []rbacv1.PolicyRule
		switch u.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				return nil, err
			}
			rules = r.Rules
		case "Role":
			var r rbacv1.Role
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
				return nil, err
			}
			rules = r.Rules
		}
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						out = append(out, g+"/"+res+"/"+v)
					}
				}
			}
		}
	}
	return out, nil
}

// callsOf is what the user (impersonated) called in the run, as group/resource/verb, and
// which of those calls authorization forbade, from the API server's audit log. (A 403 that
// authorization allowed is admission's: a write into a namespace being deleted, as a
// PolicyReport of a test's policy may be while the test's namespace goes.)
func callsOf(user string) (used map[string]bool, forbidden []string, err error) {
	used = map[string]bool{}
	err = readAudit(0, func(ev auditEvent) {
		if ev.ImpersonatedUser == nil || ev.ImpersonatedUser.Username != user || ev.ObjectRef == nil {
			return
		}
		res := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			res += "/" + ev.ObjectRef.Subresource
		}
		key := ev.ObjectRef.APIGroup + "/" + res + "/" + ev.Verb
		used[key] = true
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 403 && ev.Annotations["authorization.k8s.io/decision"] == "forbid" {
			forbidden = append(forbidden, key+" in "+ev.ObjectRef.Namespace)
		}
	})
	return used, forbidden, err
}
