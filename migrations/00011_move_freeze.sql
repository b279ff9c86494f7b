-- +goose Up
-- An export for a move freezes its organization's agent writes from the moment it is requested
-- until the move is completed (then the organization is moved: 410) or the export is cancelled
-- or fails (then writes go on): what an agent sends meanwhile is refused with 503 moving and
-- stays in its queue, so nothing is accepted at the source after the archive's snapshot and
-- lost. The organization's row holds the freeze because every agent write locks that row: a
-- write either commits before the freeze (and is in the snapshot, taken after) or sees it.
ALTER TABLE transfers ADD COLUMN for_move boolean NOT NULL DEFAULT false;
ALTER TABLE organizations ADD COLUMN moving_transfer_id text;

-- +goose Down
ALTER TABLE organizations DROP COLUMN moving_transfer_id;
ALTER TABLE transfers DROP COLUMN for_move;
