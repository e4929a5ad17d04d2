// Package simulate is `holdfast simulate`: a scenario replayed offline through holdfast's
// production decision code, on a virtual clock, with kube's controllers modelled.
package simulate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/internal/sim"
)

// Options are the command's flags.
type Options struct {
	Files  []string
	Output string
}

// NewCommand is `holdfast simulate`.
func NewCommand() *cobra.Command {
	o := &Options{}
	cmd := &cobra.Command{
		Use:   "simulate -f SCENARIO",
		Short: "Replay a scenario (operator changes, node drains) through holdfast offline and report what it would do",
		Long: `simulate replays a scenario through holdfast's own rollout and eviction handlers and journal
recorder, without a cluster, on a virtual clock. The scenario file holds one Scenario
document (apiVersion holdfast.dev/v1alpha1: nodes, pod start and termination times, and a
timeline of operator changes, drains, cordons and uncordons) and the objects the cluster
starts with: Namespaces, Nodes, Deployments, StatefulSets, DaemonSets, RolloutPolicies and
DisruptionPolicies. kube's Deployment, StatefulSet and DaemonSet controllers and the
scheduler are modelled (the model the rollout guard's tests run); an operator requeues a
refused change with backoff; a drain retries a 429 as kubectl drain does.

It prints each request and holdfast's answer, then the figures: revisions, peak pods,
the most pods unavailable at once, eviction gaps and how long each drain took. Exit code
2 when the scenario cannot be read, 1 when the simulation itself failed, 0 otherwise.
scenarios/ in the repository holds the field's three incidents.`,
		Example: `  # The operator storm that rewrote a tenant kube-apiserver four times in six seconds.
  holdfast simulate -f scenarios/operator-storm.yaml

  # A drain of four agent nodes, figures for machines.
  holdfast simulate -f scenarios/agent-drain.yaml -o json

  # Your own policies against a scenario's workloads and timeline.
  holdfast simulate -f my-scenario.yaml -f policies/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Run(cmd.OutOrStdout(), cmd.InOrStdin(), o)
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&o.Files, "filename", "f", nil, "scenario files or directories (- for stdin): one Scenario document and the cluster's objects")
	f.StringVarP(&o.Output, "output", "o", "text", "text or json")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

// Run simulates as the command does, writing to out.
func Run(out io.Writer, stdin io.Reader, o *Options) error {
	if o.Output != "text" && o.Output != "json" {
		return &app.ExitError{Code: 2, Err: fmt.Errorf("--output %q: want text or json", o.Output)}
	}
	sc, err := sim.Load(o.Files, stdin)
	if err != nil {
		return &app.ExitError{Code: 2, Err: err}
	}
	res, err := sim.Run(sc)
	if err != nil {
		return &app.ExitError{Code: 2, Err: err}
	}
	if o.Output == "json" {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		res.Write(out)
	}
	if len(res.Errors) > 0 {
		return &app.ExitError{Code: 1, Err: errors.New("the simulation failed: see its errors")}
	}
	return nil
}
