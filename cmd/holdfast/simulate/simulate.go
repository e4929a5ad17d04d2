// Package simulate is `holdfast simulate`: a scenario replayed offline through holdfast's
// production handlers (package sim), its expectations judged, the outcome printed for
// people or for CI and ended with CI's exit codes.
package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/simulate/sim"
)

// Options are the command's flags.
type Options struct {
	Files  []string
	Output string
}

// formats are the values of --output.
var formats = []string{"text", "json", "junit"}

// NewCommand is `holdfast simulate`.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "simulate -f SCENARIO",
		Short: "Replay a scenario (operator changes, node drains) through holdfast offline and check what it expects",
		Long: `simulate replays a scenario through holdfast's own rollout and eviction handlers and journal
recorder, built as the server builds them, without a cluster, on a virtual clock. The
scenario file holds one Scenario document (apiVersion scenario.holdfast.dev/v1alpha1, or
holdfast.dev/v1alpha1 as older files say: nodes, pod start and termination times, a
timeline of operator changes, drains, cordons and uncordons, and what the run is expected
to show) and the objects the cluster starts with: Namespaces, Nodes, Deployments,
StatefulSets, DaemonSets, RolloutPolicies and DisruptionPolicies. kube's Deployment,
StatefulSet and DaemonSet controllers and the scheduler are modelled (the model the
rollout guard's tests run); an operator requeues a refused change with backoff; a drain
retries a 429 as kubectl drain does. The Scenario document is read strictly: a misspelt
field is an error naming the file, the document and the field.

It prints each request and holdfast's answer, then the figures (revisions, peak pods,
the most pods unavailable at once, eviction gaps, how long each drain took), then each
expectation of spec.expect (maxTemplatesWithLivePods, maxRevisions, maxUnavailable,
minReady, minEvictionGap, convergedWithin, drained) as met or UNMET.
Exit code 0 when every expectation is met, 1 when one is not or the simulation itself
failed, 2 when the scenario cannot be read or the command line is wrong. -o junit writes
one test case per expectation, failed when unmet. scenarios/ in the repository holds the
field's three incidents, each expecting what holdfast promises for it.`,
		Example: `  # The operator storm that rewrote a tenant kube-apiserver four times in six seconds.
  holdfast simulate -f scenarios/operator-storm.yaml

  # A drain of four agent nodes, figures for machines.
  holdfast simulate -f scenarios/agent-drain.yaml -o json

  # Your own policies against a scenario's workloads, timeline and expectations, in CI.
  holdfast simulate -f my-scenario.yaml -f policies/ -o junit > simulate.xml`,
		// Required flags are checked here, before cobra checks them, so that a missing
		// one is a usage error (exit 2) too.
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return app.UsageError(err)
			}
			return app.UsageError(cmd.ValidateRequiredFlags())
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := Run(cmd.OutOrStdout(), cmd.InOrStdin(), o)
			var ee *app.ExitError
			if errors.As(err, &ee) && ee.Code == 1 {
				cmd.SilenceErrors = true // the unmet expectations and errors are the output
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "scenario files or directories (- for stdin): one Scenario document and the cluster's objects")
	f.StringVarP(&o.Output, "output", "o", "text", strings.Join(formats, ", ")+" (junit: one test case per expectation)")
	_ = cmd.MarkFlagRequired("filename")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return app.UsageError(err) })
	return cmd
}

// Run simulates as the command does, writing to out: nil when every expectation is met,
// an *app.ExitError with code 1 when one is not or the simulation failed, and with code 2
// when the scenario cannot be read.
func Run(out io.Writer, stdin io.Reader, o *Options) error {
	if !slices.Contains(formats, o.Output) {
		return &app.ExitError{Code: 2, Err: fmt.Errorf("--output %q: want one of %s", o.Output, strings.Join(formats, ", "))}
	}
	sc, err := sim.Load(o.Files, stdin)
	if err != nil {
		return &app.ExitError{Code: 2, Err: err}
	}
	res, err := sim.Run(sc)
	if err != nil {
		return &app.ExitError{Code: 2, Err: err}
	}
	switch o.Output {
	case "json":
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	case "junit":
		if err := app.WriteJUnit(out, JUnit(res)); err != nil {
			return err
		}
	default:
		res.Write(out)
	}
	var failed []string
	if len(res.Errors) > 0 {
		failed = append(failed, "the simulation failed: see its errors")
	}
	if unmet := res.Unmet(); len(unmet) > 0 {
		failed = append(failed, fmt.Sprintf("%d of %d expectations unmet", len(unmet), len(res.Expectations)))
	}
	if len(failed) > 0 {
		return &app.ExitError{Code: 1, Err: errors.New(strings.Join(failed, "; "))}
	}
	return nil
}

// JUnit is the run as a JUnit test suite named after the scenario: a test case per
// expectation (class: what it was measured on; name: its field), failed when unmet, and
// a failed "simulation" case when the simulation itself failed.
func JUnit(res *sim.Result) app.JUnitSuite {
	suite := app.JUnitSuite{Name: "holdfast simulate " + res.Scenario}
	for _, o := range res.Expectations {
		c := app.JUnitCase{Classname: o.Subject, Name: o.Expectation, SystemOut: o.Got}
		if !o.Met {
			c.Failure = &app.JUnitFailure{Message: "want " + o.Want, Type: "unmet", Text: o.String()}
			c.SystemOut = ""
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, c)
	}
	if len(res.Errors) > 0 {
		suite.Cases = append(suite.Cases, app.JUnitCase{Classname: "scenario " + res.Scenario, Name: "simulation",
			Failure: &app.JUnitFailure{Message: "the simulation failed", Type: "error", Text: strings.Join(res.Errors, "\n")}})
		suite.Failures++
	}
	suite.Tests = len(suite.Cases)
	return suite
}
