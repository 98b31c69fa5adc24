-- Measured throughput of a named workload on an instance type at a size (GPUs per node ×
-- nodes): the "run fixed steps on three sizes" practice. One of samples_per_sec and
-- step_time_sec is given. Append-only like prices: a new measurement gets a new measured_at.
CREATE TABLE benchmarks (
    id              BIGSERIAL PRIMARY KEY,
    workload        TEXT NOT NULL,
    provider        TEXT NOT NULL REFERENCES providers (name),
    instance_type   TEXT NOT NULL,
    gpus            BIGINT NOT NULL CHECK (gpus > 0),
    nodes           BIGINT NOT NULL CHECK (nodes > 0),
    steps           BIGINT,
    samples_per_sec DOUBLE PRECISION CHECK (samples_per_sec > 0),
    step_time_sec   DOUBLE PRECISION CHECK (step_time_sec > 0),
    measured_at_ms  BIGINT NOT NULL,
    recorded_at_ms  BIGINT NOT NULL,
    CHECK (samples_per_sec IS NOT NULL OR step_time_sec IS NOT NULL),
    UNIQUE (workload, provider, instance_type, gpus, nodes, measured_at_ms)
);

CREATE INDEX benchmarks_workload ON benchmarks (workload);
