package cli

import (
	"context"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// OwnerClient is the generated client for the organization (owner) API, authenticated with the
// personal API key in RENGA_API_KEY. Owner commands always go over HTTP: they are not release
// commands (the owner API is the organization's, not the operator's).
func (f *Factory) OwnerClient(needKey bool) (*client.ClientWithResponses, error) {
	base := f.remoteURL()
	if base == "" {
		return nil, usageError("set RENGA_URL to the deployment's URL")
	}
	key := f.Getenv("RENGA_API_KEY")
	if needKey && key == "" {
		return nil, usageError("set RENGA_API_KEY to your personal API key (renga owner accept prints it)")
	}
	return client.NewClientWithResponses(base, client.WithHTTPClient(&http.Client{Timeout: 60 * time.Second}),
		client.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			if needKey {
				r.Header.Set("Authorization", "Bearer "+key)
			}
			r.Header.Set("User-Agent", "renga-cli/"+Version)
			return nil
		}))
}

func newOwnerCommand(f *Factory) *cobra.Command {
	cmd := group("owner", "The organization API, as an owner (RENGA_URL and RENGA_API_KEY)")
	var name string
	accept := &cobra.Command{
		Use:   "accept [INVITATION_TOKEN] --display-name NAME",
		Short: "Accept an owner invitation and print your personal API key (once)",
		Long: `Accept an owner invitation and print your personal API key (once). Without INVITATION_TOKEN,
the token is read from stdin (preferred: an argument shows in ps and in the shell's history).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			token := ""
			if len(args) == 1 {
				token = args[0]
			} else {
				b, err := io.ReadAll(io.LimitReader(f.Stdin, 1024))
				if err != nil {
					return err
				}
				token = strings.TrimSpace(string(b))
			}
			if token == "" {
				return usageError("give the invitation token as an argument or on stdin")
			}
			c, err := f.OwnerClient(false)
			if err != nil {
				return err
			}
			r, err := c.AcceptInvitationWithResponse(cmd.Context(), client.InvitationAccept{Token: token, DisplayName: name})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, []string{"USER", "ORGANIZATION", "API KEY"}, func() [][]string {
				a := r.JSON201
				return [][]string{{a.User.Id + " " + string(a.User.Email), a.Organization.Id + " " + a.Organization.Slug, a.ApiKey}}
			})
		},
	}
	accept.Flags().StringVar(&name, "display-name", "", "your name")
	_ = accept.MarkFlagRequired("display-name")
	me := &cobra.Command{
		Use:   "me",
		Short: "Show who you are and your organization",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.GetMeWithResponse(cmd.Context())
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, []string{"USER", "EMAIL", "ORGANIZATION", "STATE", "ROLE"}, func() [][]string {
				m := r.JSON200
				return [][]string{{m.User.Id, string(m.User.Email), m.Organization.Id + " " + m.Organization.Slug, string(m.Organization.State), string(m.Role)}}
			})
		},
	}
	activity := &cobra.Command{
		Use:   "activity",
		Short: "Your organization's Activity, newest first (including the operators' changes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.ListActivityWithResponse(cmd.Context(), &client.ListActivityParams{})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, []string{"TIME", "ACTOR", "OPERATION", "CHANGED"}, func() [][]string {
				var rows [][]string
				for _, a := range r.JSON200.Items {
					rows = append(rows, []string{f.timeCell(a.Time), string(a.Actor.Type) + " " + a.Actor.NameSnapshot + " (" + a.Actor.Id + ")",
						a.Operation, strings.Join(a.ChangedFields, ",")})
				}
				return rows
			})
		},
	}
	settings := group("settings", "Your organization's security settings")
	settingsGet := &cobra.Command{
		Use:   "get",
		Short: "Print the settings and what the policy locks",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.GetSettingsWithResponse(cmd.Context())
			if err := check(r, err); err != nil {
				return err
			}
			return f.printJSON(r.Body)
		},
	}
	var file, ifMatch, key string
	settingsSet := &cobra.Command{
		Use:   "set -f settings.json --if-match VERSION",
		Short: "Replace the settings (locked ones can only keep their locked value)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			body, err := readInput(f, file)
			if err != nil {
				return err
			}
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			tag, err := f.ifMatch(ifMatch, func() (string, error) {
				r, err := c.GetSettingsWithResponse(ctx)
				if err := check(r, err); err != nil {
					return "", err
				}
				return r.HTTPResponse.Header.Get("ETag"), nil
			})
			if err != nil {
				return err
			}
			p := &client.PutSettingsParams{IfMatch: tag}
			if key != "" {
				p.IdempotencyKey = &key
				f.reportKey(key)
			}
			r, err := c.PutSettingsWithBodyWithResponse(ctx, p, "application/json", strings.NewReader(string(body)))
			if err := check(r, err); err != nil {
				return err
			}
			return f.printJSON(r.Body)
		},
	}
	settingsSet.Flags().StringVarP(&file, "file", "f", "", `settings document (JSON); "-" reads stdin`)
	settingsSet.Flags().StringVar(&ifMatch, "if-match", "", `version last read, or "current"`)
	settingsSet.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key to send")
	_ = settingsSet.MarkFlagRequired("file")
	_ = settingsSet.MarkFlagRequired("if-match")
	settings.AddCommand(settingsGet, settingsSet)
	cmd.AddCommand(accept, me, activity, settings)
	cmd.AddCommand(newOwnerAgentCommands(f)...)
	return cmd
}
