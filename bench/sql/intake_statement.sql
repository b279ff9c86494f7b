-- Intake's statement (domain.acceptBatch) as pgbench runs it: a 1 KB observation from one of 16
-- installations of one organization, far from its daily limit, one statement in an implicit
-- transaction. bench/statement.sh runs it beside pgbench A on the project's schema. Each pgbench
-- client adds to its own counter row, as each connection of the server's pool does (its slot).
\set inst random(1, 16)
\set seq random(1, 9000000000000000000)
WITH org AS (
  SELECT state, moving_transfer_id IS NOT NULL AS moving FROM organizations WHERE id = 'org_1' FOR SHARE),
ins AS (
  SELECT 1 FROM installations WHERE id = 'ins_' || :inst AND organization_id = 'org_1'),
pol AS (
  SELECT version, document FROM organization_policies WHERE organization_id = 'org_1'),
current AS (
  SELECT 0::bigint = 0 OR coalesce((SELECT version FROM pol), 1) = 0 AS ok),
today AS (
  SELECT coalesce(sum(intake_bytes), 0)::bigint AS total FROM usage_counters
  WHERE organization_id = 'org_1' AND day = (now() AT TIME ZONE 'UTC')::date),
within AS (
  SELECT 1 FROM org, today, current WHERE org.state = 'active' AND NOT org.moving AND today.total + 1100 <= 9000000000000000
    AND current.ok AND EXISTS (SELECT 1 FROM ins)),
batch AS (
  INSERT INTO observation_batches (installation_id, batch_id, organization_id) SELECT 'ins_' || :inst, 'b-' || :seq, 'org_1' FROM within
  ON CONFLICT DO NOTHING RETURNING (floor(random() * 2147483648)::bigint << 31) | floor(random() * 2147483648)::bigint AS r),
stored AS (
  INSERT INTO observations (id, organization_id, installation_id, batch_id, observed_at, kind, data)
  SELECT observation_id(now(), 0, b.r, 1), 'org_1', 'ins_' || :inst, 'b-' || :seq, now(), 'host.facts', :payload::jsonb FROM batch b),
counted AS (
  INSERT INTO usage_counters AS c (organization_id, day, shard, intake_requests, intake_bytes)
  SELECT 'org_1', (now() AT TIME ZONE 'UTC')::date, :client_id::smallint, 1, 1100 FROM batch
  ON CONFLICT (organization_id, day, shard) DO UPDATE SET
    intake_requests = c.intake_requests + 1, intake_bytes = c.intake_bytes + excluded.intake_bytes),
seen AS (
  UPDATE installations SET last_seen_at = now()
  WHERE id = 'ins_' || :inst AND EXISTS (SELECT 1 FROM within) AND (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute'))
SELECT (SELECT state FROM org), EXISTS (SELECT 1 FROM within), (SELECT count(*) FROM batch);
