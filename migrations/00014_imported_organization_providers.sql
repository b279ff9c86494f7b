-- +goose Up
-- Organization identity providers travel in a transfer archive (format version 2,
-- docs/transfer-archive.md) without their client secrets; the importing deployment keeps them
-- disabled, with the reason `imported`, until the owners add them again (a provider is never
-- re-enabled, and it needs the destination's redirect URI registered at the issuer and its
-- secret entered again before it could work).
ALTER TABLE organization_identity_providers
    DROP CONSTRAINT organization_identity_providers_disabled_reason_check,
    ADD CONSTRAINT organization_identity_providers_disabled_reason_check
        CHECK (disabled_reason IN ('owner', 'entitlement_withdrawn', 'imported'));

-- +goose Down
UPDATE organization_identity_providers SET disabled_reason = 'owner' WHERE disabled_reason = 'imported';
ALTER TABLE organization_identity_providers
    DROP CONSTRAINT organization_identity_providers_disabled_reason_check,
    ADD CONSTRAINT organization_identity_providers_disabled_reason_check
        CHECK (disabled_reason IN ('owner', 'entitlement_withdrawn'));
