#!/usr/bin/env bash
# Measures intake's statement alone against pgbench A, interleaved: TPS, mean latency and the PostgreSQL
# backends' CPU per transaction, on the project's schema (migrations/) with one organization and
# 16 installations. It tells what PostgreSQL's share of intake costs apart from the server.
#
#   bench/statement.sh [seconds-per-run] [rounds]   (needs PostgreSQL at 127.0.0.1:5432, user postgres)
#
# VARIANTS="a.sql b.sql" adds pgbench scripts run on the same database in each round, interleaved
# (a variant of the statement without one of its parts tells what that part costs). BASELINE (a
# script of the baselines, A_intake.sql by default), STATEMENT (bench/sql/intake_statement.sql)
# and CLIENTS (16) measure another path the same way, e.g. a keyed create beside C:
#   BASELINE=C_keyedcreate.sql STATEMENT=bench/sql/create_statements.sql CLIENTS=8 bench/statement.sh
# PIPELINED=1 sends the statement's script in pipelined round trips, each starting at a line
# "-- round trip" (the create as the server sends it, at one client: latency beside C's):
#   PIPELINED=1 BASELINE=C_keyedcreate.sql STATEMENT=bench/sql/create_statements.sql CLIENTS=1 bench/statement.sh
# SETUP (an SQL file) runs on the project's database before the rounds: tables a variant needs,
# such as a copy of one with fewer indexes.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}; rounds=${2:-3}
baselines=${BASELINES:-../shared/baselines}
pg="postgres://postgres@127.0.0.1:5432"
for d in renga_statement renga_statement_a; do
  psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS $d" -c "CREATE DATABASE $d"
done
psql -q "$pg/renga_statement_a" -f "$baselines/schema.sql" >/dev/null
for f in migrations/*.sql; do awk '/^-- \+goose Down/ { exit } { print }' "$f"; done | grep -v '^-- +goose' |
  psql -q -v ON_ERROR_STOP=1 "$pg/renga_statement" >/dev/null
psql -q -v ON_ERROR_STOP=1 "$pg/renga_statement" <<'SQL'
INSERT INTO organizations (id, slug, display_name) VALUES ('org_1', 'one', 'One');
INSERT INTO organization_policies (organization_id) VALUES ('org_1');
INSERT INTO organization_settings (organization_id) VALUES ('org_1');
INSERT INTO installations (id, organization_id, public_key, hostname, os)
  SELECT 'ins_' || i, 'org_1', sha256(i::text::bytea), 'h' || i, 'linux' FROM generate_series(1, 16) i;
INSERT INTO operator_tokens (id, name, token_hash, scopes) VALUES ('tok_1', 'bench', sha256('tok_1'), '{organizations:write}');
SQL
# SETUP: SQL run on the project's database after the fixtures (tables a variant needs).
if [ -n "${SETUP:-}" ]; then psql -q -v ON_ERROR_STOP=1 "$pg/renga_statement" -f "$SETUP" >/dev/null; fi
run() { # database script: one line of TPS and CPU per transaction
  local cpu o; cpu=$(mktemp); o=$(mktemp)
  psql -qc CHECKPOINT "$pg/$1"
  ( while :; do for p in $(psql -qAt "$pg/postgres" -c "SELECT pid FROM pg_stat_activity WHERE datname = '$1'"); do
      sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk -v p="$p" '{ print p, $12 + $13 }'; done >>"$cpu" || true; sleep 0.2; done ) & local s=$!
  { time -p pgbench -n -M prepared -D payload="$(cat "$baselines/payload.json")" -f "$2" -c "${CLIENTS:-16}" -j 2 -T "$secs" "$pg/$1" >"$o" 2>&1; } 2>"$o.time"
  kill "$s"; wait "$s" 2>/dev/null || true
  local n; n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$o")
  printf '%-22s tps %6.0f   latency-ms %6.3f   pg-us/txn %5.0f   pgbench-us/txn %4.0f\n' "$(basename "$2" .sql)" "$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$o")" \
    "$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$o")" \
    "$(awk -v hz="$(getconf CLK_TCK)" -v n="$n" '{ if ($2 > m[$1]) m[$1] = $2 } END { for (p in m) s += m[p]; print s * 1e6 / hz / n }' "$cpu")" \
    "$(awk -v n="$n" '$1 == "user" || $1 == "sys" { s += $2 } END { print s * 1e6 / n }' "$o.time")"
}
statement=${STATEMENT:-bench/sql/intake_statement.sql}
if [ -n "${PIPELINED:-}" ]; then
  p=$(mktemp -d)/$(basename "$statement")
  awk '/^-- round trip/ { if (open) print "\\endpipeline"; print "\\startpipeline"; open = 1; next }
    { print } END { if (open) print "\\endpipeline" }' "$statement" >"$p"
  statement=$p
fi
for _ in $(seq "$rounds"); do
  run renga_statement_a "$baselines/${BASELINE:-A_intake.sql}"
  run renga_statement "$statement"
  for f in ${VARIANTS:-}; do run renga_statement "$f"; done
done
psql -q "$pg/postgres" -c "DROP DATABASE renga_statement" -c "DROP DATABASE renga_statement_a"
