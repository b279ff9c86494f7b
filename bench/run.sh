#!/usr/bin/env bash
# Measures the operator API beside PostgreSQL's own ceiling on the same machine, in the same run
# (../shared/baselines): pgbench scripts A (intake), B (authenticated read) and C (keyed, audited
# create), each right before the Go benchmarks of its path against the same PostgreSQL, in
# ROUNDS rounds (3); each ratio is the median of its rounds' ratios. The ceilings on this machine
# move by a quarter within minutes: a ratio of two runs made minutes apart measures the machine
# as much as the server, and one of two runs made back to back does not.
#
#   bench/run.sh [seconds-per-pgbench-run]      (needs PostgreSQL at 127.0.0.1:5432, user postgres)
#   ROUNDS=3 BENCHTIME=4s                       (rounds; each Go benchmark's -benchtime)
#   BENCH_GOMAXPROCS=1                          (GOMAXPROCS of the Go benchmarks' process, server,
#                                                floor and load generator alike; Go's default if unset)
#   BENCH_GOGC=100                              (GOGC of the same process, and of the intake load's and the
#                                                transfer's; if unset, 400: what `renga serve` runs with,
#                                                server.DefaultGCPercent)
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
rounds=${ROUNDS:-3}
baselines=${BASELINES:-../shared/baselines}
pg="postgres://postgres@127.0.0.1:5432"
gogc=${BENCH_GOGC:-400} # server.DefaultGCPercent: the test servers run as `renga serve` does
gogc_label="$gogc (BENCH_GOGC)"
[ -n "${BENCH_GOGC:-}" ] || gogc_label="$gogc (renga serve's default)"
out=$(mktemp -d)
# One test binary for every Go measurement: nothing compiles between a pgbench run and its pair.
go test -c -o "$out/bench.test" ./bench/
export RENGA_TEST_DATABASE_URL="$pg/postgres?sslmode=disable"
gotest() { (cd bench && "$out/bench.test" "$@"); }

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

gobench() { # round regexp...: each regexp one run of the Go benchmarks, output appended to $out/go.round
  local r=$1; shift
  for re in "$@"; do
    GOMAXPROCS=${BENCH_GOMAXPROCS:-} GOGC=$gogc gotest -test.run '^$' -test.bench "$re" -test.benchmem -test.benchtime "${BENCHTIME:-4s}" | grep '^Benchmark' | tee -a "$out/go.$r"
  done
}
# The same server seen from outside its process: wrk (C, its own process, as lean as pgbench's
# client) against the test server, a bare net/http server with and without an access line, and
# the floor's GET, and one client's creates from renga and from the floor
# (bench/outside_load_test.go). Needs wrk (apt-get install wrk); without it the outside rows are
# left out.
outside() { # round measures-regexp: lines appended to $out/go.round
  command -v wrk >/dev/null || return 0
  RENGA_OUTSIDE_BENCH=1 RENGA_OUTSIDE_SECONDS="$secs" RENGA_OUTSIDE_ONLY="$2" GOMAXPROCS=${BENCH_GOMAXPROCS:-} GOGC=$gogc \
    gotest -test.count=1 -test.run '^TestOutsideLoad$' -test.v | grep '^Benchmark' | tee -a "$out/go.$1"
}
# The same with the server's process on one processor (GOMAXPROCS=1), its measures named
# .../procs=1: on two cores shared with PostgreSQL, what Go's idle processors cost a lone
# client's create (each wake-up starts a thread spinning for work), and what one processor costs
# the cheapest request's rate.
outside_one_processor() { # round measures-regexp
  command -v wrk >/dev/null || return 0
  RENGA_OUTSIDE_BENCH=1 RENGA_OUTSIDE_SECONDS="$secs" RENGA_OUTSIDE_ONLY="$2" GOMAXPROCS=1 GOGC=$gogc \
    gotest -test.count=1 -test.run '^TestOutsideLoad$' -test.v | grep '^Benchmark' |
    sed 's/^\(BenchmarkOutside[A-Za-z]*\)/\1\/procs=1/' | tee -a "$out/go.$1"
}
# Each path's pgbench script right before its Go benchmarks. Renga and the floor (below) take
# turns going first: of two benchmarks run back to back, the second tends to be the slower.
for r in $(seq "$rounds"); do
  echo "round $r of $rounds"
  pair() { if [ $((r % 2)) = 1 ]; then gobench "$r" "$1" "$2"; else gobench "$r" "$2" "$1"; fi; }
  run_pgbench "A.$r" -D payload="$(cat "$baselines/payload.json")" -f "$baselines/A_intake.sql" -c 16 -j 2 -T "$secs"
  pair '^BenchmarkIntake$' '^BenchmarkFloorIntake$'
  if [ $((r % 2)) = 1 ]; then outside "$r" '^Intake$'; outside "$r" '^FloorIntake$'; else outside "$r" '^FloorIntake$'; outside "$r" '^Intake$'; fi
  run_pgbench "B.$r" -f "$baselines/B_authread.sql" -c 4 -j 2 -T "$secs"
  pair '^BenchmarkGetOrganization$' '^BenchmarkFloorGetOrganization$'
  outside "$r" '^(Bare|BareLogged|Home|GetOrganization|FloorGetOrganization)$'
  run_pgbench "C8.$r" -f "$baselines/C_keyedcreate.sql" -c 8 -j 2 -T "$secs"
  pair '^BenchmarkCreateOrganization$/^clients=8$' '^BenchmarkFloorCreateOrganization$/^clients=8$'
  run_pgbench "C1.$r" -f "$baselines/C_keyedcreate.sql" -c 1 -j 1 -T "$secs"
  pair '^BenchmarkCreateOrganization$/^clients=1$' '^BenchmarkFloorCreateOrganization$/^clients=1$'
  outside "$r" '^(Floor)?CreateOrganization$'
  outside_one_processor "$r" '^((Floor)?CreateOrganization|Bare|Home)$'
  gobench "$r" '^Benchmark(Home|BareHandler|Healthz|HomeHandler)$'
