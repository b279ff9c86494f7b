package domain

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// Actor types.
const (
	ActorOperatorToken = "operator_token"
	ActorLocalOperator = "local_operator"
	ActorSystem        = "system"
	ActorUser          = "user"
	ActorIntakeKey     = "intake_key"
	ActorInstallation  = "installation"
	// ActorSupportPerson is a support person reading an organization under its owners' grant
	// (the support console); the actor ID is their session's.
	ActorSupportPerson = "support_person"
	// LocalOperatorID is the actor ID of release commands; the invocation ID tells runs apart.
	LocalOperatorID = "local-operator"
)

// Audit outcomes.
const (
	OutcomeSucceeded = "succeeded"
	OutcomeFailed    = "failed"
	OutcomeDenied    = "denied"
)

// AuditEvent is one attempted mutation. Its fields are the allowlist: nothing else is stored.
type AuditEvent struct {
	ID                       string    `db:"id"`
	Time                     time.Time `db:"time"`
	RequestID                string    `db:"request_id"`
	ActorType                string    `db:"actor_type"`
	ActorID                  string    `db:"actor_id"`
	ActorName                string    `db:"actor_name"`
	InvocationID             *string   `db:"invocation_id"`
	Operation                string    `db:"operation"`
	OrganizationID           *string   `db:"organization_id"`
	OrganizationNameSnapshot *string   `db:"organization_name_snapshot"`
	TokenID                  *string   `db:"token_id"`
	ProviderID               *string   `db:"provider_id"`
	// TargetEmail: the person the operation concerns, where no other target names them (the
	// support person a local recovery was made for).
	TargetEmail   *string  `db:"target_email"`
	Outcome       string   `db:"outcome"`
	Status        int      `db:"status"`
	Error         *string  `db:"error"`
	ChangedFields []string `db:"changed_fields"`
	SourceAddress string   `db:"source_address"`
	// Read: a support person's read, which goes to the organization's Activity though it
	// changed nothing. Not a column.
	Read bool `db:"-"`
}

const auditColumns = `id, time, request_id, actor_type, actor_id, actor_name, invocation_id, operation,
	organization_id, organization_name_snapshot, token_id, outcome, status, error, changed_fields, source_address,
	provider_id, target_email`

// auditSQL is AuditStatement's statement: the audit event, which says ($19) whether it is in
// its organization's Activity (the organization_activity view, migration 00018).
const auditSQL = `INSERT INTO audit_events (` + auditColumns + `, activity)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`

// RecordAudit stores e (a successful change to an organization is in its Activity by that).
// Call it in the mutation's transaction.
func RecordAudit(ctx context.Context, q db.DBTX, e AuditEvent) error {
	sql, args := AuditStatement(e)
	_, err := q.Exec(ctx, sql, args...)
	return err
}

// AuditStatement is RecordAudit's statement, for callers that batch it with others.
func AuditStatement(e AuditEvent) (string, []any) {
	if e.ID == "" {
		e.ID = db.NewID("evt")
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if e.ChangedFields == nil {
		e.ChangedFields = []string{}
	}
	// Activity is what changed the organization: an attempt that changed nothing (suspending a
	// suspended organization) is in the audit log only.
	// A support person's read is in the Activity too: owners see who read what, and when.
	activity := e.Outcome == OutcomeSucceeded && e.OrganizationID != nil && (len(e.ChangedFields) > 0 || e.Read)
	return auditSQL,
		[]any{e.ID, e.Time, e.RequestID, e.ActorType, e.ActorID, e.ActorName, e.InvocationID, e.Operation,
			e.OrganizationID, e.OrganizationNameSnapshot, e.TokenID, e.Outcome, e.Status, e.Error,
			e.ChangedFields, e.SourceAddress, e.ProviderID, e.TargetEmail, activity}
}

// AuditFilter selects a page of audit events, newest first.
type AuditFilter struct {
	OrganizationID, ActorID, Operation, Outcome string
	Since, Until                                *time.Time
	Before                                      string // last ID of the previous page
	Limit                                       int
}

// ListAuditEvents returns up to Limit events in descending ID order.
func ListAuditEvents(ctx context.Context, q db.DBTX, f AuditFilter) ([]AuditEvent, error) {
	rows, err := q.Query(ctx, `SELECT `+auditColumns+` FROM audit_events
		WHERE ($1 = '' OR organization_id = $1) AND ($2 = '' OR actor_id = $2) AND ($3 = '' OR operation = $3)
		  AND ($4 = '' OR outcome = $4) AND ($5::timestamptz IS NULL OR time >= $5)
		  AND ($6::timestamptz IS NULL OR time < $6) AND ($7 = '' OR id < $7)
		ORDER BY id DESC LIMIT $8`,
		f.OrganizationID, f.ActorID, f.Operation, f.Outcome, f.Since, f.Until, f.Before, f.Limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[AuditEvent])
}

// ReleaseAudit is the audit event of a release-only command (one that calls domain functions
// outside the API, such as minting a token), by the local operator.
func ReleaseAudit(invocationID, operation, tokenID, outcome string, changed []string) AuditEvent {
	e := AuditEvent{
		RequestID:     "release_" + invocationID,
		ActorType:     ActorLocalOperator,
		ActorID:       LocalOperatorID,
		ActorName:     LocalOperatorID,
		InvocationID:  &invocationID,
		Operation:     operation,
		Outcome:       outcome,
		Status:        200,
		ChangedFields: changed,
		SourceAddress: "local",
	}
	if outcome != OutcomeSucceeded {
		e.Status = 400
	}
	if tokenID != "" {
		e.TokenID = &tokenID
	}
	return e
}
