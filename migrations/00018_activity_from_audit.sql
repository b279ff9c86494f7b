-- +goose Up
-- An organization's Activity is read from the audit log, where every entry of it already was:
-- each change to an organization (and each support person's read of it) wrote its audit event
-- and, in the same statement, a copy of the event's summary into organization_activity. The
-- copy was the most a create wrote beyond pgbench C's rows: under callgrind
-- (bench/pgcallgrind.sh), the create's statements without it count 18 % fewer PostgreSQL
-- instructions (its heap tuple, two text indexes and the foreign key's check, which runs a query
-- of its own). An audit event now says whether it is in its organization's Activity (activity),
-- and organization_activity is a view of those events whose organization is still here, so
-- Activity still goes with its organization when the organization is purged while the audit log
-- keeps its events, as it always did. An entry's ID is its audit event's (evt_...); an Activity
-- page token from before this migration (act_...) is refused as invalid_page_token.
--
-- Every Activity row was written in its audit event's statement, with the event's time, request
-- ID and operation: those find the event. Adding a column with a constant default does not
-- rewrite audit_events.
ALTER TABLE audit_events ADD COLUMN activity boolean NOT NULL DEFAULT false;
UPDATE audit_events e SET activity = true FROM organization_activity a
    WHERE e.organization_id = a.organization_id AND e.request_id = a.request_id
      AND e.operation = a.operation AND e.time = a.time AND e.outcome = 'succeeded';
DROP TABLE organization_activity;
-- Nothing writes through this view: a DELETE through it would delete audit events.
CREATE VIEW organization_activity AS
    SELECT e.id, e.organization_id, e.time, e.request_id, e.actor_type, e.actor_id, e.actor_name,
           e.invocation_id, e.operation, e.changed_fields
    FROM audit_events e
    WHERE e.activity AND EXISTS (SELECT 1 FROM organizations o WHERE o.id = e.organization_id);

-- +goose Down
-- The table again, from the view; an entry's ID is its event's with the table's prefix (the same
-- time-ordered suffix, so pages keep their order).
ALTER VIEW organization_activity RENAME TO organization_activity_view;
CREATE TABLE organization_activity (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    time            timestamptz NOT NULL,
    request_id      text NOT NULL,
    actor_type      text NOT NULL,
    actor_id        text NOT NULL,
    actor_name      text NOT NULL,
    invocation_id   text,
    operation       text NOT NULL,
    changed_fields  text[] NOT NULL DEFAULT '{}'
);
INSERT INTO organization_activity (id, organization_id, time, request_id, actor_type, actor_id,
        actor_name, invocation_id, operation, changed_fields)
    SELECT 'act_' || substr(id, strpos(id, '_') + 1), organization_id, time, request_id, actor_type,
           actor_id, actor_name, invocation_id, operation, changed_fields
    FROM organization_activity_view;
CREATE INDEX organization_activity_org ON organization_activity (organization_id, id);
DROP VIEW organization_activity_view;
ALTER TABLE audit_events DROP COLUMN activity;
