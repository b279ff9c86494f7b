-- +goose Up
-- Deployment identity providers (RFD 15 as DESIGN §6 needs it). The provider row holds the
-- immutable identity and which revision is active or pending; each configuration written is a
-- revision, never changed after. The client secret is sealed (server/secretbox) and bound to
-- its provider's ID.
CREATE TABLE identity_providers (
    id               text PRIMARY KEY,
    slug             text NOT NULL UNIQUE,
    protocol         text NOT NULL CHECK (protocol IN ('oidc')),
    issuer           text NOT NULL,
    state            text NOT NULL DEFAULT 'enabled' CHECK (state IN ('enabled', 'disabled')),
    revision         bigint NOT NULL,
    active_revision  bigint,
    pending_revision bigint,
    version          bigint NOT NULL DEFAULT 1,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    CHECK (active_revision IS NULL OR active_revision <= revision),
    CHECK (pending_revision IS NULL OR pending_revision <= revision)
);

CREATE TABLE identity_provider_revisions (
    provider_id           text NOT NULL REFERENCES identity_providers (id) ON DELETE CASCADE,
    revision              bigint NOT NULL,
    display_name          text NOT NULL,
    client_id             text NOT NULL,
    client_secret         bytea,
    scopes                text[] NOT NULL,
    allowed_email_domains text[] NOT NULL,
    created_at            timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (provider_id, revision)
);

-- The audit names the provider a change concerns.
ALTER TABLE audit_events ADD COLUMN provider_id text;

-- +goose Down
ALTER TABLE audit_events DROP COLUMN provider_id;
DROP TABLE identity_provider_revisions;
DROP TABLE identity_providers;
