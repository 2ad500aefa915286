/*
 * metrics.h: the counters the worker processes share with the HTTP server.
 *
 * A handler runs in a worker process; /metrics is answered by another
 * process (serve, or run's HTTP child).  What only a worker sees (what each
 * handler run ended in and how long it took, acks refused as stale, the
 * duplicate runs each technique absorbed) goes into one small file beside the
 * database, "<db>-metrics", that every process on that database maps shared
 * and updates with relaxed atomic adds: no lock, no system call and no
 * database write on a job's path, and a worker killed mid-job loses nothing
 * it had counted.  The counters grow for the file's life, like Prometheus
 * counters; a file made for another database (a new file at the same path)
 * starts again from zero.  The file holds counts and kind names only.
 *
 * Kinds are named in the file: up to METRICS_KINDS of them, each name taken
 * once under an flock; kinds past that are counted as "other".
 * Every function accepts a NULL handle and then does nothing, so a process
 * whose file cannot be opened runs on, uncounted (metrics_open logs why).
 */
#ifndef SD_METRICS_H
#define SD_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "result.h"

#define METRICS_KINDS 16
#define METRICS_KIND_MAX 64		/* = QUEUE_KIND_MAX */
#define METRICS_BUCKETS 13		/* finite histogram bounds; +Inf is one more */

/* What a handler run returned. */
enum metrics_outcome {
	METRICS_DONE,
	METRICS_RETRY_LATER,
	METRICS_FAILED,
	METRICS_FAILED_PERMANENT,
	METRICS_OUTCOMES
};

/* The four techniques (dist/doc/design.md §1.2), by which a duplicate run
 * was absorbed. */
enum metrics_technique {
	METRICS_CHECK_STATE,		/* render_tickets: tickets.pdf_key was set */
	METRICS_UNIQUE_CLAIM,		/* send_tickets, cancel_order: email_sends
					 * claimed or sent */
	METRICS_PROVIDER_KEY,		/* the mail provider (or the maildir) answered
					 * with the first send */
	METRICS_PROCESSED_JOBS,		/* update_sales_counter, cancel_order: job id
					 * already recorded */
	METRICS_TECHNIQUES
};

/* The histogram's upper bounds in microseconds (1 ms .. 60 s). */
extern const int64_t metrics_bounds_us[METRICS_BUCKETS];
extern const char *const metrics_outcome_names[METRICS_OUTCOMES];
extern const char *const metrics_technique_names[METRICS_TECHNIQUES];

struct metrics;

/* metrics_path: "<db_path>-metrics" into buf; for a PostgreSQL URI, where
 * several boxes share the database, "<state dir>/metrics" (metrics_home_set:
 * this process's state folder; SD_INVALID when it is not set). */
enum sd_result metrics_path(const char *db_path, char *buf, size_t size);
void metrics_home_set(const char *state_dir);

/*
 * metrics_open: map the file of the database at db_path, making it (0600)
 * or starting it again when it is missing, short, foreign or was made for
 * another database file.  [out] *out (metrics_close).
 */
enum sd_result metrics_open(const char *db_path, struct metrics **out);
void metrics_close(struct metrics *m);

/* metrics_run: one handler run of kind, its outcome and its duration. */
void metrics_run(struct metrics *m, const char *kind, enum metrics_outcome o,
		 int64_t duration_us);

/* metrics_stale: a result of kind not recorded: its lease had been lost. */
void metrics_stale(struct metrics *m, const char *kind);

/* metrics_duplicate: a duplicate run absorbed by technique t. */
void metrics_duplicate(struct metrics *m, enum metrics_technique t);

/* A copy of the counters, read with atomic loads (each value whole; the set
 * is not one instant). */
struct metrics_kind_counts {
	char kind[METRICS_KIND_MAX + 1];
	uint64_t runs[METRICS_OUTCOMES];
	uint64_t buckets[METRICS_BUCKETS + 1];	/* not cumulative; last: over the top bound */
	uint64_t sum_us;
	uint64_t stale;
};

struct metrics_snapshot {
	int n_kinds;
	struct metrics_kind_counts kinds[METRICS_KINDS + 1];	/* + "(other)" */
	uint64_t duplicates[METRICS_TECHNIQUES];
};

void metrics_read(const struct metrics *m, struct metrics_snapshot *out);

/*
 * metrics_write_prom: the snapshot in the Prometheus text format:
 * stagedoor_handler_runs_total{kind,outcome}, the histogram
 * stagedoor_handler_duration_seconds{kind}, stagedoor_stale_acks_total{kind}
 * and stagedoor_duplicates_absorbed_total{technique}.
 */
void metrics_write_prom(FILE *f, const struct metrics_snapshot *s);

/* metrics_prom_label: a Prometheus label value, escaped. */
void metrics_prom_label(FILE *f, const char *s);

#endif
