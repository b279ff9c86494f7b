-- +goose Up
-- Owners' and agents' attempted changes are audited too.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check
    CHECK (actor_type IN ('operator_token', 'local_operator', 'system', 'user', 'intake_key'));

-- Usage belongs to its organization: whatever is counted while a purge runs goes with it.
DELETE FROM usage_counters c WHERE NOT EXISTS (SELECT 1 FROM organizations o WHERE o.id = c.organization_id);
DELETE FROM usage_events e WHERE NOT EXISTS (SELECT 1 FROM organizations o WHERE o.id = e.organization_id);
ALTER TABLE usage_counters ADD CONSTRAINT usage_counters_organization
    FOREIGN KEY (organization_id) REFERENCES organizations (id) ON DELETE CASCADE;
ALTER TABLE usage_events ADD CONSTRAINT usage_events_organization
    FOREIGN KEY (organization_id) REFERENCES organizations (id) ON DELETE CASCADE;

-- +goose Down
ALTER TABLE usage_events DROP CONSTRAINT usage_events_organization;
ALTER TABLE usage_counters DROP CONSTRAINT usage_counters_organization;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check CHECK (actor_type IN ('operator_token', 'local_operator', 'system'));