done
# The create's own statements, in the server's two pipelined round trips, from pgbench at one
# client beside C again: the least any server sending them can take, with no HTTP and no Go.
PIPELINED=1 CLIENTS=1 BASELINE=C_keyedcreate.sql STATEMENT=bench/sql/create_statements.sql bash bench/statement.sh "$secs" 1 2>/dev/null >"$out/stmt"
# The same at 8 clients: the most creates per second any server sending them could reach.
PIPELINED=1 CLIENTS=8 BASELINE=C_keyedcreate.sql STATEMENT=bench/sql/create_statements.sql bash bench/statement.sh "$secs" 1 2>/dev/null >"$out/stmt8"

RENGA_LOAD=1 GOGC=$gogc gotest -test.count=1 -test.run TestIntakeLoad -test.v | grep intake-load | tee "$out/load"

RENGA_LOAD=1 gotest -test.count=1 -test.run TestAgentFootprint -test.v | grep agent-footprint | tee "$out/agent"

# Terraform: examples/scale against a fresh server beside the same graph of terraform_data.
if command -v terraform >/dev/null; then
  RENGA_TF_BENCH=1 gotest -test.count=1 -test.run TestTerraformScale -test.v | grep terraform-scale | tee "$out/tf"
fi

# Transfers: export and import of 1M observations beside COPY TO / COPY FROM of the same rows,
# with the server's peak RSS above idle during each (target: >= 0.5 of COPY, < 64 MiB).
RENGA_TRANSFER_BENCH=1 GOGC=$gogc gotest -test.count=1 -test.timeout 30m -test.run TestTransferLoad -test.v | grep transfer-load | tee "$out/transfer"

