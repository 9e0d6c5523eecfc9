-- Approvals: an operator's decision a command waits for, bound to the digest of the
-- canonical request. Kept after they end (the history), never deleted.
CREATE TABLE approvals (
    id                  TEXT PRIMARY KEY,      -- UUID v7
    state               TEXT NOT NULL,         -- pending, approved, denied, revoked, expired, consumed
    risk_class          TEXT NOT NULL,
    reasons             TEXT NOT NULL,         -- JSON: [{class, why}]
    purpose             TEXT NOT NULL,
    request             TEXT NOT NULL,         -- canonical JSON of what runs
    digest              TEXT NOT NULL,         -- SHA-256 (hex) of `request`
    stdin               BLOB NOT NULL,
    requester_role      TEXT NOT NULL,
    requester_principal TEXT NOT NULL,
    created_at_ms       INTEGER NOT NULL,
    expires_at_ms       INTEGER NOT NULL,
    decided_by          TEXT NOT NULL DEFAULT '',
    decided_at_ms       INTEGER,
    note                TEXT NOT NULL DEFAULT '',
    execution_id        TEXT NOT NULL
) STRICT;

-- One pending approval per request and requester: asking again returns it.
CREATE UNIQUE INDEX approvals_pending ON approvals (digest, requester_role, requester_principal)
    WHERE state = 'pending';
CREATE INDEX approvals_by_state ON approvals (state, id);
