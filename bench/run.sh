#!/usr/bin/env bash
# The load harness: the release server on PostgreSQL, measured with wrk on loopback in one run.
#
# 1. Installs wrk from Debian's packages if it is missing, and builds the release binary and
#    the bare axum server of examples/bare_healthz.rs (same lock file, features and profile).
# 2. Drops and recreates the database $BENCH_DB (default trainscaler_bench) on $BENCH_PG
#    (default the local PostgreSQL, postgres://postgres@127.0.0.1:5432, trust auth).
# 3. Starts `trainscaler serve` on it on a free loopback port: ingestion rate limits (requests
#    and samples per key) off, a concurrency limit above wrk's connections (nothing is shed),
#    the reconciler off (this measures the API, not actuation).
# 4. Mints an API key with `trainscaler keys create --scope decide,ingest,read` and, with the
#    first-start admin key, creates $BENCH_POOLS pools of 8 registered workers with fresh
#    signals, so that pool decisions have something to decide on.
# 5. Runs wrk for the same duration against each of:
#      GET  /healthz of the bare axum server      the machine's ceiling for an axum route
#      GET  /healthz                              trainscaler's ceiling: routing, no key, no work
#      GET  /v1/offerings?gpu=A100&min_gpus=8     a catalog query from memory, 78 items of JSON
#      GET  /v1/offerings/aws/p4d.24xlarge        one type, its price history read from PostgreSQL
#      POST /decide {"job"}                       instance selection over the whole catalog
#      POST /decide {"pool"}, one hot pool        every writing call queues on one row lock
#      POST /decide {"pool"}, spread over pools
#      POST /v1/webhooks/metrics                  $BENCH_BATCH new samples per request
#      POST /v1/webhooks/metrics                  $BENCH_BIG_BATCH new samples per request
#    and prints requests/s, p50 and p99 latency, each one's ratio to /healthz, non-2xx and
#    socket errors, and the server's peak RSS (VmHWM, reset before each run) during it.
# 6. The hostile runs (skip them with BENCH_HOSTILE=0): legitimate POST /decide {job} traffic
#    (wrk -t1, half the connections) alone, then beside each flood from a second wrk (-t1,
#    the other half): bad bearer tokens, made-up HTTP methods, and 16 MiB bodies to the signed
#    webhook route naming an unknown source with no key. For each: the legitimate req/s and
#    p99 and their ratio to the run without a flood, the legitimate 5xx, the flood's answers
#    by class, and the server's peak RSS during the run. A server that passes
#    $BENCH_RSS_LIMIT_MIB (default 4096) is killed so that a flood cannot take the machine.
#    Then the control runs: the same floods aimed at the bare axum server while the legitimate
#    traffic still goes to trainscaler, which separates what the machine loses (two wrk and
#    two servers on the same cores) from what trainscaler spends refusing.
# 7. Prints the summary: every ratio of issue 21 and the hostile figures of issue 17, each
#    beside its target.
# Fails if any response to legitimate traffic was not 2xx or any request errored (a benchmark
# of errors is no benchmark). Shared machines are noisy: compare ratios, run it more than once.
#
# usage: bench/run.sh [-d SECONDS] [-t THREADS] [-c CONNECTIONS]
#   -d  seconds per endpoint      (BENCH_DURATION, default 10)
#   -t  wrk threads               (BENCH_THREADS, default 2)
#   -c  wrk connections           (BENCH_CONNECTIONS, default 32)
#   BENCH_TIMEOUT: wrk's per-request timeout in seconds (default 30, the server's own request
#   timeout: wrk leaves requests it gave up on out of the latency figures, so a shorter one
#   would flatter p99; past 30 s the server answers 408, which counts as non-2xx)
#   BENCH_PG, BENCH_DB, BENCH_POOLS (20), BENCH_BATCH (100 samples per ingestion request),
#   BENCH_BIG_BATCH (1000), BENCH_HOSTILE (1), BENCH_FLOOD_MIB (16), BENCH_RSS_LIMIT_MIB,
#   CARGO_TARGET_DIR (where the release binaries are built), BENCH_BIN (measure this server
#   binary instead of the one built here: a copy of an earlier build, to compare side by side),
#   BENCH_PERF_DIR (record each normal run's server with `perf record -g` into
#   DIR/<run>.perf.data; perf's sampling costs a few per cent, so not for the figures)
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
big_batch=${BENCH_BIG_BATCH:-1000}
hostile=${BENCH_HOSTILE:-1}
export BENCH_FLOOD_MIB=${BENCH_FLOOD_MIB:-16}
rss_limit_mib=${BENCH_RSS_LIMIT_MIB:-4096}
export BENCH_DIR="$repo/bench"
timeout=${BENCH_TIMEOUT:-30}

