-- Idempotency keys of ingestion batches. A row is written in the same transaction as its batch,
-- so a committed batch always has its key and the answer it got, and a rolled-back one has
-- neither. Keys are scoped per caller (API key id, 'webhook:<source>', or '' without auth)
-- and route; a key past expires_at_ms is treated as absent and pruned.
CREATE TABLE idempotency_keys (
    caller TEXT NOT NULL,
    route TEXT NOT NULL,
    key TEXT NOT NULL,
    -- SHA-256 (hex) of method, route and body: the same key with another body is refused.
    request_hash TEXT NOT NULL,
    -- The answer that was sent; NULL only inside the transaction that claimed the key.
    status INTEGER,
    content_type TEXT,
    body BLOB,
    created_at_ms INTEGER NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    PRIMARY KEY (caller, route, key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at_ms);
