package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdOwner is `renga owner`: the organization API, as an owner, over HTTP with RENGA_URL and
// the personal API key in RENGA_API_KEY (see Factory.OwnerClient).
func newCmdOwner(f *Factory) *cobra.Command {
	cmd := group("owner", "The organization API, as an owner (RENGA_URL and RENGA_API_KEY)")
	cmd.AddCommand(newCmdOwnerAccept(f, nil), newCmdOwnerMe(f, nil), newCmdActivityList(f, nil), newCmdSettings(f),
		newCmdIntakeKey(f), newCmdOrgIdentityProvider(f), newCmdSupportGrant(f), newCmdAgentList(f, nil), newCmdObservationList(f, nil), newCmdJob(f))
	return cmd
}

var errNoInvitationToken = usageError("give the invitation token as an argument or on stdin")

type ownerAcceptOptions struct {
	f *Factory

	// InvitationToken is empty when the token is to be read from stdin.
	InvitationToken string
	DisplayName     string
}

func newCmdOwnerAccept(f *Factory, runF func(*ownerAcceptOptions) error) *cobra.Command {
	opts := &ownerAcceptOptions{f: f}
	cmd := &cobra.Command{
		Use:   "accept [INVITATION_TOKEN] --display-name NAME",
		Short: "Accept an owner invitation and print your personal API key (once)",
		Long: `Accept an owner invitation and print your personal API key (once). Without INVITATION_TOKEN,
the token is read from stdin (preferred: an argument shows in ps and in the shell's history).`,
		Args: positional("[INVITATION_TOKEN]"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				if args[0] == "" {
					return errNoInvitationToken
				}
				opts.InvitationToken = args[0]
			}
			if runF != nil {
				return runF(opts)
			}
			return ownerAcceptRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.DisplayName, "display-name", "", "your name")
	_ = cmd.MarkFlagRequired("display-name")
	return cmd
}

func ownerAcceptRun(ctx context.Context, opts *ownerAcceptOptions) error {
	f := opts.f
	token := opts.InvitationToken
	if token == "" {
		b, err := io.ReadAll(io.LimitReader(f.Stdin, 1024))
		if err != nil {
			return err
		}
		token = strings.TrimSpace(string(b))
	}
	if token == "" {
		return errNoInvitationToken
	}
	c, err := f.OwnerClient(false)
	if err != nil {
		return err
	}
	r, err := c.AcceptInvitationWithResponse(ctx, client.InvitationAccept{Token: token, DisplayName: opts.DisplayName})
	if err := check(r, err); err != nil {
		return err
	}
	fmt.Fprintf(f.Stderr, "You are an owner of %s. Your personal API key is shown once; store it now (owner commands read it from RENGA_API_KEY).\n",
		r.JSON201.Organization.Slug)
	return f.print(r.Body, []string{"USER", "ORGANIZATION", "API KEY"}, func() [][]string {
		a := r.JSON201
		return [][]string{{a.User.Id + " " + string(a.User.Email), a.Organization.Id + " " + a.Organization.Slug, a.ApiKey}}
	})
}

type ownerMeOptions struct {
	f *Factory
}

func newCmdOwnerMe(f *Factory, runF func(*ownerMeOptions) error) *cobra.Command {
	opts := &ownerMeOptions{f: f}
	return &cobra.Command{
		Use:   "me",
		Short: "Show who you are and your organization",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(opts)
			}
			return ownerMeRun(cmd.Context(), opts)
		},
	}
}

func ownerMeRun(ctx context.Context, opts *ownerMeOptions) error {
	c, err := opts.f.OwnerClient(true)
	if err != nil {
		return err
	}
	r, err := c.GetMeWithResponse(ctx)
	if err := check(r, err); err != nil {
		return err
	}
	return opts.f.print(r.Body, []string{"USER", "EMAIL", "ORGANIZATION", "STATE", "ROLE"}, func() [][]string {
		m := r.JSON200
		return [][]string{{m.User.Id, string(m.User.Email), m.Organization.Id + " " + m.Organization.Slug, string(m.Organization.State), string(m.Role)}}
	})
}
