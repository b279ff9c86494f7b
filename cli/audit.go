package cli

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

// newCmdAudit is `renga audit`: the deployment audit log.
func newCmdAudit(f *Factory) *cobra.Command {
	cmd := group("audit", "The deployment audit log")
	cmd.AddCommand(newCmdAuditList(f, nil))
	return cmd
}

type auditListOptions struct {
	f *Factory

	OrganizationID string
	ActorID        string
	Operation      string
	Outcome        string
	Since, Until   *time.Time
	PageSize       int
	PageToken      string
}

func newCmdAuditList(f *Factory, runF func(*auditListOptions) error) *cobra.Command {
	opts := &auditListOptions{f: f}
	var since, until string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List audit events, newest first",
		Args:  positional(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.Since, err = parseTimeFlag("--since", since); err != nil {
				return err
			}
			if opts.Until, err = parseTimeFlag("--until", until); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return auditListRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.OrganizationID, "organization", "", "only events about this organization ID")
	fl.StringVar(&opts.ActorID, "actor", "", "only events by this token ID (or local-operator)")
	fl.StringVar(&opts.Operation, "operation", "", "only this operation, e.g. createOrganization")
	fl.StringVar(&opts.Outcome, "outcome", "", "only succeeded, failed or denied")
	fl.StringVar(&since, "since", "", "only events at or after this time (RFC 3339, or a duration like 24h meaning that long ago)")
	fl.StringVar(&until, "until", "", "only events before this time (RFC 3339 or a duration ago)")
	fl.IntVar(&opts.PageSize, "page-size", 0, "events per page (1-500; default 100)")
	fl.StringVar(&opts.PageToken, "page-token", "", "next_page_token of the previous page")
	return cmd
}

// parseTimeFlag reads a time flag: RFC 3339, or a duration meaning that long ago. An empty
// value is no time.
func parseTimeFlag(flag, v string) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		t := time.Now().Add(-d).UTC()
		return &t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, usageError("%s: %v", flag, err)
	}
	return &t, nil
}

func auditListRun(ctx context.Context, opts *auditListOptions) error {
	f := opts.f
	c, err := f.Client(ctx)
	if err != nil {
		return err
	}
	p := &client.ListAuditEventsParams{Since: opts.Since, Until: opts.Until}
	set := func(dst **string, v string) {
		if v != "" {
			*dst = &v
		}
	}
	set(&p.OrganizationId, opts.OrganizationID)
	set(&p.ActorId, opts.ActorID)
	set(&p.Operation, opts.Operation)
	set(&p.PageToken, opts.PageToken)
	if opts.Outcome != "" {
		out := client.AuditOutcome(opts.Outcome)
		p.Outcome = &out
	}
	if opts.PageSize > 0 {
		p.PageSize = &opts.PageSize
	}
	resp, err := c.ListAuditEventsWithResponse(ctx, p)
	if err := check(resp, err); err != nil {
		return err
	}
	headers := []string{"TIME", "ACTOR", "OPERATION", "OUTCOME", "STATUS", "TARGET", "CHANGED"}
	return f.print(resp.Body, headers, func() [][]string {
		var rows [][]string
		for _, e := range resp.JSON200.Items {
			rows = append(rows, f.auditRow(e))
		}
		return rows
	})
}

func (f *Factory) auditRow(e client.AuditEvent) []string {
	actor := e.Actor.NameSnapshot + " (" + e.Actor.Id + ")"
	if e.Actor.InvocationId != nil {
		actor = e.Actor.Id + " " + *e.Actor.InvocationId
	}
	outcome := string(e.Outcome)
	if e.Error != nil {
		outcome += ": " + *e.Error
	}
	return []string{f.timeCell(e.Time), actor, e.Operation, outcome, strconv.Itoa(e.Status), auditTarget(e.Targets),
		strings.Join(e.ChangedFields, ",")}
}

// auditTarget is what an event concerns, each target it names: the organization (with its name
// then), the operator token, the identity provider, the person by email.
func auditTarget(t client.AuditTargets) string {
	var parts []string
	if org := deref(t.OrganizationId); org != "" {
		if n := deref(t.OrganizationNameSnapshot); n != "" {
			org += " (" + n + ")"
		}
		parts = append(parts, org)
	}
	for _, id := range []*string{t.TokenId, t.ProviderId, t.Email} {
		if v := deref(id); v != "" {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, " ")
}
