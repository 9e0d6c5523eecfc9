-- Which executions run on a terminal (web terminals: Start with tty, used with Attach).
ALTER TABLE executions ADD COLUMN tty INTEGER NOT NULL DEFAULT 0;
CREATE INDEX executions_terminals ON executions (tty, status, id) WHERE tty = 1;
