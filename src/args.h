/*
 * args.h: the command line's options: --name VALUE, --name=VALUE, --flag.
 *
 * A command declares its options in a table; args_parse fills the values and
 * collects the positional words.  Unknown options, missing values and
 * malformed numbers are errors with a message naming the option.
 */
#ifndef SD_ARGS_H
#define SD_ARGS_H

#include <stdint.h>

#include "result.h"

enum arg_type { ARG_FLAG, ARG_STR, ARG_INT };

struct arg_opt {
	const char *name;	/* without the leading "--" */
	enum arg_type type;
	void *value;		/* int * for ARG_FLAG, const char ** for ARG_STR,
				 * int64_t * for ARG_INT */
	int64_t min, max;	/* ARG_INT: accepted range */
	int seen;		/* set by args_parse */
	const char *metavar;	/* the value's name in help ("PATH"); NULL: N or VALUE */
	const char *help;	/* one line for --help, the man page and completion */
	int setting;		/* a configuration key's flag (stagedoor.conf(5)) */
};

/* The table's end, and the options many commands share. */
#define ARG_END { NULL, 0, NULL, 0, 0, 0, NULL, NULL, 0 }
#define ARG_DB(v) { "db", ARG_STR, (v), 0, 0, 0, "PATH|URI", \
		    "the database: a file path or postgresql://... (default $STAGEDOOR_DB, " \
		    "the config file's db, else ./var/stagedoor.db)", 0 }
#define ARG_STATE_DIR(v) { "state-dir", ARG_STR, (v), 0, 0, 0, "DIR", \
			   "the box's own files: ticket.key, PDFs, maildir (default " \
			   "$STAGEDOOR_STATE_DIR, the config file's state_dir, else the " \
			   "database's folder)", 0 }
#define ARG_JSON(v) { "json", ARG_FLAG, (v), 0, 0, 0, NULL, "print JSON instead of text", 0 }

#define ARGS_MAX_POS 8

/*
 * args_parse: parse argv[0..argc) against opts (ended by a { NULL } entry).
 * [out] pos[0..*npos) are the positional words, at most ARGS_MAX_POS.
 */
enum sd_result args_parse(int argc, char **argv, struct arg_opt *opts, char **pos, int *npos);

/*
 * args_wants_help: 1 when --help or -h stands where an option may (not as
 * another option's value, not after "--"), else 0.  Checked before
 * args_parse, so that a command's help never depends on its other words.
 */
int args_wants_help(int argc, char **argv, const struct arg_opt *opts);


#endif
