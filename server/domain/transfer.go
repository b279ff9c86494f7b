package domain

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"renga.dev/renga/server/db"
)

// Transfer is an export or an import of one organization: status and non-secret metadata.
type Transfer struct {
	ID             string           `db:"id"`
	OrganizationID string           `db:"organization_id"`
	Kind           string           `db:"kind"`
	ForMove        bool             `db:"for_move"`
	State          string           `db:"state"`
	RowsDone       int64            `db:"rows_done"`
	BytesDone      int64            `db:"bytes_done"`
	Counts         map[string]int64 `db:"counts"`
	SHA256         []byte           `db:"sha256"`
	SizeBytes      *int64           `db:"size_bytes"`
	Failure        *string          `db:"failure"`
	DestinationURL *string          `db:"destination_url"`
	CompletedAt    *time.Time       `db:"completed_at"`
	CreatedAt      time.Time        `db:"created_at"`
	UpdatedAt      time.Time        `db:"updated_at"`
}

// Transfer kinds and states.
const (
	TransferExport    = "export"
	TransferImport    = "import"
	TransferPending   = "pending"
	TransferRunning   = "running"
	TransferSucceeded = "succeeded"
	TransferFailed    = "failed"
	TransferCancelled = "cancelled"
)

// CapabilityPrefix starts every download capability.
const CapabilityPrefix = "renga_download_"

// DownloadLifetime is how long a download authorization can be used (at most 10 minutes; the
// table's constraint holds it there).
const DownloadLifetime = 10 * time.Minute

const transferColumns = `id, organization_id, kind, for_move, state, rows_done, bytes_done, counts, sha256, size_bytes,
	failure, destination_url, completed_at, created_at, updated_at`

func collectTransfer(rows pgx.Rows, err error) (Transfer, error) {
	if err != nil {
		return Transfer{}, err
	}
	t, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Transfer])
	return t, db.Translate(err)
}

// CreateExport records a pending export of an organization; the caller queues its job in the
// same transaction. Any organization but one being purged can be exported (a moved one too).
//
// An export forMove freezes the organization's agent writes (ErrMoving) from this
// transaction's commit until the move is completed or the export cancelled or failed: the
// organization's row names the export (moving_transfer_id). Every agent write holds that row
// (FOR SHARE, or FOR NO KEY UPDATE) and checks it, and this holds it FOR NO KEY UPDATE, so a
// write either committed before (and the archive's snapshot, taken after, has it) or sees the
// freeze. An organization has at most one export for a move in progress (ErrTransferState).
func CreateExport(ctx context.Context, q db.DBTX, orgID, requestedBy string, forMove bool) (Transfer, Organization, error) {
	o, err := lockOrganization(ctx, q, orgID)
	if err != nil {
		return Transfer{}, o, err
	}
	if o.State == StatePurging {
		return Transfer{}, o, ErrInvalidState
	}
	if forMove && o.MovingTransferID != nil {
		return Transfer{}, o, ErrTransferState
	}
	t, err := collectTransfer(q.Query(ctx, `INSERT INTO transfers (id, organization_id, kind, requested_by, for_move)
		VALUES ($1, $2, 'export', $3, $4) RETURNING `+transferColumns, db.NewID("xfr"), orgID, requestedBy, forMove))
	if err != nil || !forMove {
		return t, o, err
	}
	_, err = q.Exec(ctx, `UPDATE organizations SET moving_transfer_id = $2 WHERE id = $1`, orgID, t.ID)
	return t, o, err
}

// endFreeze lifts the freeze an export for a move put on its organization (when it is that
// export's).
func endFreeze(ctx context.Context, q db.DBTX, t Transfer) error {
	if !t.ForMove {
		return nil
	}
	_, err := q.Exec(ctx, `UPDATE organizations SET moving_transfer_id = NULL WHERE id = $1 AND moving_transfer_id = $2`,
		t.OrganizationID, t.ID)
	return err
}

// agentWritable is OrganizationWritable for an agent's request, with the move's freeze.
func agentWritable(state string, moving bool) error {
	if err := OrganizationWritable(state); err != nil {
		return err
	}
	if moving {
		return ErrMoving
	}
	return nil
}

// GetTransfer reads one transfer.
func GetTransfer(ctx context.Context, q db.DBTX, id string) (Transfer, error) {
	return collectTransfer(q.Query(ctx, `SELECT `+transferColumns+` FROM transfers WHERE id = $1`, id))
}

// ListTransfers pages through transfers, newest first, optionally of one organization.
func ListTransfers(ctx context.Context, q db.DBTX, orgID, before string, limit int) ([]Transfer, error) {
	rows, err := q.Query(ctx, `SELECT `+transferColumns+` FROM transfers
		WHERE ($1 = '' OR organization_id = $1) AND ($2 = '' OR id < $2) ORDER BY id DESC LIMIT $3`, orgID, before, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByName[Transfer])
}

// lockTransfer reads a transfer and its organization, both locked for the change.
func lockTransfer(ctx context.Context, q db.DBTX, id string) (Transfer, Organization, error) {
	t, err := GetTransfer(ctx, q, id)
	if err != nil {
		return t, Organization{}, err
	}
	o, err := lockOrganization(ctx, q, t.OrganizationID)
	if err != nil {
		return t, o, err
	}
	t, err = collectTransfer(q.Query(ctx, `SELECT `+transferColumns+` FROM transfers WHERE id = $1 FOR UPDATE`, id))
	return t, o, err
}