metric() { # round benchmark-name unit
  awk -v name="$2" -v unit="$3" '$1 ~ "^"name"(-[0-9]+)?$" { for (i = 2; i < NF; i++) if ($(i+1) == unit) print $i }' "$out/go.$1" | head -1
}
value() { # round kind args: kind go (benchmark-name unit), tps or lat (pgbench run), pgcpu or clientcpu (pgbench run)
  local r=$1 k=$2; shift 2
  case $k in
    go) metric "$r" "$@" ;;
    tps) tps "$out/$1.$r" ;;
    lat) lat "$out/$1.$r" ;;
    pgcpu) pg_us_per_txn "$1.$r" ;;
    clientcpu) client_us_per_txn "$1.$r" ;;
  esac
}
median() { # numbers on stdin, one per line
  grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
med() { # kind args: the median over the rounds of value kind args
  for r in $(seq "$rounds"); do value "$r" "$@"; done | median
}
ratio_row() { # label target "numerator kind args" "denominator kind args" [width]: both medians, each round's ratio, their median
  local label=$1 target=$2 num=$3 den=$4 rs="" n d
  for r in $(seq "$rounds"); do
    # shellcheck disable=SC2086
    n=$(value "$r" $num); d=$(value "$r" $den)
    rs="$rs $(echo "$n / $d" | bc -l)"
  done
  # shellcheck disable=SC2086
  printf '%-46s %10.2f %10.2f  ' "$label" "$(med $num)" "$(med $den)"
  for x in $rs; do printf '%6.2f' "$x"; done
  printf '  %6.2f %7s\n' "$(echo "$rs" | tr ' ' '\n' | median)" "$target"
}
printf '\nGo benchmarks: GOMAXPROCS=%s GOGC=%s; each test server logs every request to a file, as to standard error in production\n' \
  "${BENCH_GOMAXPROCS:-default ($(nproc))}" "$gogc_label"
printf '\n%-46s %10s %10s  %-*s  %6s %7s\n' "measure (renga, ceiling: medians of the rounds)" renga ceiling $((6 * rounds)) "ratio by round" median target
ratio_row "GET /organizations/{id} req/s (vs B tps)" ">=0.6" "go BenchmarkGetOrganization req/s" "tps B"
ratio_row "POST /organizations req/s, 8 clients (vs C)" ">=0.8" "go BenchmarkCreateOrganization/clients=8 req/s" "tps C8"
ratio_row "POST /organizations p50 ms, 1 client (vs C)" "<=1.5" "go BenchmarkCreateOrganization/clients=1 p50-ms" "lat C1"
printf '%-46s %10.2f\n' "POST /organizations p99 ms, 1 client" "$(med go BenchmarkCreateOrganization/clients=1 p99-ms)"
printf '  its statements alone, from pgbench, 1 client (create_statements.sql pipelined, beside C again):\n'
sed 's/^/    /' "$out/stmt"
printf '  the same at 8 clients, beside C at 8 clients (the most creates/s any server sending these statements could reach):\n'
sed 's/^/    /' "$out/stmt8"
printf '%-46s %10.0f\n' "GET /healthz req/s (same server)" "$(med go BenchmarkHealthz req/s)"
ratio_row "signed 1 KB batches/s, 16 agents (vs A tps)" ">=0.8" "go BenchmarkIntake batches/s" "tps A"
printf '%-46s %10.2f\n' "intake p99 ms at full load" "$(med go BenchmarkIntake p99-ms)"
printf '%s (target: p99 < 25 ms at half the maximum rate)\n' "$(head -1 "$out/load")"
tail -n +2 "$out/load" # what else ran during the half-rate phase
ratio_row "GET /api/v1/agent/home req/s (vs bare net/http)" ">=0.9" "go BenchmarkHome req/s" "go BenchmarkBareHandler req/s"
printf '  the server'"'"'s own code for it, called directly (no network, one at a time): %.1f µs, %s allocations per request\n' \
  "$(echo "$(med go BenchmarkHomeHandler ns/op) / 1000" | bc -l)" "$(med go BenchmarkHomeHandler allocs/op)"
if command -v wrk >/dev/null; then
  printf '\nFrom outside the process: wrk (2 threads, 8 connections; 16 for intake, one for the latency of creates) against the test server; the process is the server alone:\n'
  ratio_row "GET /organizations/{id} req/s (vs B tps)" ">=0.6" "go BenchmarkOutsideGetOrganization req/s" "tps B"
  ratio_row "  floor GET req/s (vs B tps)" "" "go BenchmarkOutsideFloorGetOrganization req/s" "tps B"
  ratio_row "signed 1 KB batches/s, 16 agents (vs A tps)" ">=0.8" "go BenchmarkOutsideIntake req/s" "tps A"
  ratio_row "  floor batches/s (vs A tps)" "" "go BenchmarkOutsideFloorIntake req/s" "tps A"
  printf '%-46s %10.2f\n' "intake p99 ms at full load (16 connections)" "$(med go BenchmarkOutsideIntake p99-ms)"
  ratio_row "GET /api/v1/agent/home req/s (vs bare net/http)" ">=0.9" "go BenchmarkOutsideHome req/s" "go BenchmarkOutsideBare req/s"
  ratio_row "  bare + one access line (vs bare net/http)" "" "go BenchmarkOutsideBareLogged req/s" "go BenchmarkOutsideBare req/s"
  ratio_row "  home (vs bare + one access line)" "" "go BenchmarkOutsideHome req/s" "go BenchmarkOutsideBareLogged req/s"
  ratio_row "POST /organizations p50 ms, 1 client (vs C)" "<=1.5" "go BenchmarkOutsideCreateOrganization p50-ms" "lat C1"
  ratio_row "  floor POST p50 ms, 1 client (vs C)" "" "go BenchmarkOutsideFloorCreateOrganization p50-ms" "lat C1"
  printf '%-46s %10.2f\n' "POST /organizations p99 ms, 1 client" "$(med go BenchmarkOutsideCreateOrganization p99-ms)"
  printf '  the server'"'"'s process on one processor (GOMAXPROCS=1):\n'
  ratio_row "  POST p50 ms, 1 client (vs C)" "" "go BenchmarkOutsideCreateOrganization/procs=1 p50-ms" "lat C1"
  ratio_row "  floor POST p50 ms, 1 client (vs C)" "" "go BenchmarkOutsideFloorCreateOrganization/procs=1 p50-ms" "lat C1"
  ratio_row "  home req/s (vs bare, one processor too)" "" "go BenchmarkOutsideHome/procs=1 req/s" "go BenchmarkOutsideBare/procs=1 req/s"
  printf '  the server'"'"'s CPU per request, µs (medians): home %.1f, bare %.1f, bare + access line %.1f; GET %.0f (PostgreSQL %.0f), floor GET %.0f (PostgreSQL %.0f)\n' \
    "$(med go BenchmarkOutsideHome go-cpu-us/op)" "$(med go BenchmarkOutsideBare go-cpu-us/op)" "$(med go BenchmarkOutsideBareLogged go-cpu-us/op)" \
    "$(med go BenchmarkOutsideGetOrganization go-cpu-us/op)" "$(med go BenchmarkOutsideGetOrganization pg-cpu-us/op)" \
    "$(med go BenchmarkOutsideFloorGetOrganization go-cpu-us/op)" "$(med go BenchmarkOutsideFloorGetOrganization pg-cpu-us/op)"
  printf '  a signed batch: %.0f µs (PostgreSQL %.0f), floor %.0f (PostgreSQL %.0f)\n' \
    "$(med go BenchmarkOutsideIntake go-cpu-us/op)" "$(med go BenchmarkOutsideIntake pg-cpu-us/op)" \
    "$(med go BenchmarkOutsideFloorIntake go-cpu-us/op)" "$(med go BenchmarkOutsideFloorIntake pg-cpu-us/op)"
  printf '  one client'"'"'s create: %.0f µs (PostgreSQL %.0f), floor %.0f (PostgreSQL %.0f)\n' \
    "$(med go BenchmarkOutsideCreateOrganization go-cpu-us/op)" "$(med go BenchmarkOutsideCreateOrganization pg-cpu-us/op)" \
    "$(med go BenchmarkOutsideFloorCreateOrganization go-cpu-us/op)" "$(med go BenchmarkOutsideFloorCreateOrganization pg-cpu-us/op)"
fi
printf '\nThe same requests served by the least a Go server must do (bench/floor_bench_test.go: same net/http, pool,\nstatements and round trips; no router, validation, access log or generated code), in the same rounds:\n'
ratio_row "GET req/s, renga vs floor" "" "go BenchmarkGetOrganization req/s" "go BenchmarkFloorGetOrganization req/s"
ratio_row "POST req/s 8 clients, renga vs floor" "" "go BenchmarkCreateOrganization/clients=8 req/s" "go BenchmarkFloorCreateOrganization/clients=8 req/s"
ratio_row "POST p50 ms 1 client, renga vs floor" "" "go BenchmarkCreateOrganization/clients=1 p50-ms" "go BenchmarkFloorCreateOrganization/clients=1 p50-ms"
ratio_row "intake batches/s, renga vs floor (cached key)" "" "go BenchmarkIntake batches/s" "go BenchmarkFloorIntake batches/s"
ratio_row "floor GET req/s vs B" "" "go BenchmarkFloorGetOrganization req/s" "tps B"
ratio_row "floor POST req/s 8 clients vs C" "" "go BenchmarkFloorCreateOrganization/clients=8 req/s" "tps C8"
ratio_row "floor POST p50 ms 1 client vs C" "" "go BenchmarkFloorCreateOrganization/clients=1 p50-ms" "lat C1"
ratio_row "floor intake batches/s vs A" "" "go BenchmarkFloorIntake batches/s" "tps A"
allocs() { med go "$1" allocs/op; }
printf 'allocations per request (server and load generator, in one process): GET %s, POST %s, intake %s, home %s, bare %s\n' \
  "$(allocs BenchmarkGetOrganization)" "$(allocs BenchmarkCreateOrganization/clients=8)" "$(allocs BenchmarkIntake)" \
  "$(allocs BenchmarkHome)" "$(allocs BenchmarkBareHandler)"
printf '\nCPU per request in microseconds, medians of the rounds (PostgreSQL: its backends, /proc; Go: the benchmark\nprocess, server and load generator together). On two shared cores a rate is about 2 s of CPU / the CPU a\nrequest costs everyone:\n'
printf '%-32s %7s %7s %7s   %-21s %7s %8s %7s\n' request pg go total baseline pg pgbench total
cpu_row() { # label benchmark baseline-label baseline-name
  local p g bp bc; p=$(med go "$2" pg-cpu-us/op); g=$(med go "$2" go-cpu-us/op)
  bp=$(med pgcpu "$4"); bc=$(med clientcpu "$4")
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
[ -s "$out/tf" ] && grep -v ' cpu ' "$out/tf" | sed '/^terraform-scale apply ratio=/ s/$/  (target: ratio <= 1.2 each)/' && grep ' cpu ' "$out/tf"
psql -q "$pg/postgres" -c "DROP DATABASE renga_baseline"
