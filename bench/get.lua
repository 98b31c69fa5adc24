-- GET the URL given to wrk with the bench key (catalog reads need the `read` scope).
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
