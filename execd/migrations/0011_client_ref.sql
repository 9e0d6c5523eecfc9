-- The caller's own reference for a launch (RunRequest.client_ref; '' for none): a caller
-- that may lose Start's answer finds the launch again by it.
ALTER TABLE executions ADD COLUMN client_ref TEXT NOT NULL DEFAULT '';
CREATE INDEX executions_client_ref ON executions (client_ref) WHERE client_ref != '';
