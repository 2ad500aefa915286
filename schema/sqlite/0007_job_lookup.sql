-- 0007_job_lookup: a job found by its identity without a walk of history.
--
-- `order show` (and GET /v1/orders/{id}) names an order's jobs by job_id
-- ('outbox:<id>') and looks each one up in the stream, done_jobs and
-- dead_jobs.  dead_jobs had its index; the stream and done_jobs had none, so
-- with a season of finished jobs each lookup read all of done_jobs.  The
-- outbox's job ids grow with the outbox, so both indexes are appended to at
-- their right edge: the enqueue and the ack pay one short B-tree insert each.

CREATE INDEX stream_job_id ON stream (job_id);
CREATE INDEX done_jobs_job_id ON done_jobs (job_id);
