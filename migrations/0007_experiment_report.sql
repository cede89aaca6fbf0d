-- [report] of the experiment file: the metrics taectl report and plot show when none is named,
-- and which way each metric is better, as {"metrics": [...], "goal": {"name": "min"|"max"}}.
-- Not part of the spec hash: a resubmit that changes only [report] updates it in place.

ALTER TABLE experiments ADD COLUMN report TEXT NOT NULL DEFAULT '{}';
