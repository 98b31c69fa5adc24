-- Hostile: requests with a made-up HTTP method each (6 to 10 capital letters) and no key, on
-- routes that exist and routes that do not. Every method is new, so anything that keys state
-- on the method (metric labels) grows with the flood.
dofile(os.getenv("BENCH_DIR") .. "/statuses.lua")
local paths = { "/healthz", "/v1/pools", "/decide", "/v1/no-such-route" }
local n = 0
request = function()
    n = n + 1
    -- wrk checks the first request of the script with its HTTP parser, which knows only the
    -- registered methods; the made-up ones follow.
    if n == 1 then
        return wrk.format("GET", paths[1])
    end
    local method = {}
    for i = 1, math.random(6, 10) do
        method[i] = string.char(math.random(65, 90))
    end
    return wrk.format(table.concat(method), paths[n % #paths + 1])
end
