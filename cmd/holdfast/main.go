// Command holdfast runs the admission guard (`holdfast serve`: its webhooks and
// controllers in one controller-runtime Manager) and its offline tools (check, simulate).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	// Windows name IANA time zones; the distroless image carries no zoneinfo.
	_ "time/tzdata"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/holdfast-dev/holdfast/cmd/holdfast/app"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/check"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/selftest"
	"github.com/holdfast-dev/holdfast/cmd/holdfast/simulate"
	"github.com/holdfast-dev/holdfast/internal/version"
)

// deprecatedRootServe is printed when the root command is given server flags without
// `serve`, as manifests written before `serve` existed do.
const deprecatedRootServe = "Warning: running the server without `serve` is deprecated and will be removed in a later minor release; use `holdfast serve`"

func main() {
	if err := newRootCommand(run).Execute(); err != nil {
		var ee *app.ExitError
		if errors.As(err, &ee) {
			os.Exit(ee.Code)
		}
		os.Exit(1)
	}
}

// serveFunc runs the server with its options until it stops; main passes run, tests a
// fake, so that the command line is tested without a manager.
type serveFunc func(context.Context, *options) error

func newRootCommand(serve serveFunc) *cobra.Command {
	// Root and serve bind the same options: one invocation parses only one of the two
	// flag sets, and both start from the same defaults.
	opts := defaultOptions()
	root := &cobra.Command{
		Use:   "holdfast",
		Short: "Admission guard for the workloads a cluster cannot afford to churn",
		Long: `holdfast guards control-plane components and node or proxy agents at admission time:
it rejects unstable rollouts of Deployments, StatefulSets and DaemonSets, and paces
evictions of the pods that RolloutPolicies and DisruptionPolicies select.

Run the webhooks and controllers with "holdfast serve"; check and simulate work offline.`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Deployments installed before `serve` existed start the image with server
			// flags and no command: serve them rather than crash-loop the webhooks after
			// an image upgrade.
			if cmd.Flags().NFlag() > 0 {
				fmt.Fprintln(cmd.ErrOrStderr(), deprecatedRootServe)
				return serve(cmd.Context(), opts)
			}
			return cmd.Help()
		},
	}
	opts.bind(root.Flags())
	// The root's server flags are there only for old manifests; its help lists commands.
	root.Flags().VisitAll(func(f *pflag.Flag) { f.Hidden = true })

	serveCmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the webhooks and controllers",
		Long: `serve runs holdfast in the cluster: the webhooks on every replica, and the controllers
on the replica elected leader (--leader-elect).`,
		SilenceUsage: true,
		Args:         cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return serve(cmd.Context(), opts)
		},
	}
	opts.bind(serveCmd.Flags())

	root.AddCommand(serveCmd)
	root.AddCommand(check.NewCommand())
	root.AddCommand(simulate.NewCommand())
	root.AddCommand(selftest.NewCommand())
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
