-- Commands POST /api/shell/stream is starting: written before execd's Start, with the
-- reference given to execd (RunRequest.client_ref), and removed once the command's
-- shell_streams row is kept. A row left here is a start whose answer a gateway that
-- died never kept: the next gateway finds the command by its reference and kills it
-- after the grace, as for any stream whose client left.
CREATE TABLE shell_stream_starts (
    client_ref     TEXT PRIMARY KEY,
    started_at_ms  INTEGER NOT NULL
) STRICT;
