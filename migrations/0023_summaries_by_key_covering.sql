-- run_summaries_by_key (0020) with the last step and the count too, so that what a curve or a
-- history reads of one metric's summaries (server/query/query.cc, kKeySummaries: its series
-- cache checks each run's count) comes from the index alone: on a cold page cache a 10,000-run
-- study's train/loss is ~110 pages of the index in key order instead of ~900 pages of the table,
-- where every run's summaries of all its metrics lie together.
DROP INDEX run_summaries_by_key;
CREATE INDEX run_summaries_by_key
  ON run_summaries (key_id, run_id, last_value, min_value, max_value, last_step, count);