// CancelTransfer cancels an export: a pending or running one stops (its job notices), a
// succeeded one loses its archive; its download authorizations are void from then on (they
// need a succeeded transfer). Already cancelled is success with no change (changed is nil).
func CancelTransfer(ctx context.Context, q db.DBTX, id string) (Transfer, Organization, []string, error) {
	t, o, err := lockTransfer(ctx, q, id)
	if err != nil {
		return t, o, nil, err
	}
	switch {
	case t.Kind != TransferExport || t.CompletedAt != nil || t.State == TransferFailed:
		return t, o, nil, ErrTransferState
	case t.State == TransferCancelled:
		return t, o, nil, nil
	}
	t, err = collectTransfer(q.Query(ctx, `UPDATE transfers SET state = 'cancelled', sha256 = NULL, size_bytes = NULL,
		updated_at = now() WHERE id = $1 RETURNING `+transferColumns, id))
	if err != nil {
		return t, o, nil, err
	}
	if _, err := q.Exec(ctx, `DELETE FROM transfer_chunks WHERE transfer_id = $1`, id); err != nil {
		return t, o, nil, err
	}
	if err := endFreeze(ctx, q, t); err != nil {
		return t, o, nil, err
	}
	return t, o, []string{"state"}, nil
}

// CompleteTransfer marks a succeeded export's organization moved (RFD 23): the last step of a
// move, on the source. Completing a completed transfer is success with no change.
func CompleteTransfer(ctx context.Context, q db.DBTX, id string, destinationURL *string) (Transfer, Organization, []string, error) {
	t, o, err := lockTransfer(ctx, q, id)
	if err != nil {
		return t, o, nil, err
	}
	if t.CompletedAt != nil {
		return t, o, nil, nil
	}
	if t.Kind != TransferExport || t.State != TransferSucceeded {
		return t, o, nil, ErrTransferState
	}
	switch o.State {
	case StateActive, StateSuspended, StateMoved:
	default:
		return t, o, nil, ErrInvalidState
	}
	t, err = collectTransfer(q.Query(ctx, `UPDATE transfers SET completed_at = now(), destination_url = $2, updated_at = now()
		WHERE id = $1 RETURNING `+transferColumns, id, destinationURL))
	if err != nil {
		return t, o, nil, err
	}
	changed := []string{"transfer"}
	// Moved from now on (410), which supersedes the freeze.
	if err := endFreeze(ctx, q, t); err != nil {
		return t, o, nil, err
	}
	if o.State != StateMoved {
		if o, err = setState(ctx, q, o.ID, StateMoved, nil, nil); err != nil {
			return t, o, nil, err
		}
		changed = append(changed, "state")
	}
	return t, o, changed, nil
}

// AuthorizeDownload creates a single-use capability for a succeeded export's archive, bound
// to the token tokenID and valid for DownloadLifetime. Only its hash is stored.
func AuthorizeDownload(ctx context.Context, q db.DBTX, transferID, tokenID string) (Transfer, Organization, string, time.Time, error) {
	t, o, err := lockTransfer(ctx, q, transferID)
	if err != nil {
		return t, o, "", time.Time{}, err
	}
	if t.Kind != TransferExport || t.State != TransferSucceeded {
		return t, o, "", time.Time{}, ErrTransferState
	}
	capability := CapabilityPrefix + NewSecret()
	var expires time.Time
	err = q.QueryRow(ctx, `INSERT INTO transfer_download_authorizations (id, transfer_id, capability_hash, token_id, expires_at)
		VALUES ($1, $2, $3, $4, now() + $5::interval) RETURNING expires_at`,
		db.NewID("dla"), transferID, HashSecret(capability), tokenID, DownloadLifetime).Scan(&expires)
	return t, o, capability, expires, err
}

// UseDownload spends a capability: it must be the transfer's, unused, unexpired, bound to
// tokenID, and the transfer a succeeded export. One statement, so two downloads with one
// capability cannot both pass.
func UseDownload(ctx context.Context, q db.DBTX, transferID, capability, tokenID string) (Transfer, error) {
	if _, err := GetTransfer(ctx, q, transferID); err != nil {
		return Transfer{}, err
	}
	t, err := collectTransfer(q.Query(ctx, `WITH used AS (
			UPDATE transfer_download_authorizations a SET used_at = now()
			FROM transfers t
			WHERE a.capability_hash = $1 AND a.transfer_id = $2 AND a.token_id = $3 AND a.used_at IS NULL
			  AND a.expires_at > now() AND t.id = a.transfer_id AND t.kind = 'export' AND t.state = 'succeeded'
			RETURNING a.transfer_id)
		SELECT `+transferColumns+` FROM transfers WHERE id = (SELECT transfer_id FROM used)`,
		HashSecret(capability), transferID, tokenID))
	if errors.Is(err, ErrNotFound) {
		return t, ErrCapabilityInvalid
	}
	return t, err
}

// ArchiveChunk reads chunk seq of a transfer's archive.
func ArchiveChunk(ctx context.Context, q db.DBTX, transferID string, seq int) ([]byte, error) {
	var data []byte
	err := q.QueryRow(ctx, `SELECT data FROM transfer_chunks WHERE transfer_id = $1 AND seq = $2`, transferID, seq).Scan(&data)
	return data, db.Translate(err)
}
