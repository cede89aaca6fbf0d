-- Each metric's summaries in run order, with the values a report reads: a report of a 10,000-run
-- study reads its wanted metrics' 10,000 rows each (50,000 for the default columns) instead of
-- every metric's rows of its runs (130,000), which took most of its time. Kept at ingest by the
-- summary upsert, once per (run, metric) of a batch, not per point.
CREATE INDEX run_summaries_by_key ON run_summaries (key_id, run_id, last_value, min_value, max_value);
