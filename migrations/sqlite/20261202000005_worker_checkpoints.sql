-- When a worker's job last reported a saved checkpoint: the reconciler terminates an
-- interrupted worker only after it (or once the cloud's deadline has passed).
ALTER TABLE workers ADD COLUMN checkpoint_at_ms BIGINT;
