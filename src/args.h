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
};

#define ARGS_MAX_POS 8

/*
 * args_parse: parse argv[0..argc) against opts (ended by a { NULL } entry).
 * [out] pos[0..*npos) are the positional words, at most ARGS_MAX_POS.
 */
enum sd_result args_parse(int argc, char **argv, struct arg_opt *opts, char **pos, int *npos);

/* args_int: a whole decimal number in [min, max], or SD_INVALID naming what. */
enum sd_result args_int(const char *s, int64_t min, int64_t max, const char *what, int64_t *out);

#endif
