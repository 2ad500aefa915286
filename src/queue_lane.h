/*
 * queue_lane.h: the stream's lanes taken whole (queue.h's entries carry
 * their lane in `queue`: 0 the box's own, < 0 a controlled kind's, > 0 an
 * SQS queue's): a kind's entries and dead letters moved from one lane to
 * another, a lane's waiting entries and its live leases.  What a lane is
 * for is controls.h's and sqs_store.h's; its claim is queue_claim_lane.
 */
#ifndef SD_QUEUE_LANE_H
#define SD_QUEUE_LANE_H

#include <stdint.h>

#include "db.h"
#include "result.h"

/* queue_lane_move: the entries and dead letters in lane from (of kind;
 * NULL: all of them) into lane to, in the caller's transaction. */
enum sd_result queue_lane_move(struct db *db, int64_t from, int64_t to, const char *kind);

/* queue_lane_waiting: [out] *n entries in lane (ready, scheduled or leased). */
enum sd_result queue_lane_waiting(struct db *db, int64_t lane, int64_t *n);

/* queue_lane_live: [out] *n leases of lane (not 0) live at now, those of
 * box's workers alone when box is not NULL (leased_by "<box>/..."), and
 * *end the earliest end among them (-1: none). */
enum sd_result queue_lane_live(struct db *db, int64_t lane, int64_t now, const char *box,
			       int64_t *n, int64_t *end);

#endif
