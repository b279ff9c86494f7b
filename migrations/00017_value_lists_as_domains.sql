-- +goose Up
-- The value lists of an organization's state and of an audit event's actor type and outcome
-- become domains over text, in place of the tables' CHECK constraints. PostgreSQL reads a
-- table's CHECK constraints from their stored text again at every statement that writes a row
-- of it (the executor parses each into an expression per statement); a domain's constraint is
-- read once per connection, from its type cache. Every audited request inserts an audit event,
-- and every create or change of an organization writes its row: under callgrind
-- (bench/pgcallgrind.sh), about a tenth of PostgreSQL's instructions for a create went to those
-- parses. The columns keep their values and their checks: a value outside a list is refused
-- (23514, check_violation) as before, now naming the domain's constraint. A later change to a
-- list is an ALTER DOMAIN (DROP CONSTRAINT, then ADD CONSTRAINT ... CHECK). The check that
-- spans two columns (organizations_purge_after) stays on its table. A statement that uses one
-- parameter both as such a column's value and as text elsewhere casts it ($2::text in both
-- places): PostgreSQL would deduce the domain for one use and text for the other (42P08).
--
-- Neither table is rewritten: a column whose type becomes a domain with no constraint keeps its
-- storage and indexes (a domain with one would make PostgreSQL rewrite the table, audit_events
-- being the deployment's longest but for observations); the domains' constraints are added
-- after, which checks the rows without rewriting them, before the tables' are dropped.
CREATE DOMAIN organization_state AS text;
CREATE DOMAIN audit_actor_type AS text;
CREATE DOMAIN audit_outcome AS text;
ALTER TABLE organizations ALTER COLUMN state TYPE organization_state;
ALTER TABLE audit_events ALTER COLUMN actor_type TYPE audit_actor_type,
    ALTER COLUMN outcome TYPE audit_outcome;
ALTER DOMAIN organization_state ADD CONSTRAINT organization_state_check
    CHECK (VALUE IN ('active', 'suspended', 'deletion_pending', 'purging', 'moved'));
ALTER DOMAIN audit_actor_type ADD CONSTRAINT audit_actor_type_check
    CHECK (VALUE IN ('operator_token', 'local_operator', 'system', 'user', 'intake_key', 'support_person'));
ALTER DOMAIN audit_outcome ADD CONSTRAINT audit_outcome_check
    CHECK (VALUE IN ('succeeded', 'failed', 'denied'));
ALTER TABLE organizations DROP CONSTRAINT organizations_state_check;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    DROP CONSTRAINT audit_events_outcome_check;

-- +goose Down
ALTER TABLE audit_events ALTER COLUMN actor_type TYPE text, ALTER COLUMN outcome TYPE text,
    ADD CONSTRAINT audit_events_actor_type_check
        CHECK (actor_type IN ('operator_token', 'local_operator', 'system', 'user', 'intake_key', 'support_person')),
    ADD CONSTRAINT audit_events_outcome_check CHECK (outcome IN ('succeeded', 'failed', 'denied'));
ALTER TABLE organizations ALTER COLUMN state TYPE text,
    ADD CONSTRAINT organizations_state_check
        CHECK (state IN ('active', 'suspended', 'deletion_pending', 'purging', 'moved'));
DROP DOMAIN audit_outcome;
DROP DOMAIN audit_actor_type;
DROP DOMAIN organization_state;
