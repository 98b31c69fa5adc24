-- Shared by every bench/*.lua script: the API key bench/run.sh minted, sent on every request.
local token = os.getenv("BENCH_TOKEN")
if token == nil or token == "" then
    error("BENCH_TOKEN is not set: run these scripts through bench/run.sh")
end
wrk.headers["Authorization"] = "Bearer " .. token
