-- Commands started by POST /api/shell/stream, while their stream is open or waiting for
-- its client to come back: a command whose client left is killed after
-- gateway.stream_resume_s, and a restarted gateway keeps that promise for every row
-- here (its clients all lost their connection with it).
CREATE TABLE shell_streams (
    execution_id   TEXT PRIMARY KEY,
    started_at_ms  INTEGER NOT NULL
) STRICT;
