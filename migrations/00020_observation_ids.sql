-- +goose Up
-- An observation's ID no longer comes from one sequence shared by every organization, whose gaps
-- told an owner how much the others sent. Its key is 128 bits, stored as a uuid (compared byte
-- by byte: in the bits' order), shown as the API shows every other ID (domain.ObservationID):
--   - an observation stored from now on: 48 bits of the milliseconds it was received, the
--     microsecond within that millisecond (10 bits), its batch's place among its organization's
--     batches stored by the same statement (6 bits: a group carries at most 64), then 62 random
--     bits drawn for its batch plus its place in the batch: the same shape as db.NewID's (obs_
--     and 26 characters, the first ten the time), sorting by the time received, an
--     organization's batches and a batch's observations in the order sent; nothing in it
--     depends on another organization's batches;
--   - an observation stored before: the number it had (its top 64 bits zero), so it keeps
--     answering as obs_<n> and sorts before every newer one, in the order it had.
ALTER TABLE observations ALTER COLUMN id DROP IDENTITY;
ALTER TABLE observations ALTER COLUMN id TYPE uuid USING lpad(to_hex(id), 32, '0')::uuid;

-- observation_id(t, seq, r, k): the key of the k-th observation of a batch received at t, its
-- organization's seq-th (0 to 63) in the statement, whose random bits are r (0 to 2^62 - 1, so
-- that r + k stays a bigint).
-- +goose StatementBegin
CREATE FUNCTION observation_id(t timestamptz, seq integer, r bigint, k bigint) RETURNS uuid
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT (lpad(to_hex((floor(extract(epoch FROM t) * 1000)::bigint << 16)
            | ((floor(extract(microseconds FROM t))::bigint % 1000) << 6) | seq), 16, '0')
        || lpad(to_hex(r + k), 16, '0'))::uuid
$$;
-- +goose StatementEnd

-- observation_id(): the key of an observation inserted without one (by hand: the server's
-- statements give each batch its own): the clock's time and random bits, after every key this
-- session made before (its last plus one otherwise), so that one statement's rows keep their
-- order.
-- +goose StatementBegin
CREATE FUNCTION observation_id() RETURNS uuid
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    k    uuid := observation_id(clock_timestamp(), 0,
        (floor(random() * 2147483648)::bigint << 31) | floor(random() * 2147483648)::bigint, 0);
    last uuid := nullif(current_setting('renga.last_observation_id', true), '')::uuid;
    h    text;
BEGIN
    IF k <= last THEN
        h := replace(last::text, '-', '');
        k := (left(h, 16) || lpad(to_hex(('x' || right(h, 16))::bit(64)::bigint + 1), 16, '0'))::uuid;
    END IF;
    PERFORM set_config('renga.last_observation_id', k::text, false);
    RETURN k;
END
$$;
-- +goose StatementEnd
ALTER TABLE observations ALTER COLUMN id SET DEFAULT observation_id();

-- +goose Down
-- Observations stored since get numbers after the last one, in their order.
ALTER TABLE observations ALTER COLUMN id DROP DEFAULT;
DROP FUNCTION observation_id();
DROP FUNCTION observation_id(timestamptz, integer, bigint, bigint);
ALTER TABLE observations ADD COLUMN n bigint;
UPDATE observations SET n = ('x' || right(replace(id::text, '-', ''), 16))::bit(64)::bigint
    WHERE left(replace(id::text, '-', ''), 16) = '0000000000000000';
UPDATE observations o SET n = m.n FROM (
    SELECT id, coalesce((SELECT max(n) FROM observations), 0) + row_number() OVER (ORDER BY id) AS n
    FROM observations WHERE n IS NULL) m WHERE o.id = m.id;
ALTER TABLE observations ALTER COLUMN id TYPE bigint USING n;
ALTER TABLE observations DROP COLUMN n;
-- +goose StatementBegin
DO $$
BEGIN
    EXECUTE format('ALTER TABLE observations ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)',
        coalesce((SELECT max(id) FROM observations), 0) + 1);
END
$$;
-- +goose StatementEnd
