#!/usr/bin/env bash
# Moving an organization between two deployments while its agent keeps sending, to watch
# (RFD 23). It builds bin/renga with make, creates two databases on a PostgreSQL server, runs
# deployment A (RENGA_DEPLOYMENT_ID=a) and deployment B (=b), a resolver mapping a to A and an
# agent with an intake key from A, then moves the organization with the renga CLI: export for a
# move at A (the agent's writes wait), download, import at B, complete at A. The resolver keeps
# answering A for a while (the agent backs off), B is down when the resolver is pointed at it,
# and at the end every observation the agent produced is at B exactly once. Everything it
# started is stopped and both databases are dropped when it ends, however it ends.
#
#   examples/move/run.sh
#
# Settings (environment):
#   RENGA_MOVE_POSTGRES  a maintenance database URL of a PostgreSQL server where this user can
#                        create databases (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable)
#   B_DOWN               seconds B is down during the move (default 30)
#   RESOLVER_LAG         seconds the resolver still answers A after the move (default 10)
#   PORT_BASE            the resolver listens on PORT_BASE, A on +1, B on +2 (default 18080)
set -euo pipefail

POSTGRES=${RENGA_MOVE_POSTGRES:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
B_DOWN=${B_DOWN:-30}
RESOLVER_LAG=${RESOLVER_LAG:-10}
PORT_BASE=${PORT_BASE:-18080}
RESOLVER=127.0.0.1:$PORT_BASE
A_URL=http://127.0.0.1:$((PORT_BASE + 1))
B_URL=http://127.0.0.1:$((PORT_BASE + 2))

cd "$(dirname "$0")/../.."
ROOT=$PWD
RENGA=$ROOT/bin/renga
WORK=$(mktemp -d "${TMPDIR:-/tmp}/renga-move.XXXXXX")
DB_A=renga_move_a_$$
DB_B=renga_move_b_$$
db_url() { # the URL of database $1 on the server of $POSTGRES
	local base=${POSTGRES%%\?*} query=
	[[ $POSTGRES == *\?* ]] && query="?${POSTGRES#*\?}"
	echo "${base%/*}/$1$query"
}
A_DB_URL=$(db_url "$DB_A")
B_DB_URL=$(db_url "$DB_B")

step=0
say() { step=$((step + 1)); printf '\n\033[1m== %d. %s\033[0m\n' "$step" "$*"; }
note() { printf '   %s\n' "$*"; }
die() { printf '\033[31mFAILED: %s\033[0m\n' "$*" >&2; exit 1; }

PIDS=()
cleanup() {
	local rc=$?
	for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
	for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
	psql -q "$POSTGRES" -c "DROP DATABASE IF EXISTS $DB_A WITH (FORCE)" -c "DROP DATABASE IF EXISTS $DB_B WITH (FORCE)" >/dev/null 2>&1 || true
	if [[ $rc -eq 0 ]]; then
		rm -rf "$WORK"
	else
		echo "logs kept in $WORK (a.log, b.log, resolver.log, agent.log)" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# json FIELD: the first string or number FIELD of the JSON on stdin (flat values only).
json() { grep -o "\"$1\": *\(\"[^\"]*\"\|[0-9-]*\)" | head -n1 | sed 's/^[^:]*: *//; s/^"//; s/"$//'; }

wait_ready() { # URL
	for _ in $(seq 1 300); do
		curl -fs "$1/readyz" >/dev/null 2>&1 && return 0
		sleep 0.1
	done
	die "$1 did not become ready"
}

SECRET_KEY=$(head -c 32 /dev/urandom | base64)
serve() { # NAME ID URL DB_URL: runs renga serve in the background, logging to NAME.log
	local name=$1 id=$2 url=$3 dburl=$4
	mkdir -p "$WORK/$name-data"
	RENGA_ENV=development RENGA_DEPLOYMENT_ID=$id RENGA_LISTEN=${url#http://} RENGA_PUBLIC_URL=$url \
		RENGA_DATABASE_URL=$dburl RENGA_DATA_DIR=$WORK/$name-data RENGA_SECRET_KEY=$SECRET_KEY \
		"$RENGA" serve >>"$WORK/$name.log" 2>&1 &
	PIDS+=($!)
	eval "${name^^}_PID=$!"
	wait_ready "$url"
}

# agent_said PATTERN: the last agent log line matching PATTERN, as "msg (retry in ...): error".
agent_said() {
	local line
	line=$(grep -- "$1" "$WORK/agent.log" | tail -n1) || return 0
	field() { echo "$line" | sed -nE 's/.*"'"$1"'":"(([^"\\]|\\.)*)".*/\1/p' | sed 's/\\"/"/g'; }
	printf '   agent: %s' "$(field msg)"
	[[ $line == *'"retry_in"'* ]] && printf ' (retry in %s)' "$(field retry_in)"
	[[ $line == *'"error"'* ]] && printf ': %s' "$(field error | cut -c1-120)"
	echo
}

agent_status() { "$RENGA" -o json agent status --config "$WORK/agent.yaml"; }
observations_in() { # DB_URL: "count distinct max" of the agent's observations' sequences
	psql -qtA -F' ' "$1" -c "SELECT count(*), count(DISTINCT data->>'sequence'), coalesce(max((data->>'sequence')::int), 0)
		FROM observations WHERE installation_id = '$INSTALLATION'"
}

say "Build bin/renga (make build)"
make --no-print-directory build

say "Two databases, $DB_A and $DB_B, migrated"
psql -q "$POSTGRES" -c "CREATE DATABASE $DB_A" -c "CREATE DATABASE $DB_B"
RENGA_DATABASE_URL=$A_DB_URL "$RENGA" migrate up >/dev/null 2>&1
RENGA_DATABASE_URL=$B_DB_URL "$RENGA" migrate up >/dev/null 2>&1

say "Deployment A ($A_URL, identifier a) and deployment B ($B_URL, identifier b)"
serve a a "$A_URL" "$A_DB_URL"
serve b b "$B_URL" "$B_DB_URL"
TOKEN_A=$(RENGA_DATABASE_URL=$A_DB_URL "$RENGA" -o json operator-token create --name move --scope organizations:write --scope transfers:write | json token)
TOKEN_B=$(RENGA_DATABASE_URL=$B_DB_URL "$RENGA" -o json operator-token create --name move --scope organizations:write --scope transfers:write | json token)
at_a() { RENGA_URL=$A_URL RENGA_OPERATOR_TOKEN=$TOKEN_A "$RENGA" "$@"; }
at_b() { RENGA_URL=$B_URL RENGA_OPERATOR_TOKEN=$TOKEN_B "$RENGA" "$@"; }
note "an operator token on each (transfers:write, organizations:write)"

say "At A: the organization acme, its owner, and an intake key"
ORG_A=$(at_a -o json org create acme --display-name "Acme" 2>/dev/null | json id)
note "organization $ORG_A"
at_a org invite "$ORG_A" ada@acme.example >/dev/null 2>&1
INVITE=
for _ in $(seq 1 100); do # the mail worker writes the invitation under RENGA_DATA_DIR/mail
	INVITE=$(grep -rhos 'renga_invite_[a-z0-9]*' "$WORK/a-data/mail" | head -n1 || true)
	[[ -n $INVITE ]] && break
	sleep 0.1
done
[[ -n $INVITE ]] || die "no invitation mail"
OWNER_KEY=$(echo "$INVITE" | RENGA_URL=$A_URL "$RENGA" -o json owner accept --display-name Ada | json api_key)
RENGA_URL=$A_URL RENGA_API_KEY=$OWNER_KEY "$RENGA" owner intake-key create --name hosts 2>/dev/null | cut -f4 >"$WORK/intake-key"
note "Ada accepted the invitation and created the intake key $(cut -c1-16 "$WORK/intake-key")... (it carries a)"

say "A resolver on $RESOLVER mapping a to A"
printf 'deployments:\n  a: %s\n  b: %s\n' "$A_URL" "$B_URL" >"$WORK/resolver.yaml"
"$RENGA" resolver serve --listen "$RESOLVER" --map "$WORK/resolver.yaml" >>"$WORK/resolver.log" 2>&1 &
RESOLVER_PID=$!
PIDS+=($RESOLVER_PID)
sleep 0.5
cat "$WORK/resolver.yaml" | sed 's/^/   /'

say "The agent: renga_url is the resolver, the intake key is A's"
cat >"$WORK/agent.yaml" <<EOF
renga_url: http://$RESOLVER
intake_key_file: $WORK/intake-key
state_dir: $WORK/agent-state
allow_insecure_http: true
interval: 1s
EOF
sed 's/^/   /' "$WORK/agent.yaml"
start_agent() { "$RENGA" agent run --config "$1" >>"$WORK/agent.log" 2>&1 & AGENT_PID=$!; PIDS+=($AGENT_PID); }
start_agent "$WORK/agent.yaml"
for _ in $(seq 1 100); do
	INSTALLATION=$(agent_status 2>/dev/null | json installation_id || true)
	[[ -n $INSTALLATION && $(agent_status | json home) == "$A_URL" ]] && break
	sleep 0.2
done
[[ -n $INSTALLATION ]] || die "the agent did not start"
sleep 4
note "installation $INSTALLATION, home $(agent_status | json home)"
note "at A: $(observations_in "$A_DB_URL" | cut -d' ' -f1) observations so far"

say "At A: export for a move (the agent's writes wait from now on: 503 moving)"
TRANSFER=$(at_a -o json transfer export "$ORG_A" --for-move --wait 2>/dev/null | json id)
note "transfer $TRANSFER succeeded"
at_a transfer download "$TRANSFER" --file "$WORK/acme.tar.gz" >/dev/null 2>&1
note "downloaded $(stat -c %s "$WORK/acme.tar.gz") bytes"
for _ in $(seq 1 100); do # the agent's next send meets the freeze
	grep -q '"the organization is being moved' "$WORK/agent.log" && break
	sleep 0.1
done
agent_said '"the organization is being moved'
note "A answered the agent 503 moving $(grep 'status=503' "$WORK/a.log" | grep -c "actor=$INSTALLATION" || true) time(s) so far"

say "At B: a new, empty organization, and the import"
ORG_B=$(at_b -o json org create acme --display-name "Acme" 2>/dev/null | json id)
at_b transfer import "$ORG_B" "$WORK/acme.tar.gz" >/dev/null 2>&1
note "imported into $ORG_B: $(observations_in "$B_DB_URL" | cut -d' ' -f1) observations, the installation with its public key"

say "At A: complete the move (the agent gets 410 moved)"
at_a transfer complete "$TRANSFER" --destination-url "$B_URL" >/dev/null 2>&1
note "the resolver still answers A for ${RESOLVER_LAG}s: the agent resolves again, gets A, backs off"
home_requests() { grep -c '"deployment":"a"' "$WORK/resolver.log" || true; }
before=$(home_requests)
sleep "$RESOLVER_LAG"
note "home requests at the resolver in ${RESOLVER_LAG}s: $(($(home_requests) - before)) (back-off from 1 s, doubling)"
agent_said '"the home answered 410 moved'
agent_said '"renga_url still answers the moved home'

say "B goes down; the resolver is pointed at B (kill -HUP)"
kill "$B_PID"
wait "$B_PID" 2>/dev/null || true
printf 'deployments:\n  a: %s\n  b: %s\n' "$B_URL" "$B_URL" >"$WORK/resolver.yaml"
kill -HUP "$RESOLVER_PID"
note "B is down for ${B_DOWN}s: the agent resolves B and retries it with back-off, keeping its queue"
sleep "$B_DOWN"
agent_said '"request failed"'
note "queue depth: $(agent_status | json queue_depth)"

say "B is back: the agent continues there with the same installation ID"
serve b b "$B_URL" "$B_DB_URL"
for _ in $(seq 1 600); do
	[[ $(agent_status | json home) == "$B_URL" && $(agent_status | json queue_depth) == 0 ]] && break
	sleep 0.2
done
note "home $(agent_status | json home), queue depth $(agent_status | json queue_depth)"
sleep 3

say "Stop the agent once its queue is empty"
kill "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
sed 's/^interval: .*/interval: 1h/' "$WORK/agent.yaml" >"$WORK/drain.yaml"
before=$(agent_status | json next_sequence)
start_agent "$WORK/drain.yaml" # collects once more at start, and sends everything queued
for _ in $(seq 1 600); do
	STATUS=$("$RENGA" -o json agent status --config "$WORK/drain.yaml")
	(($(echo "$STATUS" | json next_sequence) > before)) && [[ $(echo "$STATUS" | json queue_depth) == 0 ]] && break
	sleep 0.2
done
kill "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null || true
STATUS=$(agent_status)
PRODUCED=$(($(echo "$STATUS" | json next_sequence) - 1))
[[ $(echo "$STATUS" | json queue_depth) == 0 ]] || die "the queue did not drain: $STATUS"
[[ $(echo "$STATUS" | json installation_id) == "$INSTALLATION" ]] || die "the installation ID changed"

say "Every observation the agent produced is at B exactly once"
read -r count distinct max <<<"$(observations_in "$B_DB_URL")"
note "the agent produced $PRODUCED observations (sequences 1..$PRODUCED)"
note "B holds $count, $distinct distinct, the highest $max"
registrations=$(grep -c 'operation=registerInstallation' "$WORK/b.log" || true)
note "registrations at B: $registrations (the archive brought the installation; the intake key stayed at A)"
[[ $count == "$PRODUCED" && $distinct == "$PRODUCED" && $max == "$PRODUCED" && $registrations == 0 ]] ||
	die "not exactly once at B"
printf '\n\033[32mThe organization moved from A to B; its agent followed, and nothing was lost or duplicated.\033[0m\n'
