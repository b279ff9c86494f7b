package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
	"renga.dev/renga/server/domain/policyfield"
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
		Args:  positional("ORGANIZATION_ID"),
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
		Args: positional("ORGANIZATION_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.OrganizationID = args[0]
			if runF != nil {
				return runF(opts)
			}
			return policySetRun(cmd.Context(), opts)
		},
	}
	opts.document().register(cmd, `policy document (JSON); "-" reads stdin`, `version last read (3), or "current"`)
	return cmd
}

func (o *policySetOptions) document() documentFlags {
	return documentFlags{File: &o.File, IfMatch: &o.IfMatch, IdempotencyKey: &o.IdempotencyKey}
}

func policySetRun(ctx context.Context, opts *policySetOptions) error {
	f := opts.f
	r, err := putDocument(ctx, f, opts.document(),
		func() (*client.ClientWithResponses, error) { return f.Client(ctx) },
		func(ctx context.Context, c *client.ClientWithResponses) (*client.GetPolicyResponse, error) {
			return c.GetPolicyWithResponse(ctx, opts.OrganizationID)
		},
		func(ctx context.Context, c *client.ClientWithResponses, tag string, key *string, body io.Reader) (*client.PutPolicyResponse, error) {
			p := &client.PutPolicyParams{IfMatch: tag, IdempotencyKey: key}
			return c.PutPolicyWithBodyWithResponse(ctx, opts.OrganizationID, p, "application/json", body)
		})
	if err != nil {
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
		Args:  positional("ORGANIZATION_ID"),
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
	if opts.f.JSON() {
		return opts.f.printJSON(r.Body)
	}
	rows, err := effectivePolicyRows(r.Body)
	if err != nil {
		return fmt.Errorf("read the effective policy: %w", err)
	}
	return opts.f.printTable([]string{"NAME", "VALUE", "SOURCE"}, rows)
}

// effectivePolicyRows is one row per value of the policy in force, with where it comes from, in
// the order of the table of policy fields: limits, entitlements, then settings.
func effectivePolicyRows(body []byte) ([][]string, error) {
	type sourced struct {
		Value  json.RawMessage `json:"value"`
		Source string          `json:"source"`
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var rows [][]string
	for _, s := range []policyfield.Section{policyfield.Limits, policyfield.Entitlements, policyfield.LockedSettings} {
		info, _ := policyfield.SectionOf(s)
		var section map[string]sourced
		if raw := top[info.EffectiveName]; raw != nil {
			if err := json.Unmarshal(raw, &section); err != nil {
				return nil, err
			}
		}
		for _, f := range policyfield.In(s) {
			v := section[f.Path.Name()]
			value := string(v.Value)
			if f.Kind == policyfield.StringSet {
				var list []string
				if err := json.Unmarshal(v.Value, &list); err != nil {
					return nil, err
				}
				value = strings.Join(list, ",")
			}
			rows = append(rows, []string{info.EffectiveName + "." + f.Path.Name(), value, v.Source})
		}
	}
	return rows, nil
}
