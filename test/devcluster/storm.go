package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/holdfast-dev/holdfast/test/harness"
)

// storm replays the field's operator storm: an operator whose desired kube-apiserver
// template moves GEN1→GEN4 every 1.5 s and who applies whatever it wants at that moment.
// Unguarded, every generation becomes a revision; guarded by the sample policy, the
// Deployment settles on GEN1 and then GEN4.
func (e *env) storm(ctx context.Context, r *report) error {
	step("Scenario: the operator storm (a tenant kube-apiserver template moving GEN1→GEN4 every 1.5s)")
	quiet := func(string, ...any) {}
	off, err := harness.RunStorm(ctx, e.client, unguardedNamespace, quiet)
	if err != nil {
		return fmt.Errorf("storm in %s: %w", unguardedNamespace, err)
	}
	r.note(fmt.Sprintf("without holdfast (%s): %d revisions, up to %d pods at once (%d counting terminating ones)",
		unguardedNamespace, off.Revisions, off.PeakPods, off.PeakAll))
	on, err := harness.RunStorm(ctx, e.client, stormNamespace, func(format string, args ...any) {
		r.note("with holdfast: " + strings.TrimSpace(fmt.Sprintf(format, args...)))
	})
	if err != nil {
		return fmt.Errorf("storm in %s: %w", stormNamespace, err)
	}
	r.check(on.Revisions <= 2 && on.Converged, fmt.Sprintf(
		"with holdfast (%s): %d revisions, up to %d pods at once, converged on GEN4: %t; %d updates refused while a rollout was unfinished",
		stormNamespace, on.Revisions, on.PeakPods, on.Converged, on.Refusals))
	return nil
}