die() { printf 'error: %s\n' "$*" >&2; exit 1; }
for n in "$duration" "$threads" "$connections" "$BENCH_POOLS" "$BENCH_BATCH" "$big_batch" \
    "$timeout" "$BENCH_FLOOD_MIB" "$rss_limit_mib"; do
    [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "durations, counts and sizes must be positive integers, not '$n'"
done
[[ "$hostile" == 0 || "$hostile" == 1 ]] || die "BENCH_HOSTILE is 0 or 1, not '$hostile'"
(( threads <= 4 )) || die "bench/ingest.lua keeps sample times unique for at most 4 wrk threads, not $threads"
(( connections >= 2 )) || die "the hostile runs split the connections in two: -c must be at least 2"
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

echo "building the release binary and the bare axum server"
cargo build --release --locked --quiet --bin trainscaler --example bare_healthz
bin="${BENCH_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/trainscaler}"
bare_bin="${CARGO_TARGET_DIR:-$repo/target}/release/examples/bare_healthz"
[[ -x "$bin" ]] || die "no release binary at $bin"
[[ -x "$bare_bin" ]] || die "no bare axum server at $bare_bin"

psql "$pg/postgres" -X -w -q -v ON_ERROR_STOP=1 \
    -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" -c "CREATE DATABASE $db"
export DATABASE_URL="$pg/$db"

work=$(mktemp -d)
server=""
bare=""
cleanup() {
    for pid in "$server" "$bare"; do
        if [[ -n "$pid" ]]; then
            kill "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    rm -rf "$work"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
port=$(free_port)
base="http://127.0.0.1:$port"
# wrk never has more than $connections requests in flight; twice that (and the default at
# least) keeps the load shedder out of the numbers.
max_concurrent=$((connections * 2 > 512 ? connections * 2 : 512))
# wrk waits 5 s longer than the server's own timeout, so a slow request is answered (408)
# rather than dropped.
TRAINSCALER_BIND="127.0.0.1:$port" TRAINSCALER_GRPC_BIND="127.0.0.1:0" TRAINSCALER_LOG=warn \
    TRAINSCALER_REQUEST_TIMEOUT_SECS="$timeout" \
    TRAINSCALER_ADMIN_KEY_FILE="$work/admin.key" TRAINSCALER_INGEST_RATE_PER_SEC=0 \
    TRAINSCALER_INGEST_SAMPLES_PER_SEC=0 \
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
# Writing 5 to clear_refs resets VmHWM, so each run reports its own peak; where that is not
# allowed the figure is the peak since the process started.
reset_peak() {
    echo 5 >"/proc/$1/clear_refs" 2>/dev/null || true
}
peak_rss_mib() {
    awk '/^VmHWM:/ { printf "%.1f", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo "-"
}
max() {
    awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a + 0 > b + 0) ? a : b }'
}
ratio() {
    awk -v a="$1" -v b="$2" 'BEGIN { if (b + 0 > 0) printf "%.3f", a / b; else print "-" }'
}

