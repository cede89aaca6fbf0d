-- Run artifacts (docs/profiles.md): what a run's job produced besides metrics and logs, today the
-- profiles `taectl profile` and train.profile_at capture. They travel and are stored exactly like
-- checkpoints (same upload path, same blob store in $TAE_HOME/checkpoints, same incomplete-then-
-- complete rows and blob garbage collection), so they are rows of `checkpoints` with a name:
-- `artifact` is empty for a checkpoint and names the artifact otherwise. An artifact is never
-- restored into a later attempt and never dropped by resources.keep_checkpoints; only
-- `taectl scrap --artifacts` removes it.

ALTER TABLE checkpoints ADD COLUMN artifact TEXT NOT NULL DEFAULT '';
CREATE INDEX checkpoints_by_artifact ON checkpoints (run_id, artifact);
