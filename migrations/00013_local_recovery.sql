-- +goose Up
-- Local recovery sign-in (RFD 15's escape hatch, DESIGN §6): `renga identity-provider
-- recover-local` on the server host (a release command; no API operation creates one) lets one
-- support person, by email, sign in once without an identity provider. The code is stored only
-- as SHA-256; it works once, before expires_at (at most 24 hours after it was made). A newer
-- recovery for the same email revokes the older ones still open.
CREATE TABLE local_recoveries (
    id            text PRIMARY KEY,
    email         text NOT NULL CHECK (email = lower(email)),
    code_hash     bytea NOT NULL UNIQUE CHECK (octet_length(code_hash) = 32),
    invocation_id text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL,
    used_at       timestamptz,
    session_id    text,
    revoked_at    timestamptz,
    CHECK (expires_at > created_at AND expires_at <= created_at + interval '24 hours'),
    CHECK ((used_at IS NULL) = (session_id IS NULL))
);
CREATE INDEX local_recoveries_open ON local_recoveries (email) WHERE used_at IS NULL AND revoked_at IS NULL;
CREATE INDEX local_recoveries_expires_at ON local_recoveries (expires_at);

-- A deployment session is made by an identity provider (method oidc, its provider_id) or by a
-- local recovery (method local_recovery, no provider; its subject is the recovery's ID).
ALTER TABLE deployment_sessions
    ADD COLUMN method text NOT NULL DEFAULT 'oidc' CHECK (method IN ('oidc', 'local_recovery')),
    ALTER COLUMN provider_id DROP NOT NULL,
    ADD CONSTRAINT deployment_sessions_method_provider CHECK ((method = 'oidc') = (provider_id IS NOT NULL));

-- +goose Down
DELETE FROM deployment_sessions WHERE method = 'local_recovery';
ALTER TABLE deployment_sessions
    DROP CONSTRAINT deployment_sessions_method_provider,
    ALTER COLUMN provider_id SET NOT NULL,
    DROP COLUMN method;
DROP TABLE local_recoveries;
