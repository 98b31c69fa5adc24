-- POST /decide spread round-robin over the BENCH_POOLS pools bench/run.sh created.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
-- wrk.format with nil headers keeps wrk.headers (the key, the Host); a table would replace them.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local pools = tonumber(os.getenv("BENCH_POOLS") or "20")
local n = 0
request = function()
    n = n + 1
    return wrk.format(nil, nil, nil,
        '{"pool": "bench-' .. (n % pools + 1) .. '"}')
end
