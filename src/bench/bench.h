/*
 * bench.h: stagedoor-bench, the box's benchmarks as a program of their own
 * (as pgbench is beside PostgreSQL): built by `make bench`, never part of
 * the product or its package.  Each command measures the product's own
 * modules on this machine and prints its figures (--json for a line a
 * script reads).  What each measures and how: dist/doc/testing.md.
 */
#ifndef SD_BENCH_H
#define SD_BENCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "help.h"
#include "result.h"

struct db;

/* bench_commands: the program's commands (bench.c), ended by a NULL name */
extern const struct cli_cmd bench_commands[];

/* BENCH_ARG_KEEP: --keep, the bench folder kept and named at the end */
#define BENCH_ARG_KEEP(v) { "keep", ARG_FLAG, (v), 0, 0, 0, NULL, \
			    "keep the bench folder and say where it is", 0 }

/* BENCH_ARG_PAYSINK: --paysink PATH, tools/paysink's binary (bench_default) */
#define BENCH_ARG_PAYSINK(v) { "paysink", ARG_STR, (v), 0, 0, 0, "PATH", \
			       "tools/paysink's binary (default: paysink beside this program)", 0 }

/* bench_progress: one "bench: ..." progress line on stderr. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* bench_beside: rel (a path) taken from this program's folder, into out:
 * "../bin/stagedoor" is the product beside build/stagedoor-bench. */
void bench_beside(const char *rel, char *out, size_t size);

/* bench_default: *path, unless given, set to rel beside this program (into
 * buf, size bytes); 0 when it is an executable, else -1. */
int bench_default(const char **path, const char *rel, char *buf, size_t size);

/*
 * The first failure among a benchmark's threads: its message is the one
 * kept (the later ones follow from it), and failed tells every thread to
 * stop.  bench_fail records one, if none was.
 */
struct bench_failure {
	pthread_mutex_t mu;
	atomic_int failed;
	char err[600];
};
void bench_fail(struct bench_failure *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));



/*
 * bench_in_dir: run fn(dir, "<dir>/stagedoor.db", arg) in a fresh
 * bench_dir_make folder with the log at warn or quieter, then remove the
 * folder unless keep (then say where it is).  0 when fn returned SD_OK, else
 * the exit status with the message printed.
 */
int bench_in_dir(int keep, enum sd_result (*fn)(const char *dir, const char *path, void *arg),
		 void *arg);

/* bench_target_set: --db URI: benchmarks then run on PostgreSQL, in a
 * scratch schema of that database (bench_scratch_make) made and dropped by
 * bench_in_dir, with the bench folder as the box's state folder; NULL or
 * "": SQLite in the folder.  Anything but a postgresql:// URI is refused. */
int bench_target_set(const char *uri);

/*
 * bench_box: what `init` makes at path (schema, ticket key, api.token), open
 * at DB_SYNC_FULL in [out] *db (the caller closes it), the token in [out]
 * token (API_TOKEN_HEX + 1 bytes), and one event named event_name with room
 * for orders orders ([out] *event_id).
 */
enum sd_result bench_box(const char *path, const char *event_name, int64_t orders,
			 struct db **db, char *token, int64_t *event_id);

/*
 * bench_args: parse a bench subcommand's options (no positional words).
 * 0, or the exit status after saying why on stderr with the usage:
 * 1 for a bad option value, 2 for words that are not options.
 */
struct arg_opt;
int bench_args(int argc, char **argv, struct arg_opt *opts, const char *usage);

/* bench_deadline: ms from now on CLOCK_REALTIME, for pthread_cond_timedwait. */
struct timespec;
void bench_deadline(struct timespec *until, int64_t ms);

/* bench_sort_i64: v[0..n) in ascending order. */
void bench_sort_i64(int64_t *v, int64_t n);

/* bench_pct_ms: the nearest-rank percentile p (0..1) of sorted
 * microseconds v[0..n), in milliseconds; 0 when n is 0. */
double bench_pct_ms(const int64_t *v, int64_t n, double p);

/* bench_pipeline_cmd: `bench pipeline`, given the words after "pipeline". */
int bench_pipeline_cmd(int argc, char **argv);

/* bench_api_cmd: `bench api`, given the words after "api". */
int bench_api_cmd(int argc, char **argv);

/* bench_claim_cmd: `bench claim`, given the words after "claim". */
int bench_claim_cmd(int argc, char **argv);

/* bench_claim_controls (bench_controls.c): the worker's claim with the
 * queue's controls off and with held entries behind each of three, in dir;
 * [out] off[0..4), on[0..4): claim of 8, claim of none, enqueue of an
 * uncontrolled kind, enqueue of a controlled one; medians in us. */
#define BENCH_CONTROLS_OPS 4
enum sd_result bench_claim_controls(const char *dir, int64_t reps, int64_t held,
				    double off[BENCH_CONTROLS_OPS], double on[BENCH_CONTROLS_OPS]);

/* bench_token: the API token `init` wrote beside the database at path, as a
 * client reads it.  [out] token: API_TOKEN_HEX + 1 bytes. */
enum sd_result bench_token(const char *path, char *token);

/* bench_scale_cmd: `bench scale`, given the words after "scale". */
int bench_scale_cmd(int argc, char **argv);

/* bench_intake_cmd: `bench intake`, given the words after "intake". */
int bench_intake_cmd(int argc, char **argv);

/* bench_event_cmd: `bench event`, given the words after "event". */
int bench_event_cmd(int argc, char **argv);

/* bench_shop_cmd: `bench shop`, given the words after "shop". */
int bench_shop_cmd(int argc, char **argv);

/* bench_line_cmd: `bench line`, given the words after "line". */
int bench_line_cmd(int argc, char **argv);

/* bench_hoard_cmd: `bench hoard`, given the words after "hoard". */
int bench_hoard_cmd(int argc, char **argv);

/* bench_sqs_cmd: `bench sqs`, given the words after "sqs". */
int bench_sqs_cmd(int argc, char **argv);

/*
 * bench_scratch_make: a new empty schema on the PostgreSQL server of uri
 * for a benchmark's fresh box: [out] out = uri with it as the search_path,
 * name its name (bench_scratch_drop removes it with all it holds).
 */
enum sd_result bench_scratch_make(const char *uri, char *out, size_t size, char *name,
				  size_t nsize);
enum sd_result bench_scratch_drop(const char *uri, const char *name);

#endif
