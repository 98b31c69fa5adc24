-- POST /decide for a job: a 7B FSDP run on 8-GPU nodes over 2e10 tokens, spot allowed with
-- 10-minute checkpoints. Instance selection over the whole bundled catalog, no database.
dofile(os.getenv("BENCH_DIR") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"job": {"params_billion": 7, "sharding": "fsdp", "tokens": 2e10, ' ..
    '"gpus_per_node_min": 8, "checkpoint_interval_min": 10}}'
