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
# and CLIENTS (16) measure another path the same way, e.g. a keyed create beside C (its script
# is one implicit transaction: PIPELINED=1):
#   PIPELINED=1 BASELINE=C_keyedcreate.sql STATEMENT=bench/sql/create_statements.sql CLIENTS=8 bench/statement.sh
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
. bench/statement_dbs.sh
statement_dbs "$pg"
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
  pipelined "$statement" "$p"
  statement=$p
fi
for _ in $(seq "$rounds"); do
  run renga_statement_a "$baselines/${BASELINE:-A_intake.sql}"
  run renga_statement "$statement"
  for f in ${VARIANTS:-}; do run renga_statement "$f"; done
done
psql -q "$pg/postgres" -c "DROP DATABASE renga_statement" -c "DROP DATABASE renga_statement_a"
