-- +goose Up
-- Deployment sign-in (DESIGN §6). A sign-in flow is one trip through a provider: started by
-- GET /signin (purpose signin, the provider's active revision) or by opening a test URL
-- (purpose test, bound to the pending revision the test was started for); it ends at
-- /signin/callback. Nothing secret is stored: the test URL's capability, the state and the
-- browser's flow cookie only as SHA-256 (the cookie's value also derives the nonce and the
-- PKCE verifier, which are therefore never stored). provider_id has no foreign key: an
-- environment provider has no row.
CREATE TABLE signin_flows (
    id              text PRIMARY KEY,
    purpose         text NOT NULL CHECK (purpose IN ('signin', 'test')),
    provider_id     text NOT NULL,
    revision        bigint NOT NULL,
    capability_hash bytea UNIQUE CHECK (octet_length(capability_hash) = 32),
    state_hash      bytea UNIQUE CHECK (octet_length(state_hash) = 32),
    browser_hash    bytea CHECK (octet_length(browser_hash) = 32),
    -- A test: the operator token that started it (the activation's actor).
    token_id        text,
    token_name      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    opened_at       timestamptz,
    completed_at    timestamptz,
    CHECK ((purpose = 'test') = (capability_hash IS NOT NULL AND token_id IS NOT NULL))
);
CREATE INDEX signin_flows_expires_at ON signin_flows (expires_at);

-- A person signed in with a deployment provider (support people). The cookie's value is the
-- credential: only its SHA-256 is stored. Signing out revokes the row.
CREATE TABLE deployment_sessions (
    id          text PRIMARY KEY,
    token_hash  bytea NOT NULL UNIQUE CHECK (octet_length(token_hash) = 32),
    provider_id text NOT NULL,
    subject     text NOT NULL,
    email       text NOT NULL,
    name        text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL,
    revoked_at  timestamptz
);

-- +goose Down
DROP TABLE deployment_sessions;
DROP TABLE signin_flows;
