-- POST /v1/webhooks/metrics with BENCH_BATCH gpu_utilization samples per request, none of them
-- sent before, about the pools' registered workers. Thread, batch size, counter and sample
-- index make each sample's time unique, so the runs with different batch sizes do not send
-- each other's samples again (at most 4 wrk threads).
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
-- Each pool has workers w1..w8 (bench/run.sh registers them; a pool takes samples of its own
-- workers only). Every sample gets its own millisecond: thread, request and index spread over
-- days in the past, a different stretch per batch size.
local start_ms = (os.time() - 86400 * (batch >= 1000 and 6 or 2)) * 1000
request = function()
    n = n + 1
    local parts = {}
    for j = 1, batch do
        local at_ms = start_ms + ((n * batch + j) * 4 + tid)
        local stamp = os.date("!%Y-%m-%dT%H:%M:%S", math.floor(at_ms / 1000)) ..
            string.format(".%03dZ", at_ms % 1000)
        parts[j] = '{"pool":"bench-' .. (j % pools + 1) .. '","worker":"w' .. (j % 8 + 1) ..
            '","name":"gpu_utilization","value":0.5,"at":"' .. stamp .. '"}'
    end
    return wrk.format(nil, nil, nil,
        '{"samples":[' .. table.concat(parts, ",") .. ']}')
end
