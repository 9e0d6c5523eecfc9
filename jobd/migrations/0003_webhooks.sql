-- A task's webhook trigger: its mode and its secret as kept — for `token`, the token's
-- keyed hash (jobd's key); for `hmac`, the signing secret sealed under jobd's key, bound to
-- the task. Neither is ever answered again after it was made.
ALTER TABLE tasks ADD COLUMN webhook_mode TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN webhook_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN webhook_set_at_ms INTEGER NOT NULL DEFAULT 0;

-- Signed deliveries already taken, until their timestamp leaves the window: a replay
-- within it is refused.
CREATE TABLE webhook_seen (
    task_id       TEXT NOT NULL,
    signature     TEXT NOT NULL,
    expires_at_ms INTEGER NOT NULL,
    PRIMARY KEY (task_id, signature)
) STRICT;
