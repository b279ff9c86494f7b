-- +goose Up
-- The person an audited operation concerns, by email, where no other target names them: the
-- support person a local recovery (recoverLocal, a release command) was made for. Its actor is
-- the local operator, so without it the audit log could not say for whom a break-glass sign-in
-- was made. Never a secret: the recovery's code is nowhere in the audit log.
ALTER TABLE audit_events ADD COLUMN target_email text;

-- +goose Down
ALTER TABLE audit_events DROP COLUMN target_email;
