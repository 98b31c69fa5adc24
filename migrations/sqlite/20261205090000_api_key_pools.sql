-- The pools a key reaches, comma-separated pool names; empty means every pool, which is what
-- every key made before this column keeps.
ALTER TABLE api_keys ADD COLUMN pools TEXT NOT NULL DEFAULT '';
