package cli

import (
	"context"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// The organization's agents (installations) and what they observed, as an owner.

type agentListOptions struct {
	f *Factory
}

// newCmdAgentList is `renga owner agents`.
func newCmdAgentList(f *Factory, runF func(*agentListOptions) error) *cobra.Command {
	opts := &agentListOptions{f: f}
	return &cobra.Command{
		Use:   "agents",
		Short: "List the organization's agents",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return agentListRun(cmd.Context(), opts)
		},
	}
}

func agentListRun(ctx context.Context, opts *agentListOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.ListAgentsWithResponse(ctx, &client.ListAgentsParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, []string{"INSTALLATION", "HOSTNAME", "OS", "REGISTERED", "LAST SEEN"}, func() [][]string {
		var rows [][]string
		for _, i := range r.JSON200.Items {
			seen := ""
			if i.LastSeenAt != nil {
				seen = f.timeCell(*i.LastSeenAt)
			}
			rows = append(rows, []string{i.InstallationId, i.Hostname, i.Os, f.timeCell(i.RegisteredAt), seen})
		}
		return rows
	})
}

type observationListOptions struct {
	f *Factory

	InstallationID string
}

// newCmdObservationList is `renga owner observations`.
func newCmdObservationList(f *Factory, runF func(*observationListOptions) error) *cobra.Command {
	opts := &observationListOptions{f: f}
	return &cobra.Command{
		Use:   "observations INSTALLATION_ID",
		Short: "List an agent's observations, newest first",
		Args:  positional("INSTALLATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.InstallationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return observationListRun(cmd.Context(), opts)
		},
	}
}

func observationListRun(ctx context.Context, opts *observationListOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.ListObservationsWithResponse(ctx, opts.InstallationID, &client.ListObservationsParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, []string{"ID", "KIND", "OBSERVED", "BATCH"}, func() [][]string {
		var rows [][]string
		for _, o := range r.JSON200.Items {
			rows = append(rows, []string{o.Id, o.Kind, f.timeCell(o.ObservedAt), o.BatchId})
		}
		return rows
	})
}
