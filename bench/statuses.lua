-- Counts answers by class in every wrk thread and prints the totals after the run, as lines
-- bench/run.sh reads ("statuses 2xx=... 4xx=... 5xx=..."). dofile it after the script that
-- builds the requests; it takes over setup, so that script must not define its own.
local threads = {}
setup = function(thread)
    threads[#threads + 1] = thread
    thread:set("tid", #threads)
end

c2xx, c3xx, c4xx, c5xx = 0, 0, 0, 0
response = function(status, headers, body)
    if status >= 500 then
        c5xx = c5xx + 1
    elseif status >= 400 then
        c4xx = c4xx + 1
    elseif status >= 300 then
        c3xx = c3xx + 1
    else
        c2xx = c2xx + 1
    end
end

done = function(summary, latency, requests)
    local t = { 0, 0, 0, 0 }
    for _, thread in ipairs(threads) do
        t[1] = t[1] + thread:get("c2xx")
        t[2] = t[2] + thread:get("c3xx")
        t[3] = t[3] + thread:get("c4xx")
        t[4] = t[4] + thread:get("c5xx")
    end
    io.write(string.format("statuses 2xx=%d 3xx=%d 4xx=%d 5xx=%d\n", t[1], t[2], t[3], t[4]))
end
