#!/usr/bin/env bash
# Counts the instructions a PostgreSQL backend executes per transaction (valgrind's callgrind) for
# pgbench C (the keyed create's ceiling) and for the create's statements as the server sends them
# (bench/sql/create_statements.sql, pipelined): what PostgreSQL's own CPU for a create is, apart
# from the machine's other load. An instruction count is the same from run to run of the same
# binaries and inputs whatever else the machine does, where a rate, or the backends' CPU time
# sampled from /proc (bench/statement.sh), moves by a fifth on a shared machine.
#
#   bench/pgcallgrind.sh [transactions]   (as root; needs valgrind and PostgreSQL 15's binaries)
#
# It runs a cluster of its own (initdb in a temporary directory, port 5499, run as the postgres
# user) with the baselines' schema and the project's migrations, warms it with 5000 transactions
# of each script outside valgrind, then starts it under callgrind and runs each script from one
# client twice, 100 transactions and 100 + N (400 by default): the difference of the two
# backends' counts over N is the count per transaction, without the backend's start and its
# first executions. VARIANTS="a.sql b.sql" adds pgbench scripts run the same way on the project's
# database (pipelined already, as a variant of the create sent as the server sends it); SETUP (an
# SQL file) runs on the project's database before the warm-up. TOP=1 also prints the functions
# that cost the create most (inclusive), from its longer run; KEEP=1 leaves the cluster's directory
# (and valgrind's files) behind.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-400}
bin=${PGBIN:-/usr/lib/postgresql/15/bin}
baselines=${BASELINES:-../shared/baselines}
port=5499
dir=$(mktemp -d)
chown postgres "$dir"
pg="postgres://postgres@127.0.0.1:$port"
as_postgres() { su postgres -c "$*"; }
stop() { as_postgres "$bin/pg_ctl -D $dir/data stop -m fast -w" >/dev/null 2>&1 || true; }
trap 'stop; [ -n "${KEEP:-}" ] || rm -rf "$dir"' EXIT

as_postgres "$bin/initdb -A trust -D $dir/data" >/dev/null
as_postgres "$bin/pg_ctl -D $dir/data -o '-p $port -k $dir -c autovacuum=off' -l $dir/log start -w" >/dev/null
. bench/statement_dbs.sh
statement_dbs "$pg"
create="$dir/create_statements.sql"
pipelined bench/sql/create_statements.sql "$create"
scripts=("C_keyedcreate renga_statement_a $baselines/C_keyedcreate.sql" "create_statements renga_statement $create")
for f in ${VARIANTS:-}; do scripts+=("$(basename "$f" .sql) renga_statement $f"); done
for s in "${scripts[@]}"; do
  set -- $s
  pgbench -n -M prepared -f "$3" -c 4 -j 2 -t 5000 "$pg/$2" >/dev/null 2>&1
done
stop

mkdir "$dir/cg" && chown postgres "$dir/cg"
as_postgres "nohup valgrind --tool=callgrind --trace-children=yes --callgrind-out-file=$dir/cg/out.%p \
  $bin/postgres -D $dir/data -p $port -k $dir -c autovacuum=off >$dir/valgrind.log 2>&1 &"
for _ in $(seq 120); do pg_isready -q -h 127.0.0.1 -p "$port" && break; sleep 1; done

count() { # database script transactions: the instructions of the backend that ran them, and its file
  local before after f ir best=0 file=""
  before=$(ls "$dir/cg")
  pgbench -n -M prepared -f "$2" -c 1 -t "$3" "$pg/$1" >"$dir/pgbench.out" 2>&1 || { cat "$dir/pgbench.out" >&2; exit 1; }
  # Each backend writes its counts as it exits, after pgbench has: wait until no file has come
  # for three seconds (pgbench's first connection, which checks the server, has a file too).
  after=$(ls "$dir/cg") quiet=0
  for _ in $(seq 60); do
    sleep 1
    if [ "$(ls "$dir/cg")" = "$after" ] && [ "$after" != "$before" ]; then
      quiet=$((quiet + 1)); [ "$quiet" -ge 3 ] && break
    else
      after=$(ls "$dir/cg") quiet=0
    fi
  done
  for f in $(comm -13 <(echo "$before" | sort) <(echo "$after" | sort)); do
    ir=$(awk '/^(summary|totals):/ { print $2; exit }' "$dir/cg/$f")
    if [ "${ir:-0}" -gt "$best" ]; then best=$ir; file=$f; fi
  done
  echo "$best $dir/cg/$file"
}
printf 'PostgreSQL backend instructions per transaction (callgrind; 1 client; %d transactions after 100):\n' "$n"
for s in "${scripts[@]}"; do
  set -- $s
  read -r a _ < <(count "$2" "$3" 100)
  read -r b file < <(count "$2" "$3" $((100 + n)))
  printf '  %-22s %9d\n' "$1" $(((b - a) / n))
  if [ "$1" = create_statements ] && [ -n "${TOP:-}" ]; then topfile=$file; fi
done
if [ -n "${topfile:-}" ]; then
  printf 'the create'"'"'s backend, inclusive instructions by function (whole run):\n'
  callgrind_annotate --inclusive=yes "$topfile" 2>/dev/null | grep -E '^ *[0-9,]+ \(' | grep -v "'" | sed -n 1,60p |
    grep -E 'Exec|Portal|bt|text|varstr|stringToNode|RI_|SPI|Plan|plan|XLog|Commit|Lock|sha256|heap_insert' | head -30
fi
