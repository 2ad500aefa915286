/*
 * args.c: option parsing for the subcommands.
 */
#include "args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* args_int: a whole decimal number in [min, max], or SD_INVALID naming what. */
static enum sd_result args_int(const char *s, int64_t min, int64_t max, const char *what, int64_t *out)
{
	char *end;
	long long v;

	errno = 0;
	if (!s || !*s)
		return err_set(SD_INVALID, "%s needs a number", what);
	v = strtoll(s, &end, 10);
	if (errno || *end || end == s)
		return err_set(SD_INVALID, "%s must be a whole number, not '%.40s'", what, s);
	if (v < min || v > max)
		return err_set(SD_INVALID, "%s must be between %lld and %lld, not %lld", what,
			       (long long)min, (long long)max, v);
	*out = v;
	return SD_OK;
}

/* find: the option named a[0..len) in opts, or NULL */
static const struct arg_opt *find(const struct arg_opt *opts, const char *a, size_t len)
{
	for (; opts->name; opts++)
		if (strlen(opts->name) == len && strncmp(opts->name, a, len) == 0)
			return opts;
	return NULL;
}

int args_wants_help(int argc, char **argv, const struct arg_opt *opts)
{
	int i;

	for (i = 0; i < argc; i++) {
		const char *a = argv[i];
		const struct arg_opt *o;
		size_t len;

		if (strcmp(a, "--") == 0)
			return 0;
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			return 1;
		if (strncmp(a, "--", 2) != 0 || strchr(a, '='))
			continue;
		len = strlen(a + 2);
		if ((o = find(opts, a + 2, len)) && o->type != ARG_FLAG)
			i++;	/* its value, whatever it looks like */
	}
	return 0;
}

enum sd_result args_parse(int argc, char **argv, struct arg_opt *opts, char **pos, int *npos)
{
	int i;

	*npos = 0;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *val = NULL, *eq;
		struct arg_opt *o;
		size_t len;

		if (strcmp(a, "--") == 0) {
			for (i++; i < argc; i++) {
				if (*npos == ARGS_MAX_POS)
					return err_set(SD_INVALID, "too many arguments");
				pos[(*npos)++] = argv[i];
			}
			break;
		}
		if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
			if (*npos == ARGS_MAX_POS)
				return err_set(SD_INVALID, "too many arguments");
			pos[(*npos)++] = argv[i];
			continue;
		}
		a += 2;
		eq = strchr(a, '=');
		len = eq ? (size_t)(eq - a) : strlen(a);
		if (!(o = (struct arg_opt *)find(opts, a, len)))
			return err_set(SD_INVALID, "unknown option --%.*s", (int)len, a);
		if (o->type == ARG_FLAG) {
			if (eq)
				return err_set(SD_INVALID, "--%s takes no value", o->name);
			*(int *)o->value = 1;
			o->seen = 1;
			continue;
		}
		if (eq) {
			val = eq + 1;
		} else {
			if (i + 1 >= argc)
				return err_set(SD_INVALID, "--%s needs a value", o->name);
			val = argv[++i];
		}
		if (o->type == ARG_STR) {
			*(const char **)o->value = val;
		} else {
			char what[80];
			enum sd_result r;

			snprintf(what, sizeof what, "--%s", o->name);
			if ((r = args_int(val, o->min, o->max, what, (int64_t *)o->value)) != SD_OK)
				return r;
		}
		o->seen = 1;
	}
	return SD_OK;
}
