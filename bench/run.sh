#!/usr/bin/env bash
# The load harness: the release server on PostgreSQL, measured with wrk on loopback in one run.
#
# 1. Installs wrk from Debian's packages if it is missing, and builds the release binary.
# 2. Drops and recreates the database $BENCH_DB (default trainscaler_bench) on $BENCH_PG
#    (default the local PostgreSQL, postgres://postgres@127.0.0.1:5432, trust auth).
# 3. Starts `trainscaler serve` on it on a free loopback port: ingestion rate limits off, a
#    concurrency limit above wrk's connections (nothing is shed), the reconciler off (this
#    measures the API, not actuation).
# 4. Mints an API key with `trainscaler keys create --scope decide,ingest,read` and, with the
#    first-start admin key, creates $BENCH_POOLS pools of 8 registered workers with fresh
#    signals, so that pool decisions have something to decide on.
# 5. Runs wrk for the same duration against each of:
#      GET  /healthz                              the ceiling: routing, auth-free, no work
#      GET  /v1/offerings?gpu=A100&min_gpus=8     a catalog query from memory, 78 items of JSON
#      GET  /v1/offerings/aws/p4d.24xlarge        one type, its price history read from PostgreSQL
#      POST /decide {"job"}                       instance selection over the whole catalog
#      POST /decide {"pool"}, one hot pool        every writing call queues on one row lock
#      POST /decide {"pool"}, spread over pools
#      POST /v1/webhooks/metrics                  $BENCH_BATCH new samples per request
#    and prints requests/s, p50 and p99 latency, each one's ratio to /healthz, non-2xx and
#    socket errors, and the server's peak RSS (VmHWM) after each run.
# Fails if any response was not 2xx or any request errored (a benchmark of errors is no
# benchmark). Shared machines are noisy: compare ratios, run it more than once.
#
# usage: bench/run.sh [-d SECONDS] [-t THREADS] [-c CONNECTIONS]
#   -d  seconds per endpoint      (BENCH_DURATION, default 10)
#   -t  wrk threads               (BENCH_THREADS, default 2)
#   -c  wrk connections           (BENCH_CONNECTIONS, default 32)
#   BENCH_TIMEOUT: wrk's per-request timeout in seconds (default 30, the server's own request
#   timeout: wrk leaves requests it gave up on out of the latency figures, so a shorter one
#   would flatter p99; past 30 s the server answers 408, which counts as non-2xx)
#   BENCH_PG, BENCH_DB, BENCH_POOLS (20), BENCH_BATCH (100 samples per ingestion request),
#   CARGO_TARGET_DIR (where the release binary is built)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)

duration=${BENCH_DURATION:-10}
threads=${BENCH_THREADS:-2}
connections=${BENCH_CONNECTIONS:-32}
while getopts "d:t:c:h" opt; do
    case "$opt" in
        d) duration=$OPTARG ;;
        t) threads=$OPTARG ;;
        c) connections=$OPTARG ;;
        *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 2 ;;
    esac
