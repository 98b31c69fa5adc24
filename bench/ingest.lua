-- POST /v1/webhooks/metrics with BENCH_BATCH gpu_utilization samples per request, none of them
-- sent before, as 64 senders per wrk thread would send them (node agents or Prometheus shards,
-- each with its own series). Thread, batch size, counter and sample index make (worker, time)
-- unique, so the runs with different batch sizes do not send each other's samples again;
-- times lie in the past hour, where the server accepts them.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
-- wrk.format with nil headers keeps wrk.headers (the key, the Host); a table would replace them.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local pools = tonumber(os.getenv("BENCH_POOLS") or "20")
local batch = tonumber(os.getenv("BENCH_BATCH") or "100")

local threads = 0
setup = function(thread)
    threads = threads + 1
    thread:set("tid", threads)
end

local n = 0
local start = os.time() - 3600
request = function()
    n = n + 1
    -- One millisecond per request: unique within this thread for 3,600,000 requests.
    local at_s = start + math.floor(n / 1000)
    local stamp = os.date("!%Y-%m-%dT%H:%M:%S", at_s) .. string.format(".%03dZ", n % 1000)
    local parts = {}
    for j = 1, batch do
        parts[j] = '{"pool":"bench-' .. (j % pools + 1) .. '","worker":"t' .. tid .. 'b' .. batch .. 's' .. (n % 64) ..
            'w' .. j .. '","name":"gpu_utilization","value":0.5,"at":"' .. stamp .. '"}'
    end
    return wrk.format(nil, nil, nil,
        '{"samples":[' .. table.concat(parts, ",") .. ']}')
end
