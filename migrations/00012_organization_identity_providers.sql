-- +goose Up
-- Organization identity providers (DESIGN §5, entitlement organization_identity_providers): an
-- organization's own OIDC providers, managed by its owners. The client secret is sealed
-- (server/secretbox) and bound to the provider's ID. A slug is unique among the organization's
-- enabled providers, so one disabled (by its owners, or when the entitlement is withdrawn) frees
-- its slug.
CREATE TABLE organization_identity_providers (
    id                    text PRIMARY KEY,
    organization_id       text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    slug                  text NOT NULL,
    protocol              text NOT NULL CHECK (protocol IN ('oidc')),
    issuer                text NOT NULL,
    display_name          text NOT NULL,
    client_id             text NOT NULL,
    client_secret         bytea,
    scopes                text[] NOT NULL,
    allowed_email_domains text[] NOT NULL,
    state                 text NOT NULL DEFAULT 'enabled' CHECK (state IN ('enabled', 'disabled')),
    disabled_reason       text CHECK (disabled_reason IN ('owner', 'entitlement_withdrawn')),
    disabled_at           timestamptz,
    created_at            timestamptz NOT NULL DEFAULT now(),
    updated_at            timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'disabled') = (disabled_reason IS NOT NULL AND disabled_at IS NOT NULL))
);
CREATE UNIQUE INDEX organization_identity_providers_enabled_slug
    ON organization_identity_providers (organization_id, slug) WHERE state = 'enabled';
CREATE INDEX organization_identity_providers_org ON organization_identity_providers (organization_id, id);

-- +goose Down
DROP TABLE organization_identity_providers;
