-- POST /decide for one pool, over and over: every call that writes queues on that pool's row
-- lock, so this is the worst case for one pool.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"pool": "bench-1"}'
