/*
 * controls.h: the queue's controls: a kind (or an SQS queue, kind
 * sqs:<name>) paused, held to a rate, held to a number of running jobs, and
 * a job cancelled before or while it runs.
 *
 * The controls live in the database (schema 0017 controls), so every box
 * and every restart sees the same ones.  A controlled kind of the box's own
 * waits in a lane of its own (stream.queue < 0): the claim of lane 0 never
 * walks past what a control holds back, and a controlled lane is claimed
 * only when its control lets something through.  So the cost of a claim
 * does not grow with the entries a pause or a limit keeps waiting
 * (dist/doc/design.md §4.12).
 *
 *   pause        nothing of the lane is claimed; leases already out run to
 *                their end.
 *   rate         n per period with a burst, over every worker of every box:
 *                a generic cell rate (one integer, rate_tat) updated in the
 *                claim's transaction under the control's row lock.
 *   concurrency  live leases of the lane at once, over every box, counted
 *                from the stream: a killed worker's lease counts until it
 *                expires.  box_concurrency: the same per box (a lease's
 *                leased_by begins with its box's name and '/').
 *
 * A claim takes the controlled lanes first, each up to what its control
 * allows, then lane 0 for the rest of the batch; priority order holds
 * within each lane.
 */
#ifndef SD_CONTROLS_H
#define SD_CONTROLS_H

#include <stdint.h>

#include "db.h"
#include "queue.h"
#include "result.h"

#define CONTROLS_MAX 256		/* controlled kinds and queues at most */
#define CONTROLS_BOX_MAX 64		/* bytes of a box's name */
#define CONTROLS_WHO_MAX 200		/* bytes of who paused or cancelled */
#define CONTROLS_RATE_MS_MAX (24LL * 3600 * 1000)	/* the longest period: a day */
#define CONTROLS_LIMIT_MAX 1000000	/* the largest rate count, burst, concurrency */

/* A control's limits; 0 is "none" for each. */
struct control_limits {
	int64_t rate_n, rate_ms;	/* rate_n entries per rate_ms */
	int64_t burst;			/* entries at once; 0 with a rate: rate_n */
	int64_t concurrency;		/* live leases, every box */
	int64_t box_concurrency;	/* live leases, each box */
};

/* One control, as controls_list reads it. */
struct control {
	int64_t lane;
	char kind[QUEUE_KIND_MAX + 1];
	int64_t paused_at;		/* 0: not paused */
	char paused_by[CONTROLS_WHO_MAX + 1];
	struct control_limits lim;
	int64_t waiting;		/* entries in its lane (ready, later, leased) */
	int64_t running;		/* live leases */
	int64_t waited_ms;		/* how long its oldest ready entry has waited
					 * for the control (0: none ready) */
};

/* controls_rate_parse: "10/s", "600/m", "100/h", "1/d", "5/250ms", with an
 * optional burst: "10/s burst 20".  [out] *l's rate_n, rate_ms, burst. */
enum sd_result controls_rate_parse(const char *s, struct control_limits *l);

/* controls_rate_text: "10/s burst 20" for l's rate (size >= 48). */
void controls_rate_text(const struct control_limits *l, char *buf, size_t size);

/*
 * controls_pause / controls_resume: kind (a kind name, or sqs:<queue> for
 * an SQS queue, which must exist) paused by who, or no longer.  Pausing
 * moves the kind's waiting entries to its lane once; resuming the last of a
 * kind's controls moves them back.  [out] *changed (may be NULL): 0 when it
 * already was so.
 */
enum sd_result controls_pause(struct db *db, const char *kind, const char *who, int *changed);
enum sd_result controls_resume(struct db *db, const char *kind, int *changed);

/* controls_limit: kind's limits become l (all 0: none). */
enum sd_result controls_limit(struct db *db, const char *kind, const struct control_limits *l);

/* controls_list: every control, by kind.  [out] *rows (free()), *n. */
enum sd_result controls_list(struct db *db, struct control **rows, int *n);

/* controls_show: kind's control as controls_list reads it, with its
 * counts; a kind with none is all zero but its name.  [out] *c. */
enum sd_result controls_show(struct db *db, const char *kind, struct control *c);

/* controls_get: kind's control; SD_NOT_FOUND when it has none. */
enum sd_result controls_get(struct db *db, const char *kind, struct control *out);

/*
 * controls_claim: in the caller's transaction (or one of its own), lease up
 * to n entries of the controlled kinds of the box's own (lanes < 0), each
 * lane up to what its control allows now, for worker (box/name).
 * [out] out[0..*n_out) as queue_claim's; *wake_at: the earliest time a
 * lane held back now may let an entry through (a rate's next slot, a lease
 * that ends, an entry that becomes visible), or -1.
 */
enum sd_result controls_claim(struct db *db, const char *worker, int n, int64_t lease_ms,
			      struct job **out, int *n_out, int64_t *wake_at);

/* controls_claim_lane: queue_claim_lane under the lane's control, if it has
 * one (an SQS queue paused or limited): nothing when paused. */
enum sd_result controls_claim_lane(struct db *db, int64_t lane, const struct lane_rules *rules,
				   const char *worker, int n, int64_t lease_ms, struct job **out,
				   int *n_out);

/*
 * controls_cancel: take every entry with job_id out of the stream (and an
 * unpublished outbox row with it) into cancelled_jobs, by who.  An entry
 * under a live lease runs on: its worker's next extend or ack is refused.
 * [out] *n: entries cancelled (0 is SD_NOT_FOUND); *running: of them under
 * a live lease.
 */
enum sd_result controls_cancel(struct db *db, const char *job_id, const char *who, int64_t *n,
			       int64_t *running);

/* controls_prune: forget up to limit cancelled jobs cancelled before
 * before_ms.  [out] *n. */
enum sd_result controls_prune(struct db *db, int64_t before_ms, int limit, int64_t *n);

/* controls_box_set: the box's name (a lease's leased_by is box/worker);
 * "" or NULL: none, then box_concurrency counts nothing. */
void controls_box_set(const char *box);
const char *controls_box(void);

#endif