# One wrk run; sets rps, p50, p99, non2xx, errors and (from bench/statuses.lua) fivexx.
measure() {
    local t=$1 c=$2 script=$3 url=$4 out
    if ! out=$(wrk -t"$t" -c"$c" -d"${duration}s" --timeout "$((timeout + 5))s" --latency -s "$script" "$url" 2>&1); then
        printf '%s\n' "$out" >&2
        die "wrk failed on $url"
    fi
    printf '%s\n%s\n\n' "$script $url" "$out" >>"$work/wrk.log"
    rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
    p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
    p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' <<<"$out")
    non2xx=${non2xx:-0}
    errors=$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' <<<"$out")
    errors=${errors:-0}
    fivexx=$(awk '/^statuses / { for (i = 2; i <= NF; i++) if ($i ~ /^5xx=/) { sub(/^5xx=/, "", $i); print $i } }' <<<"$out")
    fivexx=${fivexx:-0}
}

results="$work/results"
failed=0
baseline=""
harness_peak=""
declare -A RPS P99
row() {
    printf '%-44s %10s %9s %9s %7s %7s %7s %9s\n' "$@" | tee -a "$results"
}
check() {
    local name=$1
    if [[ "$non2xx" != 0 || "$errors" != 0 ]]; then
        failed=1
        echo "  $name: $non2xx non-2xx responses, $errors socket errors" >&2
    fi
}
# run KEY NAME SCRIPT PATH: one endpoint of the server at full load.
run() {
    local key=$1 name=$2 script=$3 path=$4 peak perf=""
    reset_peak "$server"
    if [[ -n "${BENCH_PERF_DIR:-}" ]]; then
        perf record -q -g -F 499 -p "$server" -o "$BENCH_PERF_DIR/$key.perf.data" \
            -- sleep "$duration" 2>/dev/null &
        perf=$!
    fi
    measure "$threads" "$connections" "$script" "$base$path"
    [[ -z "$perf" ]] || wait "$perf" || true
    peak=$(peak_rss_mib "$server")
    harness_peak=$(max "$peak" "$harness_peak")
    [[ -n "$baseline" ]] || baseline=$rps
    RPS[$key]=$rps
    P99[$key]=$p99
    row "$name" "$rps" "$p50" "$p99" "$(ratio "$rps" "$baseline")" "$non2xx" "$errors" "$peak"
    check "$name"
}

# The bare axum server runs only while it is measured or flooded, so it takes nothing from
# the other runs. start_bare sets bare (its pid) and bare_base.
start_bare() {
    local bare_port
    bare_port=$(free_port)
    "$bare_bin" "127.0.0.1:$bare_port" 2>"$work/bare.log" &
    bare=$!
    bare_base="http://127.0.0.1:$bare_port"
    for _ in $(seq 1 100); do
        curl -fs "$bare_base/healthz" >/dev/null 2>&1 && break
        sleep 0.1
    done
}
stop_bare() {
    kill "$bare" 2>/dev/null || true
    wait "$bare" 2>/dev/null || true
    bare=""
}
run_bare() {
    local peak
    start_bare
    measure "$threads" "$connections" "$BENCH_DIR/get.lua" "$bare_base/healthz"
    peak=$(peak_rss_mib "$bare")
    stop_bare
    RPS[bare]=$rps
    P99[bare]=$p99
    row "GET /healthz, bare axum (examples/)" "$rps" "$p50" "$p99" "$(ratio "$rps" "$baseline")" "$non2xx" "$errors" "$peak"
    check "the bare axum server"
}

# Kills the server if it passes the RSS limit: a flood must not take the shared machine down.
watch_rss() {
    local limit_kib=$((rss_limit_mib * 1024)) rss
    while kill -0 "$server" 2>/dev/null; do
        rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$server/status" 2>/dev/null || echo 0)
        if (( ${rss:-0} > limit_kib )); then
            echo "$rss" >"$work/killed"
            kill -9 "$server" 2>/dev/null || true
            return
        fi
        sleep 0.2
    done
}

