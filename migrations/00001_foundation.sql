-- +goose Up
CREATE TABLE operator_tokens (
    id              text PRIMARY KEY,
    name            text NOT NULL,
    token_hash      bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    scopes          text[] NOT NULL,
    allowed_sources cidr[] NOT NULL DEFAULT '{}',
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz,
    revoked_at      timestamptz
);

CREATE TABLE organizations (
    id           text PRIMARY KEY,
    slug         text NOT NULL UNIQUE,
    display_name text NOT NULL,
    state        text NOT NULL DEFAULT 'active'
                 CHECK (state IN ('active', 'suspended', 'deletion_pending', 'purging', 'moved')),
    version      bigint NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX organizations_state_id ON organizations (state, id);

-- Stored results of keyed writes. The key itself is not kept, only its SHA-256.
CREATE TABLE idempotency_keys (
    actor_id       text NOT NULL,
    method         text NOT NULL,
    route          text NOT NULL,
    key_hash       bytea NOT NULL,
    request_digest bytea NOT NULL,
    status         integer NOT NULL,
    headers        jsonb NOT NULL,
    body           bytea NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    PRIMARY KEY (actor_id, method, route, key_hash)
);
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);

-- The deployment audit log: allowlisted fields only, no foreign keys so that records outlive
-- the organizations and tokens they name.
CREATE TABLE audit_events (
    id                         text PRIMARY KEY,
    time                       timestamptz NOT NULL,
    request_id                 text NOT NULL,
    actor_type                 text NOT NULL CHECK (actor_type IN ('operator_token', 'local_operator')),
    actor_id                   text NOT NULL,
    actor_name                 text NOT NULL,
    invocation_id              text,
    operation                  text NOT NULL,
    organization_id            text,
    organization_name_snapshot text,
    token_id                   text,
    outcome                    text NOT NULL CHECK (outcome IN ('succeeded', 'failed', 'denied')),
    status                     integer NOT NULL,
    error                      text,
    changed_fields             text[] NOT NULL DEFAULT '{}',
    source_address             text NOT NULL
);
CREATE INDEX audit_events_organization ON audit_events (organization_id, id) WHERE organization_id IS NOT NULL;
CREATE INDEX audit_events_actor ON audit_events (actor_id, id);
CREATE INDEX audit_events_operation ON audit_events (operation, id);
CREATE INDEX audit_events_time ON audit_events (time);

-- An organization's Activity: what changed it, readable by its owners; goes with the organization.
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
CREATE INDEX organization_activity_org ON organization_activity (organization_id, id);

-- +goose Down
DROP TABLE organization_activity;
DROP TABLE audit_events;
DROP TABLE idempotency_keys;
DROP TABLE organizations;
DROP TABLE operator_tokens;
