package domain

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"renga.dev/renga/server/db"
)

// Activity is one entry of an organization's Activity.
type Activity struct {
	ID            string    `db:"id"`
	Time          time.Time `db:"time"`
	RequestID     string    `db:"request_id"`
	ActorType     string    `db:"actor_type"`
	ActorID       string    `db:"actor_id"`
	ActorName     string    `db:"actor_name"`
	InvocationID  *string   `db:"invocation_id"`
	Operation     string    `db:"operation"`
	ChangedFields []string  `db:"changed_fields"`
}

// ListActivity pages through an organization's Activity, newest first.
func ListActivity(ctx context.Context, q db.DBTX, orgID, before string, limit int) ([]Activity, error) {
	rows, err := q.Query(ctx, `SELECT id, time, request_id, actor_type, actor_id, actor_name, invocation_id, operation, changed_fields
		FROM organization_activity WHERE organization_id = $1 AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`,
		orgID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Activity])
}
