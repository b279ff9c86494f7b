-- +goose Up
-- Observations and their deduplication log no longer reference installations by foreign key.
-- Each inserted row's key check ran a query that took a KEY SHARE lock on its installation row
-- (a lock written into that row: a WAL record per batch), about a tenth of intake's database
-- CPU and of an import's. What the keys guaranteed is kept without them:
--   - a row names an installation of its organization when written: the intake statements
--     check it (domain.acceptBatches, domain.acceptBatch) and an import refuses a row of an
--     installation its archive did not bring (domain.importer);
--   - an installation is removed only with its organization, by the purge, which first deletes
--     the organization's observations and batches by organization_id; intake stores nothing
--     once the organization has left 'active', and it holds the organization row FOR SHARE
--     while it writes, so the state cannot change under a statement that is storing
--     (TestPurgeRacingIntakeLeavesNothing).
ALTER TABLE observations DROP CONSTRAINT observations_installation_id_fkey;
ALTER TABLE observation_batches DROP CONSTRAINT observation_batches_installation_id_fkey;

-- +goose Down
DELETE FROM observations o WHERE NOT EXISTS (SELECT 1 FROM installations i WHERE i.id = o.installation_id);
DELETE FROM observation_batches b WHERE NOT EXISTS (SELECT 1 FROM installations i WHERE i.id = b.installation_id);
ALTER TABLE observations ADD CONSTRAINT observations_installation_id_fkey
    FOREIGN KEY (installation_id) REFERENCES installations (id) ON DELETE CASCADE;
ALTER TABLE observation_batches ADD CONSTRAINT observation_batches_installation_id_fkey
    FOREIGN KEY (installation_id) REFERENCES installations (id) ON DELETE CASCADE;
