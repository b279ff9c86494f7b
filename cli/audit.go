package cli

import (
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"renga.dev/renga/gen/client"
)

type auditListOptions struct {
	organizationID, actorID, operation, outcome string
	since, until                                string
	pageSize                                    int
	pageToken                                   string
}

func newAuditCommand(f *Factory) *cobra.Command {
	cmd := group("audit", "The deployment audit log")
	o := &auditListOptions{}
	list := &cobra.Command{
		Use:   "list",
		Short: "List audit events, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			c, err := f.Client(ctx)
			if err != nil {
				return err
			}
			p := &client.ListAuditEventsParams{}
			set := func(dst **string, v string) {
				if v != "" {
					*dst = &v
				}
			}
			set(&p.OrganizationId, o.organizationID)
			set(&p.ActorId, o.actorID)
			set(&p.Operation, o.operation)
			set(&p.PageToken, o.pageToken)
			if o.outcome != "" {
				out := client.AuditOutcome(o.outcome)
				p.Outcome = &out
			}
			for _, t := range []struct {
				flag, v string
				dst     **time.Time
			}{{"--since", o.since, &p.Since}, {"--until", o.until, &p.Until}} {
				if t.v == "" {
					continue
				}
				ts, err := parseTimeFlag(t.v)
				if err != nil {
					return usageError("%s: %v", t.flag, err)
				}
				*t.dst = &ts
			}
			if o.pageSize > 0 {
				p.PageSize = &o.pageSize
			}
			resp, err := c.ListAuditEventsWithResponse(ctx, p)
			if err := check(resp, err); err != nil {
				return err
			}
			return f.print(resp.Body, []string{"TIME", "ACTOR", "OPERATION", "OUTCOME", "STATUS", "ORGANIZATION", "CHANGED"}, func() [][]string {
				var rows [][]string
				for _, e := range resp.JSON200.Items {
					actor := e.Actor.NameSnapshot + " (" + e.Actor.Id + ")"
					if e.Actor.InvocationId != nil {
						actor = e.Actor.Id + " " + *e.Actor.InvocationId
					}
					org := deref(e.Targets.OrganizationId)
					if n := deref(e.Targets.OrganizationNameSnapshot); n != "" {
						org += " (" + n + ")"
					}
					outcome := string(e.Outcome)
					if e.Error != nil {
						outcome += ": " + *e.Error
					}
					rows = append(rows, []string{f.timeCell(e.Time), actor, e.Operation, outcome, strconv.Itoa(e.Status), org,
						strings.Join(e.ChangedFields, ",")})
				}
				return rows
			})
		},
	}
	fl := list.Flags()
	fl.StringVar(&o.organizationID, "organization", "", "only events about this organization ID")
	fl.StringVar(&o.actorID, "actor", "", "only events by this token ID (or local-operator)")
	fl.StringVar(&o.operation, "operation", "", "only this operation, e.g. createOrganization")
	fl.StringVar(&o.outcome, "outcome", "", "only succeeded, failed or denied")
	fl.StringVar(&o.since, "since", "", "only events at or after this time (RFC 3339, or a duration like 24h meaning that long ago)")
	fl.StringVar(&o.until, "until", "", "only events before this time (RFC 3339 or a duration ago)")
	fl.IntVar(&o.pageSize, "page-size", 0, "events per page (1-500; default 100)")
	fl.StringVar(&o.pageToken, "page-token", "", "next_page_token of the previous page")
	cmd.AddCommand(list)
	return cmd
}

func parseTimeFlag(v string) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		return time.Now().Add(-d).UTC(), nil
	}
	return time.Parse(time.RFC3339, v)
}
