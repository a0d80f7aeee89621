"""The job machinery: what each task does as plain functions (runner and its siblings), a job's
progress, the poison-task guard, summary slots, and recovery of jobs whose worker died."""
