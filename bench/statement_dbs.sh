# Sourced by bench/statement.sh and bench/pgcallgrind.sh (from the repository's root), which run
# pgbench scripts on the same two databases.

# statement_dbs URL: (re)makes, on the server at URL (postgres://user@host:port), renga_statement_a
# with the baselines' schema ($baselines) and renga_statement with the project's migrations, one
# organization as the API makes it (its policy and settings have no rows until their first
# write), 16 installations and an operator token; then runs
# SETUP (an SQL file: tables a variant needs, say) on renga_statement when it is set.
statement_dbs() {
  local pg=$1 d f
  for d in renga_statement renga_statement_a; do
    psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $d" -c "CREATE DATABASE $d"
  done
  psql -q "$pg/renga_statement_a" -f "$baselines/schema.sql" >/dev/null
  for f in migrations/*.sql; do awk '/^-- \+goose Down/ { exit } { print }' "$f"; done | grep -v '^-- +goose' |
    psql -q -v ON_ERROR_STOP=1 "$pg/renga_statement" >/dev/null
  psql -q -v ON_ERROR_STOP=1 "$pg/renga_statement" <<'SQL'
INSERT INTO organizations (id, slug, display_name) VALUES ('org_1', 'one', 'One');
INSERT INTO installations (id, organization_id, public_key, hostname, os)
  SELECT 'ins_' || i, 'org_1', sha256(i::text::bytea), 'h' || i, 'linux' FROM generate_series(1, 16) i;
INSERT INTO operator_tokens (id, name, token_hash, scopes) VALUES ('tok_1', 'bench', sha256('tok_1'), '{organizations:write}');
SQL
  if [ -n "${SETUP:-}" ]; then psql -q -v ON_ERROR_STOP=1 "$pg/renga_statement" -f "$SETUP" >/dev/null; fi
}

# pipelined SCRIPT OUT: writes to OUT the pgbench script SCRIPT with its statements sent in
# pipelined round trips, each starting at a line "-- round trip".
pipelined() {
  awk '/^-- round trip/ { if (open) print "\\endpipeline"; print "\\startpipeline"; open = 1; next }
    { print } END { if (open) print "\\endpipeline" }' "$1" >"$2"
}
