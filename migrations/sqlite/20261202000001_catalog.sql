-- The catalog: providers, GPU datasheet facts, offerings and their append-only price history.
-- Money is integer micro-dollars per hour; times are epoch milliseconds written by the service.

CREATE TABLE providers (
    name         TEXT PRIMARY KEY NOT NULL,
    display_name TEXT NOT NULL
);

INSERT INTO providers (name, display_name) VALUES
    ('aws', 'Amazon Web Services'),
    ('gcp', 'Google Cloud'),
    ('azure', 'Microsoft Azure'),
    ('lambda', 'Lambda'),
    ('nebius', 'Nebius'),
    ('vast', 'Vast.ai'),
    ('alibaba', 'Alibaba Cloud');

CREATE TABLE gpus (
    name                   TEXT PRIMARY KEY NOT NULL,
    variant                TEXT NOT NULL,
    memory_gib             REAL NOT NULL,
    memory_bandwidth_gbps  REAL NOT NULL,
    fp16_bf16_dense_tflops REAL NOT NULL,
    bf16_supported         BOOLEAN NOT NULL,
    fp32_tflops            REAL NOT NULL,
    gpu_link_gbps          REAL NOT NULL,
    tdp_w                  REAL NOT NULL
);

CREATE TABLE offerings (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    provider       TEXT NOT NULL REFERENCES providers (name),
    region         TEXT NOT NULL,
    zone           TEXT NOT NULL DEFAULT '',
    instance_type  TEXT NOT NULL,
    gpu            TEXT NOT NULL,
    gpu_count      REAL NOT NULL CHECK (gpu_count > 0),
    gpu_memory_gib REAL NOT NULL CHECK (gpu_memory_gib >= 0),
    vcpus          REAL NOT NULL,
    memory_gib     REAL NOT NULL,
    network_gbps   REAL,
    interconnect   TEXT NOT NULL CHECK (interconnect IN ('efa', 'infiniband', 'roce', 'gpudirect_tcpx', 'none')),
    local_nvme_gb  REAL,
    arch           TEXT NOT NULL,
    created_at_ms  INTEGER NOT NULL,
    updated_at_ms  INTEGER NOT NULL,
    UNIQUE (provider, region, zone, instance_type)
);

CREATE INDEX offerings_provider_instance_type ON offerings (provider, instance_type);

CREATE TABLE price_observations (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    offering_id    INTEGER NOT NULL REFERENCES offerings (id),
    market         TEXT NOT NULL CHECK (market IN ('on_demand', 'spot')),
    price_micros   INTEGER NOT NULL CHECK (price_micros > 0),
    observed_at_ms INTEGER NOT NULL,
    recorded_at_ms INTEGER NOT NULL,
    source         TEXT NOT NULL,
    UNIQUE (offering_id, market, observed_at_ms)
);

CREATE INDEX price_observations_observed_at ON price_observations (observed_at_ms);

-- History is append-only: a correction is a newer observation, never an edit.
CREATE TRIGGER price_observations_no_update
    BEFORE UPDATE ON price_observations
    BEGIN SELECT RAISE(ABORT, 'price_observations is append-only'); END;

CREATE TRIGGER price_observations_no_delete
    BEFORE DELETE ON price_observations
    BEGIN SELECT RAISE(ABORT, 'price_observations is append-only'); END;