hostile_results="$work/hostile"
half=$((connections / 2))
# hostile KEY NAME [FLOOD_SCRIPT FLOOD_PATH [FLOOD_BASE]]: legitimate POST /decide {job} on
# half the connections, beside a flood on the other half (or alone, without a flood script).
# The flood goes to the server unless FLOOD_BASE names another (the control runs).
hostile() {
    local key=$1 name=$2 flood_script=${3:-} flood_path=${4:-} flood_base=${5:-$base}
    local flood="" watcher peak flood_out=""
    reset_peak "$server"
    watch_rss &
    watcher=$!
    if [[ -n "$flood_script" ]]; then
        # The flood starts first and outlasts the legitimate run.
        wrk -t1 -c"$half" -d"$((duration + 2))s" --timeout 10s -s "$flood_script" \
            "$flood_base$flood_path" >"$work/flood.out" 2>&1 &
        flood=$!
        sleep 1
    fi
    measure 1 "$half" "$BENCH_DIR/legit_decide_job.lua" "$base/decide"
    if [[ -n "$flood" ]]; then
        wait "$flood" || true
        printf '%s\n%s\n\n' "flood $flood_script" "$(cat "$work/flood.out")" >>"$work/wrk.log"
        flood_out="$(awk '/^Requests\/sec:/ { printf "%.0f/s ", $2 } /^statuses / { sub(/^statuses /, ""); printf "%s", $0 }' "$work/flood.out")"
    fi
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
    if [[ -f "$work/killed" ]]; then
        printf '%-26s the server passed %s MiB and was killed; the remaining runs are skipped\n' \
            "$name" "$rss_limit_mib" | tee -a "$hostile_results"
        server=""
        return 1
    fi
    peak=$(peak_rss_mib "$server")
    RPS[$key]=$rps
    P99[$key]=$p99
    printf '%-26s %9s %7s %9s %9s %6s %9s  %s\n' "$name" "$rps" "$(ratio "$rps" "${RPS[legit]:-$rps}")" \
        "$p99" "$(ratio "$p99" "${P99[legit]:-$p99}")" "$fivexx" "$peak" "$flood_out" | tee -a "$hostile_results"
    # Legitimate callers must get their answers; the flood's own answers are expected 4xx.
    if [[ "$fivexx" != 0 || "$errors" != 0 || "$non2xx" != 0 ]]; then
        failed=1
        echo "  $name: the legitimate traffic got $non2xx non-2xx ($fivexx 5xx) and $errors socket errors" >&2
    fi
}

echo
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ), $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)), $(psql "$pg/postgres" -X -w -qAtc 'SHOW server_version' | cut -d' ' -f1 | sed 's/^/PostgreSQL /')"
echo "wrk -t$threads -c$connections -d${duration}s --timeout $((timeout + 5))s, server and wrk on the same machine"
echo "server RSS after setup: $(awk '/^VmRSS:/ { printf "%.1f MiB", $2 / 1024 }' "/proc/$server/status")"
echo
row run 'req/s' 'p50 ms' 'p99 ms' ratio non-2xx errors 'peak MiB'
run healthz "GET /healthz" "$BENCH_DIR/get.lua" /healthz
run_bare
run offerings "GET /v1/offerings?gpu=A100&min_gpus=8" "$BENCH_DIR/get.lua" "/v1/offerings?gpu=A100&min_gpus=8"
run history "GET /v1/offerings/aws/p4d.24xlarge" "$BENCH_DIR/get.lua" /v1/offerings/aws/p4d.24xlarge
run job "POST /decide {job}" "$BENCH_DIR/decide_job.lua" /decide
run hot "POST /decide {pool}, one hot pool" "$BENCH_DIR/decide_pool_hot.lua" /decide
run spread "POST /decide {pool}, $BENCH_POOLS pools" "$BENCH_DIR/decide_pool_spread.lua" /decide
run ingest "POST /v1/webhooks/metrics (x$BENCH_BATCH)" "$BENCH_DIR/ingest.lua" /v1/webhooks/metrics
BENCH_BATCH=$big_batch run ingest_big "POST /v1/webhooks/metrics (x$big_batch)" "$BENCH_DIR/ingest.lua" /v1/webhooks/metrics

# The runs' samples are stamped days ago; the set-up's are stamped now.
stored=$(psql "$DATABASE_URL" -X -w -qAtc "SELECT count(*) FROM metric_samples WHERE at_ms < (extract(epoch FROM now()) - 86400) * 1000")
echo
echo "ingestion: $(awk -v r="${RPS[ingest]}" -v b="$BENCH_BATCH" 'BEGIN { printf "%.0f", r * b }') samples/s in batches of $BENCH_BATCH, $(awk -v r="${RPS[ingest_big]}" -v b="$big_batch" 'BEGIN { printf "%.0f", r * b }') in batches of $big_batch; $stored samples stored by the runs"
echo "peak RSS of the server over these runs (VmHWM): $harness_peak MiB"

