-- Pools of training workers: the policy (complete, as JSON), the decision state the next
-- decision reads under a row lock, and the last decision that changed something.
CREATE TABLE pools (
    name                TEXT PRIMARY KEY,
    policy              TEXT NOT NULL,
    state               TEXT NOT NULL DEFAULT '{}',
    last_decision       TEXT,
    last_decision_key   TEXT,
    last_decision_at_ms INTEGER,
    since_ms            INTEGER NOT NULL,
    -- How far back a decision reads interruptions and capacity errors (from the policy).
    incident_lookback_ms INTEGER NOT NULL,
    created_at_ms       INTEGER NOT NULL,
    updated_at_ms       INTEGER NOT NULL
);

-- Workers stay after they stop (stopped_at_ms) so the day's spend still counts them.
CREATE TABLE workers (
    pool                 TEXT NOT NULL REFERENCES pools (name) ON DELETE CASCADE,
    id                   TEXT NOT NULL,
    instance_type        TEXT NOT NULL,
    market               TEXT NOT NULL CHECK (market IN ('on_demand', 'spot')),
    zone                 TEXT,
    started_at_ms        INTEGER NOT NULL,
    stopped_at_ms        INTEGER,
    warning_kind         TEXT,
    warning_at_ms        INTEGER,
    warning_action_at_ms INTEGER,
    updated_at_ms        INTEGER NOT NULL,
    PRIMARY KEY (pool, id)
);
CREATE INDEX workers_by_id ON workers (id);

-- Every accepted sample; the key makes a re-sent sample a no-op. Pool-level samples have
-- worker ''. No foreign key: ingestion is the hot path, and deleting a pool deletes these.
CREATE TABLE metric_samples (
    pool           TEXT NOT NULL,
    worker         TEXT NOT NULL,
    name           TEXT NOT NULL,
    at_ms          INTEGER NOT NULL,
    value          REAL NOT NULL,
    received_at_ms INTEGER NOT NULL,
    PRIMARY KEY (pool, worker, name, at_ms)
);
CREATE INDEX metric_samples_by_received ON metric_samples (received_at_ms);

-- The newest sample per pool, worker and name: what a decision reads. last_busy_at_ms is
-- when the series last showed work (for idle-to-zero); kept per series, not per pool, so that
-- senders of different series never wait for each other.
CREATE TABLE signal_latest (
    pool   TEXT NOT NULL,
    worker TEXT NOT NULL,
    name   TEXT NOT NULL,
    at_ms  INTEGER NOT NULL,
    last_busy_at_ms INTEGER,
    value  REAL NOT NULL,
    PRIMARY KEY (pool, worker, name)
);

-- The pool's event log: scaling changes, interruptions, replacements, capacity errors, budget
-- alarms. dedupe_key makes re-sent cloud events and repeated decisions log once.
CREATE TABLE pool_events (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    pool          TEXT NOT NULL REFERENCES pools (name) ON DELETE CASCADE,
    at_ms         INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    worker        TEXT,
    instance_type TEXT,
    zone          TEXT,
    detail        TEXT NOT NULL,
    dedupe_key    TEXT,
    recorded_at_ms INTEGER NOT NULL,
    UNIQUE (pool, dedupe_key)
);
CREATE INDEX pool_events_newest ON pool_events (pool, at_ms DESC, id DESC);
