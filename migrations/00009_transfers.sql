-- +goose Up
-- Transfers: exports (a background job writes the archive) and imports (recorded once they
-- succeed). Status and non-secret metadata only.
CREATE TABLE transfers (
    id              text PRIMARY KEY,
    organization_id text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    kind            text NOT NULL CHECK (kind IN ('export', 'import')),
    state           text NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'running', 'succeeded', 'failed', 'cancelled')),
    rows_done       bigint NOT NULL DEFAULT 0,
    bytes_done      bigint NOT NULL DEFAULT 0,
    counts          jsonb NOT NULL DEFAULT '{}',
    sha256          bytea CHECK (octet_length(sha256) = 32),
    size_bytes      bigint,
    failure         text,
    requested_by    text NOT NULL,
    destination_url text,
    completed_at    timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'succeeded') = (sha256 IS NOT NULL))
);
CREATE INDEX transfers_org ON transfers (organization_id, id);

-- An export's archive, in chunks of about 1 MiB in sequence: any server process can stream
-- it, one chunk in memory at a time. The bytes are compressed already.
CREATE TABLE transfer_chunks (
    transfer_id text NOT NULL REFERENCES transfers (id) ON DELETE CASCADE,
    seq         integer NOT NULL,
    data        bytea NOT NULL,
    PRIMARY KEY (transfer_id, seq)
);
ALTER TABLE transfer_chunks ALTER COLUMN data SET STORAGE EXTERNAL;

-- Single-use download capabilities: only the capability's SHA-256 is stored, with the token it
-- is bound to. A download sets used_at; cancelling the transfer or revoking the token voids it.
CREATE TABLE transfer_download_authorizations (
    id              text PRIMARY KEY,
    transfer_id     text NOT NULL REFERENCES transfers (id) ON DELETE CASCADE,
    capability_hash bytea NOT NULL UNIQUE CHECK (octet_length(capability_hash) = 32),
    token_id        text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    used_at         timestamptz,
    CHECK (expires_at <= created_at + interval '10 minutes')
);
CREATE INDEX transfer_download_authorizations_transfer ON transfer_download_authorizations (transfer_id);

-- Memberships an import brought from the source: they grant nothing. An owner gets access at
-- the destination only through a new invitation, accepted.
CREATE TABLE pending_memberships (
    organization_id   text NOT NULL REFERENCES organizations (id) ON DELETE CASCADE,
    user_id           text NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    role              text NOT NULL,
    source_created_at timestamptz NOT NULL,
    imported_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organization_id, user_id)
);

-- +goose Down
DROP TABLE pending_memberships;
DROP TABLE transfer_download_authorizations;
DROP TABLE transfer_chunks;
DROP TABLE transfers;
