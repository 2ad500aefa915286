/*
 * boxmove.h: moving a box from its SQLite file to a PostgreSQL database
 * (`stagedoor migrate --from PATH --to postgresql://...`).
 *
 * Everything the box holds is copied from one consistent snapshot of the
 * SQLite file: every table with its ids (the queue with its leases, the
 * outbox, orders and tickets, the idempotency records, the counters, the
 * client keys, the tokens' hashes) and the PDFs, from the database or from
 * the state folder's blobs/.  The copy is one transaction on the target:
 * it lands whole or not at all.  A target that already holds rows is
 * refused, and nothing is written to it.  After the copy each table's rows
 * are counted on both sides, the identity sequences are moved past the
 * copied ids, and `check` runs on the target.
 *
 * The source's write lock is held while the snapshot is read, so a box that
 * still runs waits (stop it first: its in-flight jobs then finish once on
 * PostgreSQL, by the same four techniques that make any re-run harmless).
 */
#ifndef SD_BOXMOVE_H
#define SD_BOXMOVE_H

#include <stdint.h>
#include <stdio.h>

#include "result.h"

#define BOXMOVE_TABLES 26

struct boxmove_report {
	int n_tables;
	struct {
		const char *name;
		int64_t source, target;	/* rows on each side after the copy */
	} table[BOXMOVE_TABLES];
	int64_t pdfs_from_files;	/* PDFs read from the state folder's blobs/ */
	int64_t ms;			/* the copy's wall time */
};

/*
 * boxmove_run: copy the box at from (an SQLite file; its state folder
 * from_state, NULL: beside it) into the empty PostgreSQL database to.
 * progress (may be NULL) gets a line per table.  [out] rep.  SD_INVALID
 * when from is not SQLite, to is not PostgreSQL or to holds rows; SD_SCHEMA
 * when the two disagree on the schema; SD_DB when a count differs after
 * the copy (nothing is then committed).
 */
enum sd_result boxmove_run(const char *from, const char *from_state, const char *to,
			   FILE *progress, struct boxmove_report *rep);

#endif
