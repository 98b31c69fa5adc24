-- When each series turned idle: its first observation without work after the last one with
-- work (NULL while it shows work, or before it reported any). Idle-to-zero counts from the
-- latest of a pool's series, so a sender that reports only on change is not taken as idle
-- from its last busy sample. Existing rows fall back to last_busy_at_ms.
ALTER TABLE signal_latest ADD COLUMN idle_since_ms BIGINT;