done
pg=${BENCH_PG:-postgres://postgres@127.0.0.1:5432}
db=${BENCH_DB:-trainscaler_bench}
export BENCH_POOLS=${BENCH_POOLS:-20}
export BENCH_BATCH=${BENCH_BATCH:-100}
export BENCH_DIR="$repo/bench"
timeout=${BENCH_TIMEOUT:-30}

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
for n in "$duration" "$threads" "$connections" "$BENCH_POOLS" "$BENCH_BATCH" "$timeout"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "durations, counts and sizes must be positive integers, not '$n'"
done
[[ "$db" =~ ^[a-z_][a-z0-9_]*$ ]] || die "BENCH_DB must be a plain lower-case name, not '$db'"

if ! command -v wrk >/dev/null 2>&1; then
    echo "installing wrk from Debian's packages"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null
fi
for tool in psql curl python3; do
    command -v "$tool" >/dev/null 2>&1 || die "$tool is missing (apt-get install -y postgresql-client curl python3)"
done
psql "$pg/postgres" -X -w -qAtc 'SELECT 1' >/dev/null 2>&1 ||
    die "PostgreSQL does not answer at $pg (start it: pg_ctlcluster --skip-systemctl-redirect 15 main start, or bash .ci/run)"

echo "building the release binary"
cargo build --release --locked --quiet
bin="${CARGO_TARGET_DIR:-$repo/target}/release/trainscaler"
[[ -x "$bin" ]] || die "no release binary at $bin"

psql "$pg/postgres" -X -w -q -v ON_ERROR_STOP=1 \
    -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
export DATABASE_URL="$pg/$db"

work=$(mktemp -d)
server=""
cleanup() {
    if [[ -n "$server" ]]; then
        kill "$server" 2>/dev/null || true
        wait "$server" 2>/dev/null || true
    fi
    rm -rf "$work"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
# wrk never has more than $connections requests in flight; twice that (and the default at
# least) keeps the load shedder out of the numbers.
max_concurrent=$((connections * 2 > 512 ? connections * 2 : 512))
# wrk waits 5 s longer than the server's own timeout, so a slow request is answered (408)
# rather than dropped.
TRAINSCALER_BIND="127.0.0.1:$port" TRAINSCALER_GRPC_BIND="127.0.0.1:0" TRAINSCALER_LOG=warn \
    TRAINSCALER_REQUEST_TIMEOUT_SECS="$timeout" \
    TRAINSCALER_ADMIN_KEY_FILE="$work/admin.key" TRAINSCALER_INGEST_RATE_PER_SEC=0 \
    TRAINSCALER_MAX_CONCURRENT_REQUESTS="$max_concurrent" TRAINSCALER_RECONCILE=false \
    "$bin" serve 2>"$work/server.log" &
server=$!

for _ in $(seq 1 300); do
    curl -fs "$base/readyz" >/dev/null 2>&1 && break
    kill -0 "$server" 2>/dev/null || { cat "$work/server.log" >&2; die "the server exited"; }
    sleep 0.1
done
curl -fs "$base/readyz" >/dev/null || { cat "$work/server.log" >&2; die "the server did not become ready in 30 s"; }

admin=$(cat "$work/admin.key")
BENCH_TOKEN=$(TRAINSCALER_LOG=warn "$bin" keys create --scope decide,ingest,read --name bench)
export BENCH_TOKEN

# The setup goes through the API with the admin key, as an operator would.
api() {
    local method=$1 path=$2 body=$3
    curl -fsS -X "$method" "$base$path" -H "authorization: Bearer $admin" \
        -H 'content-type: application/json' -d "$body" >/dev/null ||
        die "$method $path failed during setup"
}
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
echo "creating $BENCH_POOLS pools of 8 workers"
for p in $(seq 1 "$BENCH_POOLS"); do
    api PUT "/v1/pools/bench-$p" '{"provider": "aws", "region": "us-east-1", "max_workers": 40,
        "daily_budget": 5000, "instance_types": ["g4dn.12xlarge", "g5.12xlarge"]}'
    samples=""
    for w in $(seq 1 8); do
        api PUT "/v1/pools/bench-$p/workers/w$w" '{"instance_type": "g4dn.12xlarge", "market": "spot"}'
        samples+="{\"pool\": \"bench-$p\", \"worker\": \"w$w\", \"name\": \"gpu_utilization\", \"value\": 0.8, \"at\": \"$now\"},"
    done
    api POST /v1/webhooks/metrics "{\"samples\": [$samples {\"pool\": \"bench-$p\", \"name\": \"queue_depth\", \"value\": 12, \"at\": \"$now\"}]}"
done
# The bench key itself must be able to do what is measured.
curl -fsS "$base/v1/pools/bench-1" -H "authorization: Bearer $BENCH_TOKEN" >/dev/null ||
    die "the bench key cannot read pools"

# wrk prints latencies as 812.00us, 1.20ms or 1.03s: milliseconds, two decimals.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /m$/) n *= 60000; else if (v ~ /s$/) n *= 1000
        printf "%.2f", n
    }'
}
peak_rss_mib() {
    awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$server/status"
}

