-- Other names of a worker: what metrics exporters call it (a host name, a private DNS name or
-- IP), recorded from the cloud or given when it is registered. An alias names one worker of a
-- pool at a time: a name the cloud hands to a new instance (a reused private IP) moves to it.
CREATE TABLE worker_aliases (
    pool   TEXT NOT NULL,
    worker TEXT NOT NULL,
    alias  TEXT NOT NULL,
    PRIMARY KEY (pool, alias),
    FOREIGN KEY (pool, worker) REFERENCES workers (pool, id) ON DELETE CASCADE
);
CREATE INDEX worker_aliases_by_worker ON worker_aliases (pool, worker);
