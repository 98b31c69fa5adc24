-- Hostile: GET /v1/offerings with a bearer token that is not valid. Half name the bench key's
-- real id with a wrong secret (the server must check the secret to refuse it), half a random
-- id no key has; every token has the right shape, so none is refused by its form alone.
dofile(os.getenv("BENCH_DIR") .. "/statuses.lua")
local real_id = string.match(os.getenv("BENCH_TOKEN") or "", "^tsk_(%x+)_")
if real_id == nil then
    error("BENCH_TOKEN is not a tsk_ token: run these scripts through bench/run.sh")
end
local function hex(n)
    local out = {}
    for i = 1, n do
        out[i] = string.format("%x", math.random(0, 15))
    end
    return table.concat(out)
end
local n = 0
request = function()
    n = n + 1
    local id = (n % 2 == 0) and real_id or hex(12)
    return wrk.format("GET", "/v1/offerings?gpu=A100&min_gpus=8",
        { ["Authorization"] = "Bearer tsk_" .. id .. "_" .. hex(64) })
end
