-- API keys. The secret part of a key is never stored: only its Argon2id hash (PHC string).
-- A key is never deleted, only revoked, so the first-start bootstrap can tell "no key was
-- ever made" from "every key was revoked".
CREATE TABLE api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    -- Comma-separated: read, decide, ingest, admin.
    scopes TEXT NOT NULL,
    secret_hash TEXT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    revoked_at_ms BIGINT
);