if [[ "$hostile" == 1 ]]; then
    echo
    echo "hostile runs: legitimate POST /decide {job}, wrk -t1 -c$half, beside a flood from wrk -t1 -c$half"
    printf '%-26s %9s %7s %9s %9s %6s %9s  %s\n' flood 'req/s' ratio 'p99 ms' 'p99 x' 5xx 'peak MiB' 'flood: req/s and answers' |
        tee -a "$hostile_results"
    hostile legit "none" &&
        hostile bad_token "bad bearer tokens" "$BENCH_DIR/flood_bad_token.lua" /v1/offerings &&
        hostile methods "made-up HTTP methods" "$BENCH_DIR/flood_methods.lua" /healthz &&
        hostile webhook "${BENCH_FLOOD_MIB} MiB unsigned webhooks" "$BENCH_DIR/flood_webhook.lua" /v1/webhooks/metrics ||
        true
    # The control: the same floods aimed at the bare axum server while the legitimate traffic
    # still goes to trainscaler. What the legitimate traffic loses here is the machine's (wrk
    # and a second server sharing 2 cores); what it loses beyond this above is the cost of
    # refusing inside trainscaler.
    if [[ -n "$server" ]]; then
        start_bare
        hostile ctl_bad_token "control: tokens -> bare" "$BENCH_DIR/flood_bad_token.lua" /v1/offerings "$bare_base" &&
            hostile ctl_methods "control: methods -> bare" "$BENCH_DIR/flood_methods.lua" /healthz "$bare_base" &&
            hostile ctl_webhook "control: webhooks -> bare" "$BENCH_DIR/flood_webhook.lua" /v1/webhooks/metrics "$bare_base" ||
            true
        stop_bare
    fi
fi

target_row() {
    printf '%-48s %12s %12s\n' "$@"
}
samples() {
    awk -v r="$1" -v b="$2" 'BEGIN { printf "%.0f", r * b }'
}
echo
echo "summary (issue 21; select_instance is criterion's, cargo bench --bench select_instance)"
target_row measure 'this run' target
target_row "/healthz ÷ bare axum /healthz" "$(ratio "${RPS[healthz]}" "${RPS[bare]}")" ">= 0.7"
target_row "POST /decide {job} ÷ /healthz" "$(ratio "${RPS[job]}" "${RPS[healthz]}")" ">= 0.5"
target_row "pool decisions/s, one hot pool" "${RPS[hot]}" ">= 5000"
target_row "pool decisions/s, $BENCH_POOLS pools" "${RPS[spread]}" ">= 5000"
target_row "ingestion samples/s, batches of $BENCH_BATCH" "$(samples "${RPS[ingest]}" "$BENCH_BATCH")" ">= 50000"
target_row "ingestion samples/s, batches of $big_batch" "$(samples "${RPS[ingest_big]}" "$big_batch")" ">= 100000"
target_row "peak RSS over the runs above, MiB" "$harness_peak" "<= 150"
if [[ "$hostile" == 1 ]]; then
    echo
    echo "hostile runs (issue 17: legitimate req/s >= 0.8 of the run without a flood, no 5xx, peak RSS < 150 MB = 143 MiB)"
    cat "$hostile_results"
    echo "the server's own cost of refusing (each flood's ratio over its control's):"
    for f in bad_token methods webhook; do
        printf '  %-10s %s\n' "$f" "$(ratio "${RPS[$f]:-0}" "${RPS[ctl_$f]:-0}")"
    done
fi

if [[ "$failed" != 0 ]]; then
    echo "wrk's full output:" >&2
    cat "$work/wrk.log" >&2
    echo "the server's log (warnings and errors):" >&2
    tail -n 50 "$work/server.log" >&2
    die "some legitimate requests failed: the numbers above are not a benchmark"
fi
