package cli

import (
	"bytes"
	"context"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdPolicy is `renga policy`: organizations' policy documents.
func newCmdPolicy(f *Factory) *cobra.Command {
	cmd := group("policy", "Organization policy documents")
	cmd.AddCommand(newCmdPolicyGet(f, nil), newCmdPolicySet(f, nil), newCmdPolicyEffective(f, nil))
	return cmd
}

type policyGetOptions struct {
	f *Factory

	OrganizationID string
}

func newCmdPolicyGet(f *Factory, runF func(*policyGetOptions) error) *cobra.Command {
	opts := &policyGetOptions{f: f}
	return &cobra.Command{
		Use:   "get ORGANIZATION_ID",
		Short: "Print an organization's policy document (its version is the If-Match for set)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return policyGetRun(cmd.Context(), opts)
		},
	}
}

func policyGetRun(ctx context.Context, opts *policyGetOptions) error {
	c, err := opts.f.Client(ctx)
	if err != nil {
		return err
	}
	r, err := c.GetPolicyWithResponse(ctx, opts.OrganizationID)
	if err := check(r, err); err != nil {
		return err
	}
	// A policy is a document: JSON whatever the output format.
	return opts.f.printJSON(r.Body)
}

type policySetOptions struct {
	f *Factory

	OrganizationID string
	File           string
	IfMatch        string
	IdempotencyKey string
}

func newCmdPolicySet(f *Factory, runF func(*policySetOptions) error) *cobra.Command {
	opts := &policySetOptions{f: f}
	cmd := &cobra.Command{
		Use:   "set ORGANIZATION_ID -f policy.json --if-match VERSION",
		Short: "Replace an organization's policy document",
		Long: `Replace an organization's policy document with the JSON in a file ("-" for stdin). Fields left
out inherit the deployment's defaults. --if-match names the version you read (policy get); pass
--if-match current to use whatever version is stored now, overwriting changes you have not seen.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return policySetRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.File, "file", "f", "", `policy document (JSON); "-" reads stdin`)
	cmd.Flags().StringVar(&opts.IfMatch, "if-match", "", `version last read (3), or "current"`)
	cmd.Flags().StringVar(&opts.IdempotencyKey, "idempotency-key", "", "Idempotency-Key to send")
	_ = cmd.MarkFlagRequired("file")
	_ = cmd.MarkFlagRequired("if-match")
	return cmd
}

func policySetRun(ctx context.Context, opts *policySetOptions) error {
	f := opts.f
	body, err := readInput(f, opts.File)
	if err != nil {
		return err
	}
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	tag, err := f.ifMatch(opts.IfMatch, func() (string, error) {
		r, err := c.GetPolicyWithResponse(ctx, opts.OrganizationID)
		if err := check(r, err); err != nil {
			return "", err
		}
		return r.HTTPResponse.Header.Get("ETag"), nil
	})
	if err != nil {
		return err
	}
	p := &client.PutPolicyParams{IfMatch: tag, IdempotencyKey: f.optionalIdempotencyKey(opts.IdempotencyKey)}
	r, err := c.PutPolicyWithBodyWithResponse(ctx, opts.OrganizationID, p, "application/json", bytes.NewReader(body))
	if err := check(r, err); err != nil {
		return err
	}
	return f.printJSON(r.Body)
}

type policyEffectiveOptions struct {
	f *Factory

	OrganizationID string
}

func newCmdPolicyEffective(f *Factory, runF func(*policyEffectiveOptions) error) *cobra.Command {
	opts := &policyEffectiveOptions{f: f}
	return &cobra.Command{
		Use:   "effective ORGANIZATION_ID",
		Short: "Show the policy in force and where each value comes from",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return policyEffectiveRun(cmd.Context(), opts)
		},
	}
}

func policyEffectiveRun(ctx context.Context, opts *policyEffectiveOptions) error {
	c, err := opts.f.Client(ctx)
	if err != nil {
		return err
	}
	r, err := c.GetEffectivePolicyWithResponse(ctx, opts.OrganizationID)
	if err := check(r, err); err != nil {
		return err
	}
	return opts.f.print(r.Body, []string{"NAME", "VALUE", "SOURCE"}, func() [][]string { return effectivePolicyRows(r.JSON200) })
}

// effectivePolicyRows is one row per value of the policy in force, with where it comes from.
func effectivePolicyRows(e *client.EffectivePolicy) [][]string {
	i := func(n string, v client.EffectiveInteger) []string {
		return []string{n, strconv.FormatInt(v.Value, 10), string(v.Source)}
	}
	b := func(n string, v client.EffectiveBoolean) []string {
		return []string{n, strconv.FormatBool(v.Value), string(v.Source)}
	}
	return [][]string{
		i("limits.max_agents", e.Limits.MaxAgents), i("limits.max_users", e.Limits.MaxUsers),
		i("limits.intake_bytes_per_day", e.Limits.IntakeBytesPerDay),
		i("limits.observation_retention_days", e.Limits.ObservationRetentionDays),
		i("limits.max_jobs_per_day", e.Limits.MaxJobsPerDay),
		b("entitlements.organization_identity_providers", e.Entitlements.OrganizationIdentityProviders),
		b("entitlements.jobs", e.Entitlements.Jobs), b("entitlements.owner_export", e.Entitlements.OwnerExport),
		b("settings.require_sso", e.Settings.RequireSso), b("settings.require_mfa", e.Settings.RequireMfa),
		i("settings.session_max_age_hours", e.Settings.SessionMaxAgeHours),
		{"settings.allowed_email_domains", strings.Join(e.Settings.AllowedEmailDomains.Value, ","), string(e.Settings.AllowedEmailDomains.Source)},
	}
}
