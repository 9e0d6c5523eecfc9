-- The gateway's accounts: users, their sessions and API tokens, and the one-time link
-- that creates the first admin. Secrets are stored only as hashes: passwords as argon2id
-- PHC strings, session and token secrets as SHA-256.
CREATE TABLE users (
    id             INTEGER PRIMARY KEY,
    name           TEXT NOT NULL UNIQUE,
    role           TEXT NOT NULL CHECK (role IN ('admin', 'user')),
    password_hash  TEXT NOT NULL,                 -- argon2id PHC string
    created_at_ms  INTEGER NOT NULL,
    disabled       INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE TABLE sessions (
    secret_sha256  BLOB PRIMARY KEY,              -- SHA-256 of the cookie's secret
    user_id        INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at_ms  INTEGER NOT NULL,
    last_seen_ms   INTEGER NOT NULL,
    expires_at_ms  INTEGER NOT NULL               -- absolute expiry
) STRICT;
CREATE INDEX sessions_by_user ON sessions (user_id);

CREATE TABLE api_tokens (
    id             INTEGER PRIMARY KEY,
    user_id        INTEGER NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    name           TEXT NOT NULL,
    secret_sha256  BLOB NOT NULL UNIQUE,
    scopes         TEXT NOT NULL,                 -- JSON array
    created_at_ms  INTEGER NOT NULL,
    last_used_ms   INTEGER,
    revoked_at_ms  INTEGER
) STRICT;
CREATE INDEX api_tokens_by_user ON api_tokens (user_id);

CREATE TABLE setup_links (
    secret_sha256  BLOB PRIMARY KEY,
    created_at_ms  INTEGER NOT NULL,
    expires_at_ms  INTEGER NOT NULL,
    used_at_ms     INTEGER
) STRICT;
