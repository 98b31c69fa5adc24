-- A counter bumped in every transaction that changes the catalog. Replicas compare it with the
-- version their in-memory snapshot was built from, so a change made by another process (a
-- CLI import into the SQLite file, a missed NOTIFY) is noticed by polling.
CREATE TABLE catalog_version (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    version BIGINT NOT NULL
);

INSERT INTO catalog_version (id, version) VALUES (1, 0);
