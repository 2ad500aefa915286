/*
 * scan.c: `stagedoor scan CODE`: a ticket admitted at the door, its exit
 * status the answer.  The work is in scans.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "db.h"
#include "events.h"
#include "orders.h"
#include "scans.h"
#include "timefmt.h"

/* ---- scan ------------------------------------------------------------ */

static int scan_main(int argc, char **argv)
{
	const char *dbp = NULL;
	const char *state = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], keypath[PATH_MAX], when[64];
	unsigned char key[CODE_KEY_LEN];
	struct scan_result res;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "scan CODE")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	if ((r = code_key_path(db_path(db), cli_state_dir(state), keypath, sizeof keypath)) != SD_OK ||
	    (r = code_key_load(keypath, key)) != SD_OK ||
	    (r = scan_ticket(db, key, pos[0], NULL, &(struct scan_by){ "cli", NULL, NULL },
			     &res)) != SD_OK) {
		db_close(db);
		memset(key, 0, sizeof key);
		return cli_fail(r);
	}
	db_close(db);
	memset(key, 0, sizeof key);
	switch (res.outcome) {
	case SCAN_ADMITTED:
		printf("admitted: seat %s, order %s\n", res.seat_label, res.order_id);
		return 0;
	case SCAN_ALREADY:
		timefmt_format(res.scanned_at, when, sizeof when);
		printf("already scanned at %s%s%s: seat %s, order %s\n", when,
		       res.scanned_by[0] ? " at " : "", res.scanned_by, res.seat_label, res.order_id);
		return 3;
	case SCAN_CANCELLED:
		printf("cancelled: seat %s, order %s\n", res.seat_label, res.order_id);
		return 5;
	case SCAN_EVENT_CANCELLED:
		printf("event cancelled: %s\n", res.event_name);
		return 5;
	case SCAN_INVALID:
	default:
		printf("invalid\n");
		return 4;
	}
}

const struct cli_cmd cmd_scan = CLI_NODE("scan", scan_main, NULL,
		"admit a ticket at the door (exit 0 admitted, 3 already scanned, 4 invalid, 5 "
		"cancelled, or its event is)");
