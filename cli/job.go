package cli

import (
	"context"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdJob is `renga owner job`: jobs for the organization's agents.
func newCmdJob(f *Factory) *cobra.Command {
	cmd := group("job", "Jobs for the organization's agents")
	cmd.AddCommand(newCmdJobCreate(f, nil), newCmdJobList(f, nil))
	return cmd
}

var jobHeaders = []string{"ID", "INSTALLATION", "COMMAND", "STATE", "CREATED"}

func (f *Factory) jobRow(j client.Job) []string {
	return []string{j.Id, j.InstallationId, j.Command, string(j.State), f.timeCell(j.CreatedAt)}
}

type jobCreateOptions struct {
	f *Factory

	InstallationID string
	Command        string
	IdempotencyKey string
}

func newCmdJobCreate(f *Factory, runF func(*jobCreateOptions) error) *cobra.Command {
	opts := &jobCreateOptions{f: f}
	cmd := &cobra.Command{
		Use:   "create INSTALLATION_ID COMMAND",
		Short: "Queue a job for an agent",
		Args:  positional("INSTALLATION_ID", "COMMAND"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.InstallationID, opts.Command = args[0], args[1]
			if runF != nil {
				return runF(opts)
			}
			return jobCreateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr unless refused)")
	return cmd
}

func jobCreateRun(ctx context.Context, opts *jobCreateOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	key := newIdempotencyKey(opts.IdempotencyKey)
	r, err := c.CreateJobWithResponse(ctx, &client.CreateJobParams{IdempotencyKey: key},
		client.JobCreate{InstallationId: opts.InstallationID, Command: opts.Command})
	if err := f.checkKeyed(&key, r, err); err != nil {
		return err
	}
	return f.print(r.Body, jobHeaders, func() [][]string { return [][]string{f.jobRow(*r.JSON201)} })
}

type jobListOptions struct {
	f *Factory
}

func newCmdJobList(f *Factory, runF func(*jobListOptions) error) *cobra.Command {
	opts := &jobListOptions{f: f}
	return &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return jobListRun(cmd.Context(), opts)
		},
	}
}

func jobListRun(ctx context.Context, opts *jobListOptions) error {
	f := opts.f
	c, err := f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.ListJobsWithResponse(ctx, &client.ListJobsParams{})
	if err := check(r, err); err != nil {
		return err
	}
	return f.print(r.Body, jobHeaders, func() [][]string {
		var rows [][]string
		for _, j := range r.JSON200.Items {
			rows = append(rows, f.jobRow(j))
		}
		return rows
	})
}
