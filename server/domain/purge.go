package domain

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"renga.dev/renga/server/db"
)

// SystemActorID is the actor of background work, such as the purge.
const SystemActorID = "system"

// StartDuePurge takes one deletion_pending organization whose deadline has passed and makes it
// purging, in its own transaction. A cancellation holding the row lock makes the purge skip
// the row (the next run sees it again if it is still due); a purge that took the lock first
// makes the cancellation see purging. It returns false when nothing is due.
func StartDuePurge(ctx context.Context, pool *pgxpool.Pool) (Organization, bool, error) {
	var o Organization
	found := false
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE organizations SET state = 'purging', purge_after = NULL,
				version = version + 1, updated_at = now()
			WHERE id = (SELECT id FROM organizations WHERE state = 'deletion_pending' AND purge_after <= now()
				ORDER BY purge_after LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING `+orgColumns)
		if err != nil {
			return err
		}
		o, err = pgx.CollectExactlyOneRow(rows, scanOrganization)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		return RecordAudit(ctx, tx, systemAudit("startOrganizationPurge", o, []string{"state", "purge_after"}))
	})
	return o, found, err
}

// PurgingOrganizations lists organizations a purge started on but did not finish (a crash).
func PurgingOrganizations(ctx context.Context, q db.DBTX) ([]Organization, error) {
	rows, err := q.Query(ctx, `SELECT `+orgColumns+` FROM organizations WHERE state = 'purging' ORDER BY id LIMIT 100`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanOrganization)
}

// purgeBatch bounds each deleting transaction, so a large organization never holds long locks.
const purgeBatch = 5000

// purgeObservationBatches removes organization orgID's rows of observation_batches, installation
// by installation, purgeBatch rows at a time in primary-key order, each step starting after the
// last key the previous one removed. The table's primary key leads with installation_id and no
// index covers organization_id (one more index for intake to write on every batch), so a search
// by organization_id reads the table from its start, every deployment's batches, and further on
// each step, through the rows the steps before removed. Every row names an installation of its
// organization (the intake statements and the importer check it), and installations go only with
// their organization, after this.
func purgeObservationBatches(ctx context.Context, pool *pgxpool.Pool, orgID string) error {
	rows, _ := pool.Query(ctx, `SELECT id FROM installations WHERE organization_id = $1 ORDER BY id`, orgID)
	installations, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, installation := range installations {
		after := ""
		for {
			var removed int
			var last *string
			if err := pool.QueryRow(ctx, `WITH gone AS (
				DELETE FROM observation_batches WHERE installation_id = $1 AND batch_id = ANY (ARRAY(
					SELECT batch_id FROM observation_batches WHERE installation_id = $1 AND batch_id > $2
					ORDER BY batch_id LIMIT $3))
				RETURNING batch_id)
				SELECT count(*), max(batch_id) FROM gone`, installation, after, purgeBatch).Scan(&removed, &last); err != nil {
				return err
			}
			if removed < purgeBatch || last == nil {
				break
			}
			after = *last
		}
	}
	return nil
}

// PurgeOrganization removes everything a purging organization owns: usage, observations and
// jobs in short batches, then the organization row, whose deletion cascades to memberships, API
// keys, invitations, pending mail, policy and settings. Users stay (they are shared). The audit
// log keeps the organization's ID, name snapshot and events; its Activity, a view of those
// events while the organization is here (migration 00018), goes with the row. Safe to run
// twice: it reports whether this run removed the organization.
func PurgeOrganization(ctx context.Context, pool *pgxpool.Pool, o Organization) (bool, error) {
	for _, table := range []string{"usage_counters", "usage_events", "observations",
		"observation_batches", "jobs"} {
		if table == "observation_batches" {
			if err := purgeObservationBatches(ctx, pool, o.ID); err != nil {
				return false, err
			}
			continue
		}
		for {
			tag, err := pool.Exec(ctx, `DELETE FROM `+table+` WHERE ctid = ANY (ARRAY(
				SELECT ctid FROM `+table+` WHERE organization_id = $1 LIMIT $2))`, o.ID, purgeBatch)
			if err != nil {
				return false, err
			}
			if tag.RowsAffected() < purgeBatch {
				break
			}
		}
	}
	removed := false
	err := db.WithTx(ctx, pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM organizations WHERE id = $1 AND state = 'purging'`, o.ID)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		removed = true
		return RecordAudit(ctx, tx, systemAudit("purgeOrganization", o, []string{"organization"}))
	})
	return removed, err
}

func systemAudit(operation string, o Organization, changed []string) AuditEvent {
	return AuditEvent{
		RequestID:                "system_" + db.NewID("job"),
		ActorType:                ActorSystem,
		ActorID:                  SystemActorID,
		ActorName:                SystemActorID,
		Operation:                operation,
		OrganizationID:           &o.ID,
		OrganizationNameSnapshot: &o.DisplayName,
		Outcome:                  OutcomeSucceeded,
		Status:                   200,
		ChangedFields:            changed,
		SourceAddress:            "local",
	}
}
