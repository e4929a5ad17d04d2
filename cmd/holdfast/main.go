// Command holdfast runs the admission guard: its webhooks and controllers in one
// controller-runtime Manager.
package main

import (
	"errors"
	"fmt"
	"os"
	// Windows name IANA time zones; the distroless image carries no zoneinfo.
	_ "time/tzdata"

	"github.com/spf13/cobra"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/check"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/simulate"
	"github.com/holdfast-dev/holdfast/internal/version"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		var ee *app.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.Code)
		}
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	opts := defaultOptions()
	root := &cobra.Command{
		Use:   "holdfast",
		Short: "Admission guard for the workloads a cluster cannot afford to churn",
		Long: `holdfast guards control-plane components and node or proxy agents at admission time:
it rejects unstable rollouts of Deployments, StatefulSets and DaemonSets, and paces
evictions of the pods that RolloutPolicies and DisruptionPolicies select.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return run(cmd.Context(), opts)
		},
	}
	opts.bind(root.Flags())
	root.AddCommand(check.NewCommand())
	root.AddCommand(simulate.NewCommand())
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version of holdfast",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), version.String())
		},
	})
	return root
}
