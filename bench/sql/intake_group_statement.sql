-- Intake's grouped statement (domain.IntakeGroups, acceptBatches) as pgbench runs it: eight 1 KB
-- batches of one organization's 16 installations in one statement, far from the daily limit, the
-- statement's text as the server sends it with the arrays written out. bench/statement.sh runs it
-- beside pgbench A; a transaction is eight batches, so divide its PostgreSQL CPU by 8:
--   VARIANTS=bench/sql/intake_group_statement.sql bench/statement.sh
\set i1 random(1, 16)
\set s1 random(1, 9000000000000000000)
\set i2 random(1, 16)
\set s2 random(1, 9000000000000000000)
\set i3 random(1, 16)
\set s3 random(1, 9000000000000000000)
\set i4 random(1, 16)
\set s4 random(1, 9000000000000000000)
\set i5 random(1, 16)
\set s5 random(1, 9000000000000000000)
\set i6 random(1, 16)
\set s6 random(1, 9000000000000000000)
\set i7 random(1, 16)
\set s7 random(1, 9000000000000000000)
\set i8 random(1, 16)
\set s8 random(1, 9000000000000000000)
WITH input AS (
SELECT org, inst, batch_id, body::jsonb AS body, bytes, threshold, public_key, policy_version, n
FROM unnest(array_fill('org_1'::text, ARRAY[8]), ARRAY['ins_' || :i1, 'ins_' || :i2, 'ins_' || :i3, 'ins_' || :i4, 'ins_' || :i5, 'ins_' || :i6, 'ins_' || :i7, 'ins_' || :i8], ARRAY['b-' || :s1, 'b-' || :s2, 'b-' || :s3, 'b-' || :s4, 'b-' || :s5, 'b-' || :s6, 'b-' || :s7, 'b-' || :s8], ARRAY[(jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text, (jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text, (jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text, (jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text, (jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text, (jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text, (jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text, (jsonb_build_object('observations', jsonb_build_array(jsonb_build_object('observed_at', now()::text, 'kind', 'host.facts', 'data', :payload::jsonb))))::text], array_fill(1100::bigint, ARRAY[8]), array_fill(9000000000000000::bigint, ARRAY[8]), array_fill(NULL::bytea, ARRAY[8]), array_fill(0::bigint, ARRAY[8]))
  WITH ORDINALITY AS i(org, inst, batch_id, body, bytes, threshold, public_key, policy_version, n)),
org AS (
SELECT id, state, moving_transfer_id IS NOT NULL AS moving FROM organizations
WHERE id IN (SELECT org FROM input) ORDER BY id FOR SHARE SKIP LOCKED),
pol AS (
SELECT organization_id, version, document FROM organization_policies WHERE organization_id IN (SELECT org FROM input)),
today AS (
SELECT organization_id, sum(intake_bytes)::bigint AS total FROM usage_counters
WHERE organization_id IN (SELECT org FROM input) AND day = (now() AT TIME ZONE 'UTC')::date GROUP BY organization_id),
checked AS (
SELECT i.n, i.org, i.inst, i.batch_id, i.body, i.bytes, o.state, coalesce(o.moving, false) AS moving, coalesce(p.version, 1) AS version,
  o.id IS NULL AND EXISTS (SELECT 1 FROM organizations x WHERE x.id = i.org) AS busy,
  i.policy_version = 0 OR coalesce(p.version, 1) = i.policy_version AS current, coalesce(p.document, '{}') AS document,
  EXISTS (SELECT 1 FROM installations s WHERE s.id = i.inst AND s.organization_id = i.org
    AND (i.public_key IS NULL OR s.public_key = i.public_key)) AS installed,
  coalesce(t.total, 0) + sum(i.bytes) OVER (PARTITION BY i.org ORDER BY i.n) <= i.threshold AS under
FROM input i LEFT JOIN org o ON o.id = i.org LEFT JOIN pol p ON p.organization_id = i.org
  LEFT JOIN today t ON t.organization_id = i.org),
within AS (
SELECT * FROM checked WHERE state = 'active' AND NOT moving AND current AND installed AND under),
batch AS (
INSERT INTO observation_batches (installation_id, batch_id, organization_id)
SELECT inst, batch_id, org FROM within ORDER BY inst, batch_id
ON CONFLICT DO NOTHING RETURNING installation_id, batch_id),
fresh AS (
SELECT w.n, w.org, w.inst, w.batch_id, w.body, w.bytes, (floor(random() * 2147483648)::bigint << 31) | floor(random() * 2147483648)::bigint AS r,
  (row_number() OVER (PARTITION BY w.org ORDER BY w.n) - 1)::integer AS seq FROM within w
JOIN batch b ON b.installation_id = w.inst AND b.batch_id = w.batch_id),
stored AS (
INSERT INTO observations (id, organization_id, installation_id, batch_id, observed_at, kind, data)
SELECT observation_id(now(), f.seq, f.r, e.k), f.org, f.inst, f.batch_id, (o->>'observed_at')::timestamptz, o->>'kind', o->'data'
FROM fresh f, jsonb_array_elements(f.body -> 'observations') WITH ORDINALITY AS e(o, k) ORDER BY f.n, e.k),
counted AS (
INSERT INTO usage_counters AS c (organization_id, day, shard, intake_requests, intake_bytes)
SELECT org, (now() AT TIME ZONE 'UTC')::date, :client_id::smallint, count(*), sum(bytes) FROM fresh GROUP BY org
ON CONFLICT (organization_id, day, shard) DO UPDATE SET
  intake_requests = c.intake_requests + excluded.intake_requests, intake_bytes = c.intake_bytes + excluded.intake_bytes),
touched AS (
SELECT id FROM installations
WHERE id IN (SELECT inst FROM within) AND (last_seen_at IS NULL OR last_seen_at < now() - interval '1 minute')
ORDER BY id FOR NO KEY UPDATE SKIP LOCKED),
seen AS (
UPDATE installations SET last_seen_at = now() WHERE id IN (SELECT id FROM touched))
SELECT c.busy, c.state, c.moving, c.n IN (SELECT n FROM within), c.n IN (SELECT n FROM fresh), c.installed, c.version,
CASE WHEN NOT c.current THEN c.document END
FROM checked c ORDER BY c.n;
