-- Hostile: 16 MiB bodies to the signed-webhook route from callers with no key, naming a
-- source that has no secret. The server should refuse on the headers, before the body.
dofile(os.getenv("BENCH_DIR") .. "/statuses.lua")
local mib = tonumber(os.getenv("BENCH_FLOOD_MIB") or "16")
-- One request built once: a 16 MiB string per request would make wrk, not the server, the
-- bottleneck.
wrk.method = "POST"
wrk.body = '{"samples":[' .. string.rep(" ", mib * 1024 * 1024 - 14) .. "]}"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["X-Trainscaler-Source"] = "unknown-" .. math.random(1, 1000000)
wrk.headers["X-Trainscaler-Timestamp"] = tostring(os.time())
wrk.headers["X-Trainscaler-Signature"] = "sha256=" .. string.rep("0", 64)
