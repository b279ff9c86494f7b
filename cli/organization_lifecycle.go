package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// The organization's lifecycle: suspend, resume, delete (schedule the deletion) and undelete
// (cancel it). Each changes the target state of one organization and prints it. Suspend and
// delete ask for the organization's slug first (confirm.go).

// confirmOrganization reads the organization and asks for its slug to be typed; question is a
// format taking its slug, ID and display name.
func (f *Factory) confirmOrganization(ctx context.Context, c *client.ClientWithResponses, id, question string) error {
	r, err := c.GetOrganizationWithResponse(ctx, id)
	if err := check(r, err); err != nil {
		return err
	}
	o := r.JSON200
	return f.confirmTyped(fmt.Sprintf(question, o.Slug, o.Id, o.DisplayName), o.Slug)
}

type organizationSuspendOptions struct {
	f *Factory

	OrganizationID string
	Reason         string
	IdempotencyKey string
	Yes            bool
}

func newCmdOrganizationSuspend(f *Factory, runF func(*organizationSuspendOptions) error) *cobra.Command {
	opts := &organizationSuspendOptions{f: f}
	cmd := &cobra.Command{
		Use:   "suspend ORGANIZATION_ID --reason TEXT",
		Short: "Suspend an organization (its owners can read, not write)",
		Long: `Suspend an organization: its owners can read, not write, and its agents are refused.
On a terminal it asks for the organization's slug to be typed; elsewhere it needs --yes.`,
		Args: positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if err := f.needConfirmation(opts.Yes, "suspending "+opts.OrganizationID); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return organizationSuspendRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (the owners see it in their Activity)")
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "suspend without asking for the organization's slug")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

func organizationSuspendRun(ctx context.Context, opts *organizationSuspendOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes {
		if err := f.confirmOrganization(ctx, c, opts.OrganizationID,
			"Suspending organization %s (%s, %q): its owners can read but not write, and its agents are refused."); err != nil {
			return err
		}
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	params := &client.SuspendOrganizationParams{IdempotencyKey: key}
	r, err := c.SuspendOrganizationWithResponse(ctx, opts.OrganizationID, params, client.SuspendRequest{Reason: opts.Reason})
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.printOrganization(r.Body, r.JSON200)
}

type organizationResumeOptions struct {
	f *Factory

	OrganizationID string
	IdempotencyKey string
}

func newCmdOrganizationResume(f *Factory, runF func(*organizationResumeOptions) error) *cobra.Command {
	opts := &organizationResumeOptions{f: f}
	cmd := &cobra.Command{
		Use:   "resume ORGANIZATION_ID",
		Short: "Resume a suspended organization (also cancels a scheduled deletion)",
		Args:  positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return organizationResumeRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func organizationResumeRun(ctx context.Context, opts *organizationResumeOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	params := &client.ResumeOrganizationParams{IdempotencyKey: key}
	r, err := c.ResumeOrganizationWithResponse(ctx, opts.OrganizationID, params)
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.printOrganization(r.Body, r.JSON200)
}

type organizationDeleteOptions struct {
	f *Factory

	OrganizationID string
	IdempotencyKey string
	Yes            bool
}

func newCmdOrganizationDelete(f *Factory, runF func(*organizationDeleteOptions) error) *cobra.Command {
	opts := &organizationDeleteOptions{f: f}
	cmd := &cobra.Command{
		Use:   "delete ORGANIZATION_ID",
		Short: "Schedule an organization's deletion (purged after the grace period)",
		Long: `Schedule an organization's deletion: it is purged after the deployment's grace period
(RENGA_DELETION_GRACE_PERIOD) unless undeleted before. On a terminal it asks for the
organization's slug to be typed; elsewhere it needs --yes.`,
		Args: positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if err := f.needConfirmation(opts.Yes, "deleting "+opts.OrganizationID); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return organizationDeleteRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	cmd.Flags().BoolVar(&opts.Yes, "yes", false, "schedule the deletion without asking for the organization's slug")
	return cmd
}

func organizationDeleteRun(ctx context.Context, opts *organizationDeleteOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	if !opts.Yes {
		if err := f.confirmOrganization(ctx, c, opts.OrganizationID,
			"Deleting organization %s (%s, %q): it is purged after the grace period unless `renga org undelete` cancels it before."); err != nil {
			return err
		}
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	params := &client.ScheduleOrganizationDeletionParams{IdempotencyKey: key}
	r, err := c.ScheduleOrganizationDeletionWithResponse(ctx, opts.OrganizationID, params)
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.printOrganization(r.Body, r.JSON200)
}

type organizationUndeleteOptions struct {
	f *Factory

	OrganizationID string
	IdempotencyKey string
}

func newCmdOrganizationUndelete(f *Factory, runF func(*organizationUndeleteOptions) error) *cobra.Command {
	opts := &organizationUndeleteOptions{f: f}
	cmd := &cobra.Command{
		Use:   "undelete ORGANIZATION_ID",
		Short: "Cancel a scheduled deletion (impossible once the purge started)",
		Args:  positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return organizationUndeleteRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	return cmd
}

func organizationUndeleteRun(ctx context.Context, opts *organizationUndeleteOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	key := optionalIdempotencyKey(opts.IdempotencyKey)
	params := &client.CancelOrganizationDeletionParams{IdempotencyKey: key}
	r, err := c.CancelOrganizationDeletionWithResponse(ctx, opts.OrganizationID, params)
	if err := f.checkKeyed(key, r, err); err != nil {
		return err
	}
	return f.printOrganization(r.Body, r.JSON200)
}
