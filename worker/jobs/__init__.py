"""The job machinery: a job's life (job_run: claim, progress, finish, fail, the model-job
skeleton), one module per job kind (summary, answer, facts, collection, ingest), a job's
progress, the poison-task guard, summary slots, and recovery of jobs whose worker died."""
