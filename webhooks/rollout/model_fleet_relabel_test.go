package rollout

import (
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/holdfast-dev/holdfast/internal/decision"

	"github.com/go-logr/logr"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/holdfast-dev/holdfast/internal/budget"
)

var tmpFleetMutants = flag.Bool("tmp-fleet-mutants", false, "temporary")

func TestRolloutFleetModelTmpMutants(t *testing.T) {
	if !*tmpFleetMutants {
		t.Skip()
	}
	logf.SetLogger(logr.Discard())
	for _, check := range []string{RuleConcurrency, budget.RuleSharedBudget, checkPerNamespace, checkCap, checkSlotLifetime} {
		mutant := func(in Input) (Decision, error) {
			return decideWithout(in, func(c string) bool { return c == check })
		}
		var seeds []int
		first := ""
		for seed := range uint64(*fleetModelSequences) {
			if w := generatedFleet(seed, mutant, nil); len(w.violations) > 0 {
				if len(seeds) == 0 {
					first = w.violations[0]
				}
				seeds = append(seeds, int(seed))
				if len(seeds) >= 5 {
					break
				}
			}
		}
		fmt.Printf("TMP mutant %s caught by %v: %s\n", check, seeds, first)
	}
	if false {
		entering := func(in Input) (Decision, error) {
			d, err := decideWithout(in, nil)
			d.Violations = slices.DeleteFunc(d.Violations, func(v decision.Violation) bool {
				return v.Rule == RuleSelection && strings.Contains(v.Message, "brings the workload into the policy's selection while")
			})
			return d, err
		}
		var seeds []int
		for seed := range uint64(*fleetModelSequences) {
			if w := generatedFleet(seed, entering, nil); len(w.violations) > 0 {
				if len(seeds) < 3 {
					fmt.Printf("TMP entering seed %d: %s\n", seed, strings.Join(w.violations, " | "))
				}
				seeds = append(seeds, int(seed))
			}
		}
		fmt.Printf("TMP mutant checkEntering caught by %d sequences: %v\n", len(seeds), seeds[:min(len(seeds), 20)])
	}
}
