-- +goose Up
-- Support access (RFD 22, DESIGN §5–§6). The support source is one document: who the
-- operator's support people are (a deployment identity provider and the emails or the email
-- domain it vouches for). provider_id has no foreign key: an environment provider has no row.
CREATE TABLE support_source (
    singleton            boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    enabled              boolean NOT NULL DEFAULT false,
    provider_id          text,
    allowed_emails       text[] NOT NULL DEFAULT '{}',
    allowed_email_domain text,
    version              bigint NOT NULL DEFAULT 1,
    updated_at           timestamptz NOT NULL DEFAULT now(),
    CHECK (NOT enabled OR (provider_id IS NOT NULL AND (cardinality(allowed_emails) > 0 OR allowed_email_domain IS NOT NULL)))
);
INSERT INTO support_source DEFAULT VALUES;

-- A grant an organization's owners make: time-boxed, read-only access for the deployment's
-- support people (or one of them, by email). Only owners create or revoke one.
CREATE TABLE support_grants (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    support_email   text CHECK (support_email = lower(support_email)),
    granted_by      text NOT NULL,
    granted_by_email text NOT NULL,
    granted_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    revoked_at      timestamptz,
    revoked_by      text,
    CHECK (expires_at > granted_at)
);
CREATE INDEX support_grants_organization ON support_grants (organization_id, id);

-- Support people read inventory: their reads are audited and in the organization's Activity.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check
    CHECK (actor_type IN ('operator_token', 'local_operator', 'system', 'user', 'intake_key', 'support_person'));

-- +goose Down
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check
    CHECK (actor_type IN ('operator_token', 'local_operator', 'system', 'user', 'intake_key'));
DROP TABLE support_grants;
DROP TABLE support_source;
