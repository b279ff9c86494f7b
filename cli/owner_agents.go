package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// Owner commands for intake keys, agents, observations and jobs (RENGA_URL, RENGA_API_KEY).
func newOwnerAgentCommands(f *Factory) []*cobra.Command {
	keys := group("intake-key", "The organization's intake keys (for registering agents)")
	var name, key string
	create := &cobra.Command{
		Use:   "create --name NAME",
		Short: "Create an intake key and print it (once)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.CreateIntakeKeyWithResponse(cmd.Context(), &client.CreateIntakeKeyParams{IdempotencyKey: f.idempotencyKey(key)},
				client.IntakeKeyCreate{Name: name})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, []string{"ID", "NAME", "IDENTIFIER", "KEY"}, func() [][]string {
				k := r.JSON201
				return [][]string{{k.Id, k.Name, deref(k.Identifier), k.Key}}
			})
		},
	}
	create.Flags().StringVar(&name, "name", "", "what the key is for")
	create.Flags().StringVar(&key, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	_ = create.MarkFlagRequired("name")
	keyHeaders := []string{"ID", "NAME", "IDENTIFIER", "CREATED", "REVOKED"}
	keyRow := func(k client.IntakeKey) []string {
		revoked := ""
		if k.RevokedAt != nil {
			revoked = f.timeCell(*k.RevokedAt)
		}
		return []string{k.Id, k.Name, deref(k.Identifier), f.timeCell(k.CreatedAt), revoked}
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List intake keys and the deployment identifier new keys carry",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.ListIntakeKeysWithResponse(cmd.Context(), &client.ListIntakeKeysParams{})
			if err := check(r, err); err != nil {
				return err
			}
			if !f.JSON() {
				fmt.Fprintf(f.Stderr, "Deployment identifier: %s\n", orNone(r.JSON200.DeploymentIdentifier))
			}
			return f.print(r.Body, keyHeaders, func() [][]string {
				var rows [][]string
				for _, k := range r.JSON200.Items {
					rows = append(rows, keyRow(k))
				}
				return rows
			})
		},
	}
	var revokeKey string
	revoke := &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an intake key",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			p := &client.RevokeIntakeKeyParams{}
			if revokeKey != "" {
				p.IdempotencyKey = &revokeKey
				f.reportKey(revokeKey)
			}
			r, err := c.RevokeIntakeKeyWithResponse(cmd.Context(), args[0], p)
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, keyHeaders, func() [][]string { return [][]string{keyRow(*r.JSON200)} })
		},
	}
	revoke.Flags().StringVar(&revokeKey, "idempotency-key", "", "Idempotency-Key to send")
	var rotateKey string
	rotate := &cobra.Command{
		Use:   "rotate KEY_ID",
		Short: "Replace an intake key by a new one carrying the current identifier (printed once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.RotateIntakeKeyWithResponse(cmd.Context(), args[0], &client.RotateIntakeKeyParams{IdempotencyKey: f.idempotencyKey(rotateKey)})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, []string{"ID", "NAME", "IDENTIFIER", "KEY"}, func() [][]string {
				k := r.JSON201
				return [][]string{{k.Id, k.Name, deref(k.Identifier), k.Key}}
			})
		},
	}
	rotate.Flags().StringVar(&rotateKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	keys.AddCommand(create, list, revoke, rotate)

	agents := &cobra.Command{
		Use:   "agents",
		Short: "List the organization's agents",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.ListAgentsWithResponse(cmd.Context(), &client.ListAgentsParams{})
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
		},
	}
	observations := &cobra.Command{
		Use:   "observations INSTALLATION_ID",
		Short: "List an agent's observations, newest first",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.ListObservationsWithResponse(cmd.Context(), args[0], &client.ListObservationsParams{})
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
		},
	}
	jobs := group("job", "Jobs for the organization's agents")
	jobHeaders := []string{"ID", "INSTALLATION", "COMMAND", "STATE", "CREATED"}
	jobRow := func(j client.Job) []string {
		return []string{j.Id, j.InstallationId, j.Command, string(j.State), f.timeCell(j.CreatedAt)}
	}
	var jobKey string
	jobCreate := &cobra.Command{
		Use:   "create INSTALLATION_ID COMMAND",
		Short: "Queue a job for an agent",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.CreateJobWithResponse(cmd.Context(), &client.CreateJobParams{IdempotencyKey: f.idempotencyKey(jobKey)},
				client.JobCreate{InstallationId: args[0], Command: args[1]})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, jobHeaders, func() [][]string { return [][]string{jobRow(*r.JSON201)} })
		},
	}
	jobCreate.Flags().StringVar(&jobKey, "idempotency-key", "", "Idempotency-Key to send (default: a new one, printed on stderr)")
	jobList := &cobra.Command{
		Use:   "list",
		Short: "List jobs, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.OwnerClient(true)
			if err != nil {
				return err
			}
			r, err := c.ListJobsWithResponse(cmd.Context(), &client.ListJobsParams{})
			if err := check(r, err); err != nil {
				return err
			}
			return f.print(r.Body, jobHeaders, func() [][]string {
				var rows [][]string
				for _, j := range r.JSON200.Items {
					rows = append(rows, jobRow(j))
				}
				return rows
			})
		},
	}
	jobs.AddCommand(jobCreate, jobList)
	return []*cobra.Command{keys, agents, observations, jobs}
}

func orNone(s *string) string {
	if s == nil || *s == "" {
		return "(none)"
	}
	return *s
}
