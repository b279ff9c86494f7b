-- +goose Up
ALTER TABLE organizations
    ADD COLUMN suspended_reason text,
    ADD COLUMN purge_after      timestamptz,
    ADD CONSTRAINT organizations_purge_after CHECK ((state = 'deletion_pending') = (purge_after IS NOT NULL));
CREATE INDEX organizations_purge_due ON organizations (purge_after) WHERE state = 'deletion_pending';

-- Users are shared by organizations: a purge removes memberships, never users.
CREATE TABLE users (
    id           text PRIMARY KEY,
    email        text NOT NULL UNIQUE CHECK (email = lower(email)),
    display_name text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id         text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role            text NOT NULL CHECK (role IN ('owner')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- Personal API keys belong to one membership: the key names its organization.
CREATE TABLE user_api_keys (
    id              text PRIMARY KEY,
    organization_id text NOT NULL,
    user_id         text NOT NULL,
    key_hash        bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz,
    FOREIGN KEY (organization_id, user_id) REFERENCES memberships (organization_id, user_id) ON DELETE CASCADE
);
CREATE INDEX user_api_keys_membership ON user_api_keys (organization_id, user_id);

CREATE TABLE invitations (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    email           text NOT NULL CHECK (email = lower(email)),
    token_hash      bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'accepted', 'revoked')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    accepted_at     timestamptz,
    revoked_at      timestamptz,
    accepted_by     text
);
CREATE INDEX invitations_org ON invitations (organization_id, id);
CREATE INDEX invitations_pending_email ON invitations (organization_id, email) WHERE state = 'pending';

-- One policy document and one owners' settings document per organization, each versioned.
CREATE TABLE organization_policies (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    document        jsonb NOT NULL DEFAULT '{}',
    version         bigint NOT NULL DEFAULT 1,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE organization_settings (
    organization_id text PRIMARY KEY REFERENCES organizations (id) ON DELETE CASCADE,
    document        jsonb NOT NULL DEFAULT '{}',
    version         bigint NOT NULL DEFAULT 1,
    updated_at      timestamptz NOT NULL DEFAULT now()
);
INSERT INTO organization_policies (organization_id) SELECT id FROM organizations;
INSERT INTO organization_settings (organization_id) SELECT id FROM organizations;

-- Usage: an event is counted once (usage_events remembers its ID for the deduplication window),
-- into one of a few counter rows per organization and day, so that concurrent events do not
-- all update one hot row. Daily totals are sums over the shards.
CREATE TABLE usage_counters (
    organization_id  text NOT NULL,
    day              date NOT NULL,
    shard            smallint NOT NULL,
    intake_requests  bigint NOT NULL DEFAULT 0,
    intake_bytes     bigint NOT NULL DEFAULT 0,
    jobs_created     bigint NOT NULL DEFAULT 0,
    terminal_seconds bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (organization_id, day, shard)
);
CREATE INDEX usage_counters_day ON usage_counters (day);
CREATE TABLE usage_events (
    organization_id text NOT NULL,
    event_id        text NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, event_id)
);
CREATE INDEX usage_events_recorded_at ON usage_events (recorded_at);

-- Allow the system actor (background work such as the purge) in the audit log.
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check CHECK (actor_type IN ('operator_token', 'local_operator', 'system'));

-- Mail waiting for the mail worker. The body (which may hold an invitation secret) is cleared
-- once the mail is sent; the row goes with its organization.
CREATE TABLE outbound_mail (
    id              text PRIMARY KEY,
    organization_id text REFERENCES organizations (id) ON DELETE CASCADE,
    recipient       text NOT NULL,
    subject         text NOT NULL,
    body            text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz
);

-- +goose Down
DROP TABLE outbound_mail;
ALTER TABLE audit_events DROP CONSTRAINT audit_events_actor_type_check,
    ADD CONSTRAINT audit_events_actor_type_check CHECK (actor_type IN ('operator_token', 'local_operator'));
DROP TABLE usage_events;
DROP TABLE usage_counters;
DROP TABLE organization_settings;
DROP TABLE organization_policies;
DROP TABLE invitations;
DROP TABLE user_api_keys;
DROP TABLE memberships;
DROP TABLE users;
DROP INDEX organizations_purge_due;
ALTER TABLE organizations DROP CONSTRAINT organizations_purge_after,
    DROP COLUMN purge_after, DROP COLUMN suspended_reason;
