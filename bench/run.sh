#!/usr/bin/env bash
# Measures the operator API beside PostgreSQL's own ceiling on the same machine, in the same run
# (../shared/baselines): pgbench scripts A (intake), B (authenticated read) and C (keyed, audited
# create), then the Go benchmarks against the same PostgreSQL, then the ratios.
#
#   bench/run.sh [seconds-per-pgbench-run]      (needs PostgreSQL at 127.0.0.1:5432, user postgres)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15}
baselines=${BASELINES:-../shared/baselines}
pg="postgres://postgres@127.0.0.1:5432"
out=$(mktemp -d)

psql -q "$pg/postgres" -c "DROP DATABASE IF EXISTS renga_baseline" -c "CREATE DATABASE renga_baseline"
psql -q "$pg/renga_baseline" -f "$baselines/schema.sql" >/dev/null

tps() { sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$1" | head -1; }
lat() { sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$1"; }

# CPU per transaction of pgbench's backends: sampled from /proc every 0.2 s while pgbench runs
# (the last sample of each backend counts; what a backend uses in its last 0.2 s is missed, a
# fraction of a percent of a run). The Go benchmarks report the same for the server's backends
# (bench/cpu_test.go), so the two are compared like for like.
sample_backends() { # output-file: appends "pid ticks" lines until killed
  while :; do
    for p in $(psql -qAt "$pg/postgres" -c "SELECT pid FROM pg_stat_activity WHERE datname = 'renga_baseline'"); do
      sed 's/.*) //' "/proc/$p/stat" 2>/dev/null | awk -v p="$p" '{ print p, $12 + $13 }'
    done >>"$1" || true
    sleep 0.2
  done
}
run_pgbench() { # name pgbench-arguments...: output in $out/name, backend CPU samples in $out/name.cpu
  local name=$1; shift
  psql -qc CHECKPOINT "$pg/renga_baseline" # as the Go benchmarks do (startCPU in bench/cpu_test.go)
  sample_backends "$out/$name.cpu" & local sampler=$!
  { time -p pgbench -n -M prepared "$@" "$pg/renga_baseline" >"$out/$name" 2>&1; } 2>"$out/$name.time"
  kill "$sampler"; wait "$sampler" 2>/dev/null || true
}
client_us_per_txn() { # name: pgbench's own CPU per transaction (its user + system time), in µs
  local n; n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out/$1")
  awk -v n="$n" '$1 == "user" || $1 == "sys" { s += $2 } END { printf "%.0f\n", s * 1e6 / n }' "$out/$1.time"
}
pg_us_per_txn() { # name: the backends' CPU per transaction, in µs
  local n; n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out/$1")
  awk -v hz="$(getconf CLK_TCK)" -v n="$n" '{ if ($2 > m[$1]) m[$1] = $2 } END { for (p in m) s += m[p]; printf "%.0f\n", s * 1e6 / hz / n }' "$out/$1.cpu"
}

run_pgbench A -D payload="$(cat "$baselines/payload.json")" -f "$baselines/A_intake.sql" -c 16 -j 2 -T "$secs"
run_pgbench B -f "$baselines/B_authread.sql" -c 4 -j 2 -T "$secs"
run_pgbench C8 -f "$baselines/C_keyedcreate.sql" -c 8 -j 2 -T "$secs"
run_pgbench C1 -f "$baselines/C_keyedcreate.sql" -c 1 -j 1 -T "$secs"
# The create's own statements, in the server's two pipelined round trips, from pgbench at one
# client beside C again: the least any server sending them can take, with no HTTP and no Go.
PIPELINED=1 CLIENTS=1 BASELINE=C_keyedcreate.sql STATEMENT=bench/sql/create_statements.sql bash bench/statement.sh "$secs" 1 2>/dev/null >"$out/stmt"

RENGA_TEST_DATABASE_URL="$pg/postgres?sslmode=disable" \
  go test -run '^$' -bench 'Healthz|GetOrganization|CreateOrganization|Intake|Home|BareHandler' -benchmem -benchtime "${BENCHTIME:-5s}" ./bench/ | tee "$out/go"

RENGA_LOAD=1 RENGA_TEST_DATABASE_URL="$pg/postgres?sslmode=disable" \
  go test -count=1 -run TestIntakeLoad -v ./bench/ | grep intake-load | tee "$out/load"

RENGA_LOAD=1 RENGA_TEST_DATABASE_URL="$pg/postgres?sslmode=disable" \
  go test -count=1 -run TestAgentFootprint -v ./bench/ | grep agent-footprint | tee "$out/agent"

# Terraform: examples/scale against a fresh server beside the same graph of terraform_data.
if command -v terraform >/dev/null; then
  RENGA_TF_BENCH=1 RENGA_TEST_DATABASE_URL="$pg/postgres?sslmode=disable" \
    go test -count=1 -run TestTerraformScale -v ./bench/ | grep terraform-scale | tee "$out/tf"
fi

# Transfers: export and import of 1M observations beside COPY TO / COPY FROM of the same rows,
# with the server's peak RSS above idle during each (target: >= 0.5 of COPY, < 64 MiB).
RENGA_TRANSFER_BENCH=1 RENGA_TEST_DATABASE_URL="$pg/postgres?sslmode=disable" \
  go test -count=1 -timeout 30m -run TestTransferLoad -v ./bench/ | grep transfer-load | tee "$out/transfer"

metric() { # benchmark-name unit
  awk -v name="$1" -v unit="$2" '$1 ~ "^"name"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$out/go" | head -1
}
A=$(tps "$out/A"); B=$(tps "$out/B"); C8=$(tps "$out/C8"); C1=$(lat "$out/C1")
intake=$(metric BenchmarkIntake batches/s)
intake99=$(metric BenchmarkIntake p99-ms)
home=$(metric BenchmarkHome req/s)
bare=$(metric BenchmarkBareHandler req/s)
get=$(metric BenchmarkGetOrganization req/s)
health=$(metric BenchmarkHealthz req/s)
c8=$(metric BenchmarkCreateOrganization/clients=8 req/s)
allocs() { metric "$1" allocs/op; }
p50=$(metric BenchmarkCreateOrganization/clients=1 p50-ms)
p99=$(metric BenchmarkCreateOrganization/clients=1 p99-ms)
printf '\n%-46s %10s %12s %8s %8s\n' measure renga ceiling ratio target
printf '%-46s %10.0f %12.0f %8.2f %8s\n' "GET /organizations/{id} req/s (vs B tps)" "$get" "$B" "$(echo "$get / $B" | bc -l)" ">=0.6"
printf '%-46s %10.0f %12.0f %8.2f %8s\n' "POST /organizations req/s, 8 clients (vs C)" "$c8" "$C8" "$(echo "$c8 / $C8" | bc -l)" ">=0.8"
printf '%-46s %10.2f %12.2f %8.2f %8s\n' "POST /organizations p50 ms, 1 client (vs C)" "$p50" "$C1" "$(echo "$p50 / $C1" | bc -l)" "<=1.5"
printf '%-46s %10.2f\n' "POST /organizations p99 ms, 1 client" "$p99"
printf '  its statements alone, from pgbench, 1 client (create_statements.sql pipelined, beside C again):\n'
sed 's/^/    /' "$out/stmt"
printf '%-46s %10.0f\n' "GET /healthz req/s (same server)" "$health"
printf '%-46s %10.0f %12.0f %8.2f %8s\n' "signed 1 KB batches/s, 16 agents (vs A tps)" "$intake" "$A" "$(echo "$intake / $A" | bc -l)" ">=0.8"
printf '%-46s %10.2f\n' "intake p99 ms at full load" "$intake99"
printf '%s (target: p99 < 25 ms at half the maximum rate)\n' "$(cat "$out/load")"
printf '%-46s %10.0f %12.0f %8.2f %8s\n' "GET /api/v1/agent/home req/s (vs bare net/http)" "$home" "$bare" "$(echo "$home / $bare" | bc -l)" ">=0.9"
fget=$(metric BenchmarkFloorGetOrganization req/s)
fc8=$(metric BenchmarkFloorCreateOrganization/clients=8 req/s)
fp50=$(metric BenchmarkFloorCreateOrganization/clients=1 p50-ms)
fintake=$(metric BenchmarkFloorIntake batches/s)
printf '\nThe same requests served by the least a Go server must do (bench/floor_bench_test.go: same net/http, pool,\nstatements and round trips; no router, validation, access log or generated code):\n'
printf '%-46s %10.0f %12.0f %8.2f\n' "GET req/s, renga vs floor" "$get" "$fget" "$(echo "$get / $fget" | bc -l)"
printf '%-46s %10.0f %12.0f %8.2f\n' "POST req/s 8 clients, renga vs floor" "$c8" "$fc8" "$(echo "$c8 / $fc8" | bc -l)"
printf '%-46s %10.2f %12.2f %8.2f\n' "POST p50 ms 1 client, renga vs floor" "$p50" "$fp50" "$(echo "$p50 / $fp50" | bc -l)"
printf '%-46s %10.0f %12.0f %8.2f\n' "intake batches/s, renga vs floor (cached key)" "$intake" "$fintake" "$(echo "$intake / $fintake" | bc -l)"
printf '%-46s %8.2f %8.2f %8.2f\n' "floor's own ratio to pgbench: GET, POST8, intake" "$(echo "$fget / $B" | bc -l)" "$(echo "$fc8 / $C8" | bc -l)" "$(echo "$fintake / $A" | bc -l)"
printf 'allocations per request (server and load generator, in one process): GET %s, POST %s, intake %s, home %s, bare %s\n' \
  "$(allocs BenchmarkGetOrganization)" "$(allocs BenchmarkCreateOrganization/clients=8)" "$(allocs BenchmarkIntake)" \
  "$(allocs BenchmarkHome)" "$(allocs BenchmarkBareHandler)"
printf '\nCPU per request in microseconds (PostgreSQL: its backends, /proc; Go: the benchmark process, server and\nload generator together). On two shared cores a rate is about 2 s of CPU / the CPU a request costs everyone:\n'
printf '%-32s %7s %7s %7s   %-21s %7s %8s %7s\n' request pg go total baseline pg pgbench total
cpu_row() { # label benchmark baseline-label baseline-name
  local p g bp bc; p=$(metric "$2" pg-cpu-us/op); g=$(metric "$2" go-cpu-us/op)
  bp=$(pg_us_per_txn "$4"); bc=$(client_us_per_txn "$4")
  printf '%-32s %7.0f %7.0f %7.0f   %-21s %7.0f %8.0f %7.0f\n' "$1" "$p" "$g" "$(echo "$p + $g" | bc -l)" "$3" "$bp" "$bc" "$(echo "$bp + $bc" | bc -l)"
}
cpu_row "GET /organizations/{id}" BenchmarkGetOrganization "pgbench B" B
cpu_row "  floor" BenchmarkFloorGetOrganization "" B
cpu_row "POST /organizations, 8 clients" BenchmarkCreateOrganization/clients=8 "pgbench C, 8 clients" C8
cpu_row "  floor" BenchmarkFloorCreateOrganization/clients=8 "" C8
cpu_row "POST /organizations, 1 client" BenchmarkCreateOrganization/clients=1 "pgbench C, 1 client" C1
cpu_row "signed batch, 16 agents" BenchmarkIntake "pgbench A" A
cpu_row "  floor" BenchmarkFloorIntake "" A
sed 's/^ *agent_footprint_test.go:[0-9]*: //' "$out/agent"
printf '(target, for renga-agent: RSS <= 25 MiB, idle CPU about 0; renga agent run, the CLI, has none)\n'
sed 's/^ *transfer_load_test.go:[0-9]*: //' "$out/transfer"
[ -s "$out/tf" ] && printf '%s (target: ratio <= 1.2 each)\n' "$(grep -v ' cpu ' "$out/tf")" && grep ' cpu ' "$out/tf"
psql -q "$pg/postgres" -c "DROP DATABASE renga_baseline"