results="$work/results"
failed=0
baseline=""
run() {
    local name=$1 script=$2 path=$3 out rps p50 p99 non2xx errors ratio
    if ! out=$(wrk -t"$threads" -c"$connections" -d"${duration}s" --timeout "$((timeout + 5))s" --latency -s "$script" "$base$path" 2>&1); then
        printf '%s\n' "$out" >&2
        die "wrk failed on $name"
    fi
    printf '%s\n\n' "$out" >>"$work/wrk.log"
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
    p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' <<<"$out")
    non2xx=${non2xx:-0}
    errors=$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' <<<"$out")
    errors=${errors:-0}
    [[ -n "$baseline" ]] || baseline=$rps
    ratio=$(awk -v a="$rps" -v b="$baseline" 'BEGIN { printf "%.3f", a / b }')
    printf '%-40s %10s %9s %9s %7s %7s %7s %9s\n' "$name" "$rps" "$p50" "$p99" "$ratio" \
        "$non2xx" "$errors" "$(peak_rss_mib)" | tee -a "$results"
    if [[ "$non2xx" != 0 || "$errors" != 0 ]]; then
        failed=1
        echo "  $name: $non2xx non-2xx responses, $errors socket errors" >&2
    fi
}

echo
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(psql "$pg/postgres" -X -w -qAtc 'SHOW server_version' | cut -d' ' -f1 | sed 's/^/PostgreSQL /')"
echo "wrk -t$threads -c$connections -d${duration}s --timeout $((timeout + 5))s, server and wrk on the same machine; $BENCH_BATCH samples per ingestion request"
echo "server RSS after setup: $(awk '/^VmRSS:/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$server/status")"
echo
printf '%-40s %10s %9s %9s %7s %7s %7s %9s\n' run 'req/s' 'p50 ms' 'p99 ms' ratio non-2xx errors 'peak MiB'
run "GET /healthz" "$BENCH_DIR/get.lua" /healthz
run "GET /v1/offerings?gpu=A100&min_gpus=8" "$BENCH_DIR/get.lua" "/v1/offerings?gpu=A100&min_gpus=8"
run "GET /v1/offerings/aws/p4d.24xlarge" "$BENCH_DIR/get.lua" /v1/offerings/aws/p4d.24xlarge
run "POST /decide {job}" "$BENCH_DIR/decide_job.lua" /decide
run "POST /decide {pool}, one hot pool" "$BENCH_DIR/decide_pool_hot.lua" /decide
run "POST /decide {pool}, $BENCH_POOLS pools" "$BENCH_DIR/decide_pool_spread.lua" /decide
run "POST /v1/webhooks/metrics (x$BENCH_BATCH)" "$BENCH_DIR/ingest.lua" /v1/webhooks/metrics

ingest_rps=$(tail -1 "$results" | awk '{ print $(NF-6) }')
stored=$(psql "$DATABASE_URL" -X -w -qAtc "SELECT count(*) FROM metric_samples WHERE worker LIKE 't%'")
echo
echo "ingestion: $(awk -v r="$ingest_rps" -v b="$BENCH_BATCH" 'BEGIN { printf "%.0f", r * b }') samples/s; $stored samples stored by the run"
echo "peak RSS of the server (VmHWM): $(peak_rss_mib) MiB"
if [[ "$failed" != 0 ]]; then
    echo "wrk's full output:" >&2
    cat "$work/wrk.log" >&2
    echo "the server's log (warnings and errors):" >&2
    tail -n 50 "$work/server.log" >&2
    die "some requests failed: the numbers above are not a benchmark"
fi
