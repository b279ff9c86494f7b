-- +goose Up
-- Intake keys: only the SHA-256 of the key without its identifier is stored; the identifier it
-- carries is an annotation for resolvers, never part of authentication.
CREATE TABLE intake_keys (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    name            text NOT NULL,
    identifier      text,
    key_hash        bytea NOT NULL UNIQUE CHECK (octet_length(key_hash) = 32),
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz
);
CREATE INDEX intake_keys_org ON intake_keys (organization_id, id);

-- An agent's installation identity: its ID and Ed25519 public key (not a credential, so an
-- export carries it and an import keeps it valid).
CREATE TABLE installations (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    public_key      bytea NOT NULL CHECK (octet_length(public_key) = 32),
    hostname        text NOT NULL,
    os              text NOT NULL,
    intake_key_id   text,
    registered_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at    timestamptz
);
CREATE INDEX installations_org ON installations (organization_id, id);

-- The deduplication log of observation batches: a retried batch is stored and counted once.
CREATE TABLE observation_batches (
    installation_id text NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    batch_id        text NOT NULL,
    organization_id text NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (installation_id, batch_id)
);
CREATE INDEX observation_batches_received_at ON observation_batches (received_at);

CREATE TABLE observations (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organization_id text NOT NULL,
    installation_id text NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    batch_id        text NOT NULL,
    observed_at     timestamptz NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    kind            text NOT NULL,
    data            jsonb NOT NULL
);
CREATE INDEX observations_installation ON observations (installation_id, id);
CREATE INDEX observations_org_received ON observations (organization_id, received_at);

CREATE TABLE jobs (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    installation_id text NOT NULL REFERENCES installations (id) ON DELETE CASCADE,
    command         text NOT NULL,
    state           text NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'delivered', 'succeeded', 'failed')),
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    completed_at    timestamptz,
    result          jsonb
);
CREATE INDEX jobs_org ON jobs (organization_id, id);
CREATE INDEX jobs_pending ON jobs (installation_id, id) WHERE state IN ('queued', 'delivered');

-- +goose Down
DROP TABLE jobs;
DROP TABLE observations;
DROP TABLE observation_batches;
DROP TABLE installations;
DROP TABLE intake_keys;
