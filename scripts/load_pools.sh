#!/usr/bin/env bash
# Load test of pool decisions and metric ingestion on PostgreSQL, against the release server
# on loopback with wrk (Debian package `wrk`).
#
# Creates a fresh database `trainscaler_load` (on $LOAD_PG, default the local PostgreSQL),
# starts `trainscaler serve` on it, creates 20 pools with 8 workers and fresh signals each,
# then measures with wrk, /healthz first as the same-run baseline:
#   - POST /decide {"pool": ...} on one hot pool (every call queues on that pool's row lock),
#   - POST /decide spread over the 20 pools,
#   - POST /v1/webhooks/metrics with batches of 1,000 new samples (samples/s = req/s x 1000).
# Shared machines are noisy: compare ratios, not absolute numbers, and run it more than once.
#
# usage: scripts/load_pools.sh [seconds per run, default 10] [connections, default 32]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

duration=${1:-10}
connections=${2:-32}
pg=${LOAD_PG:-postgres://postgres@127.0.0.1:5432}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }
command -v psql >/dev/null || { echo "psql is missing: apt-get install -y postgresql-client" >&2; exit 1; }

cargo build --release --quiet
psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS trainscaler_load WITH (FORCE)" -c "CREATE DATABASE trainscaler_load"
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
base="http://127.0.0.1:$port"
DATABASE_URL="$pg/trainscaler_load" TRAINSCALER_BIND="127.0.0.1:$port" TRAINSCALER_GRPC_BIND="127.0.0.1:0" TRAINSCALER_LOG=warn \
    target/release/trainscaler serve &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT

for _ in $(seq 1 200); do
    curl -fs "$base/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "$base/readyz" >/dev/null || { echo "server did not become ready" >&2; exit 1; }

now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
for p in $(seq 1 20); do
    curl -fs -X PUT "$base/v1/pools/load-$p" -H 'content-type: application/json' -d '{
        "provider": "aws", "region": "us-east-1", "max_workers": 40, "daily_budget": 5000,
        "instance_types": ["g4dn.12xlarge", "g5.12xlarge"]}' >/dev/null
    samples=""
    for w in $(seq 1 8); do
        curl -fs -X PUT "$base/v1/pools/load-$p/workers/w$w" -H 'content-type: application/json' \
            -d '{"instance_type": "g4dn.12xlarge", "market": "spot"}' >/dev/null
        samples+="{\"pool\": \"load-$p\", \"worker\": \"w$w\", \"name\": \"gpu_utilization\", \"value\": 0.8, \"at\": \"$now\"},"
    done
    curl -fs "$base/v1/webhooks/metrics" -H 'content-type: application/json' \
        -d "{\"samples\": [$samples {\"pool\": \"load-$p\", \"name\": \"queue_depth\", \"value\": 12, \"at\": \"$now\"}]}" >/dev/null
done

cat >"$work/hot.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"pool": "load-1"}'
LUA

cat >"$work/spread.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local n = 0
request = function()
    n = n + 1
    return wrk.format(nil, nil, nil, '{"pool": "load-' .. (n % 20 + 1) .. '"}')
end
LUA

# Each request carries 1,000 samples no earlier request had, as 64 senders per wrk thread (each
# with its own 1,000 series, like Prometheus shards or node agents) would send them: thread,
# sender and a counter make the (worker, time) pairs unique; times lie in the past hour.
cat >"$work/ingest.lua" <<'LUA'
local threads = 0
setup = function(thread)
    threads = threads + 1
    thread:set("tid", threads)
end
local n = 0
local start = os.time() - 3600
request = function()
    n = n + 1
    local at_s = start + math.floor(n / 1000)
    local stamp = os.date("!%Y-%m-%dT%H:%M:%S", at_s) .. string.format(".%03dZ", n % 1000)
    local parts = {}
    for j = 1, 1000 do
        parts[j] = '{"pool":"load-' .. (j % 20 + 1) .. '","worker":"t' .. tid .. 's' .. (n % 64) .. 'w' .. j ..
            '","name":"gpu_utilization","value":0.5,"at":"' .. stamp .. '"}'
    end
    return wrk.format("POST", "/v1/webhooks/metrics", {["Content-Type"] = "application/json"},
        '{"samples":[' .. table.concat(parts, ",") .. ']}')
end
LUA

printf '%-36s %12s %10s %10s %8s\n' run 'req/s' 'p50' 'p99' 'ratio'
baseline=""
run() {
    local name=$1 script=$2 path=$3 out rps p50 p99 ratio
    if [[ -n "$script" ]]; then
        out=$(wrk -t2 -c"$connections" -d"${duration}s" --latency -s "$script" "$base$path")
    else
        out=$(wrk -t2 -c"$connections" -d"${duration}s" --latency "$base$path")
    fi
    if grep -q "Non-2xx" <<<"$out"; then
        echo "$name: some responses were not 2xx:" >&2
        grep "Non-2xx" <<<"$out" >&2
    fi
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    [[ -n "$baseline" ]] || baseline=$rps
    ratio=$(awk -v a="$rps" -v b="$baseline" 'BEGIN {printf "%.3f", a / b}')
    printf '%-36s %12s %10s %10s %8s\n' "$name" "$rps" "$p50" "$p99" "$ratio"
}
run "GET /healthz" "" /healthz
run "POST /decide (one hot pool)" "$work/hot.lua" /decide
run "POST /decide (20 pools)" "$work/spread.lua" /decide
run "POST /v1/webhooks/metrics (x1000)" "$work/ingest.lua" /v1/webhooks/metrics
stored=$(psql "$pg/trainscaler_load" -Atc "SELECT count(*) FROM metric_samples")
echo "samples stored: $stored"
