#!/usr/bin/env bash
# Load test of the release server on loopback with wrk (Debian package `wrk`).
#
# Starts `trainscaler serve` on a fresh SQLite file (bundled catalog), then runs wrk against
# /healthz as the same-run baseline and against catalog reads, and prints requests/s and
# latency per endpoint with its ratio to the baseline. Shared machines are noisy: compare
# ratios, not absolute numbers, and run it more than once.
#
# usage: scripts/load.sh [seconds per endpoint, default 10] [connections, default 32]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

duration=${1:-10}
connections=${2:-32}
command -v wrk >/dev/null || { echo "wrk is missing: apt-get install -y wrk" >&2; exit 1; }

cargo build --release --quiet
work=$(mktemp -d)
port=$((20000 + RANDOM % 20000))
DATABASE_URL="sqlite://$work/load.db" TRAINSCALER_BIND="127.0.0.1:$port" TRAINSCALER_GRPC_BIND="127.0.0.1:0" TRAINSCALER_LOG=warn \
    target/release/trainscaler serve &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT

for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
    sleep 0.1
done
curl -fs "http://127.0.0.1:$port/readyz" >/dev/null || { echo "server did not become ready" >&2; exit 1; }

endpoints=(
    "/healthz"
    "/v1/offerings?gpu=A100&min_gpus=8"
    "/v1/offerings?gpu=H100&market=spot&max_price=40"
    "/v1/offerings?min_gpu_memory_gib=80&limit=100"
    "/v1/offerings/aws/p4d.24xlarge"
)

# POST /decide with a 7B FSDP job on 8-GPU nodes, spot allowed with 10-minute checkpoints.
cat >"$work/decide.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"job": {"params_billion": 7, "sharding": "fsdp", "tokens": 2e10, "gpus_per_node_min": 8, "checkpoint_interval_min": 10}}'
LUA
endpoints+=("POST /decide")

printf '%-50s %12s %10s %10s %8s\n' endpoint 'req/s' 'p50' 'p99' 'ratio'
baseline=""
for path in "${endpoints[@]}"; do
    if [[ "$path" == "POST /decide" ]]; then
        out=$(wrk -t2 -c"$connections" -d"${duration}s" --latency -s "$work/decide.lua" "http://127.0.0.1:$port/decide")
    else
        out=$(wrk -t2 -c"$connections" -d"${duration}s" --latency "http://127.0.0.1:$port$path")
    fi
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    [[ -n "$baseline" ]] || baseline=$rps
    ratio=$(awk -v a="$rps" -v b="$baseline" 'BEGIN {printf "%.3f", a / b}')
    printf '%-50s %12s %10s %10s %8s\n' "$path" "$rps" "$p50" "$p99" "$ratio"
done
