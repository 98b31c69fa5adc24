-- The legitimate traffic of the hostile runs: POST /decide {job} with the bench key, counting
-- answers by class so that a 5xx for a legitimate caller shows.
dofile(os.getenv("BENCH_DIR") .. "/decide_job.lua")
dofile(os.getenv("BENCH_DIR") .. "/statuses.lua")
