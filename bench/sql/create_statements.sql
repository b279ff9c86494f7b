-- A keyed, audited createOrganization as the server sends it (x-renga-one-round-trip:
-- domain.QueueWriteChecks, the deferred insert of domain.DeferredOrganizationCreate,
-- domain.FinishWrite and domain.AuditStatement), in one pipelined round trip, one implicit
-- transaction: run it with PIPELINED=1 (bench/statement.sh sends it between \startpipeline and
-- \endpipeline, which ends the implicit transaction). bench/statement.sh runs it beside pgbench C
-- on the project's schema:
--   PIPELINED=1 BASELINE=C_keyedcreate.sql STATEMENT=bench/sql/create_statements.sql CLIENTS=8 bench/statement.sh
\set k random(1, 9000000000000000000)
-- round trip: the credential's lock and re-check, the key's lock and no stored result under it;
-- the create; the stored result and the audit event, which is in the Activity (one statement)
SELECT pg_advisory_xact_lock_shared(42);
SELECT 1 / count(*) FROM operator_tokens WHERE id = 'tok_1' AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > now());
SELECT pg_advisory_xact_lock(hashtextextended('idem-' || :k, 0));
SELECT 1 / (1 - count(*)) FROM idempotency_keys
  WHERE actor_id = 'tok_1' AND method = 'POST' AND route = '/api/v1/operator/organizations'
  AND key_hash = sha256(convert_to('idem-' || :k, 'UTF8')) AND expires_at > now();
INSERT INTO organizations (id, slug, display_name, state, version, created_at, updated_at)
  VALUES ('org_' || :k, 's' || :k, 'New org ' || :k, 'active', 1, now(), now());
WITH stored AS (
    INSERT INTO idempotency_keys (actor_id, method, route, key_hash, request_digest, status, headers, body, expires_at)
  VALUES ('tok_1', 'POST', '/api/v1/operator/organizations', sha256(convert_to('idem-' || :k, 'UTF8')),
    sha256(convert_to('req-' || :k, 'UTF8')), 201, '{"Content-Type":["application/json"],"Location":["/api/v1/operator/organizations/org_1"]}',
    convert_to('{"id":"org_' || :k || '","slug":"s' || :k || '","display_name":"New org","state":"active","version":1}', 'UTF8'),
    now() + interval '24 hours')
  ON CONFLICT (actor_id, method, route, key_hash) DO UPDATE SET request_digest = excluded.request_digest,
    status = excluded.status, headers = excluded.headers, body = excluded.body,
    created_at = now(), expires_at = excluded.expires_at)
INSERT INTO audit_events (id, time, request_id, actor_type, actor_id, actor_name, invocation_id, operation,
    organization_id, organization_name_snapshot, token_id, outcome, status, error, changed_fields, source_address, provider_id,
    target_email, activity)
  VALUES ('evt_' || :k, now(), 'req_' || :k, 'operator_token', 'tok_1', 'bench', NULL, 'createOrganization',
    'org_' || :k, 'New org ' || :k, 'tok_1', 'succeeded', 201, NULL, '{slug,display_name}', '127.0.0.1', NULL, NULL, true);
