-- Measured throughput of a named workload on an instance type at a size (GPUs per node ×
-- nodes): the "run fixed steps on three sizes" practice. One of samples_per_sec and
-- step_time_sec is given. Append-only like prices: a new measurement gets a new measured_at.
CREATE TABLE benchmarks (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    workload        TEXT NOT NULL,
    provider        TEXT NOT NULL REFERENCES providers (name),
    instance_type   TEXT NOT NULL,
    gpus            INTEGER NOT NULL CHECK (gpus > 0),
    nodes           INTEGER NOT NULL CHECK (nodes > 0),
    steps           INTEGER,
    samples_per_sec REAL CHECK (samples_per_sec > 0),
    step_time_sec   REAL CHECK (step_time_sec > 0),
    measured_at_ms  INTEGER NOT NULL,
    recorded_at_ms  INTEGER NOT NULL,
    CHECK (samples_per_sec IS NOT NULL OR step_time_sec IS NOT NULL),
    UNIQUE (workload, provider, instance_type, gpus, nodes, measured_at_ms)
);

CREATE INDEX benchmarks_workload ON benchmarks (workload);
