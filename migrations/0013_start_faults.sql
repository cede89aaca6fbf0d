-- A run whose start fails the same way on the same agent attempt after attempt (the job's
-- program never ran) fails with that cause instead of being requeued again (server/lifecycle
-- OnStartFault): the run remembers its last start fault and how many attempts in a row it ended.
ALTER TABLE runs ADD COLUMN start_fault TEXT NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN start_faults INTEGER NOT NULL DEFAULT 0;
