/*
 * help.c: dispatch through the command tree, --help from the parser's own
 * tables, and the walk that the man page and the completion are made by.
 */
#include "help.h"

#include <stdlib.h>
#include <string.h>

#include "args.h"

#define HELP_DEPTH 8
#define HELP_WIDTH 79
#define HELP_COL 30

/* The commands being dispatched, root first: the help's "stagedoor order add". */
static const struct cli_cmd *path[HELP_DEPTH];
static int depth;

/* While help_walk captures: where cli_parse's table goes. */
static struct {
	int on, answered;
	struct help_leaf_desc desc;
	struct arg_opt opts[HELP_MAX_OPTS];
	char usage[512];	/* a function may build its usage on its stack */
} cap;

static void path_set(const struct cli_cmd *c, int at)
{
	if (at < HELP_DEPTH) {
		path[at] = c;
		depth = at + 1;
	}
}

static int path_at(const struct cli_cmd *c)
{
	int i;

	for (i = 0; i < depth; i++)
		if (path[i] == c)
			return i;
	return -1;
}

const char *help_program(void)
{
	return depth > 0 ? path[0]->name : "stagedoor";
}

const struct cli_cmd *help_root(void)
{
	return depth > 0 ? path[0] : NULL;
}

/* put_path: "stagedoor order add" */
static void put_path(FILE *f)
{
	int i;

	for (i = 0; i < depth; i++)
		fprintf(f, "%s%s", i ? " " : "", path[i]->name);
}

/* wrap: text from column col (the cursor is there) to HELP_WIDTH, the
 * lines after the first indented to col. */
static void wrap(FILE *f, const char *text, int col)
{
	int at = col;

	while (*text) {
		size_t w = strcspn(text, " ");

		if (at > col && at + 1 + (int)w > HELP_WIDTH) {
			fprintf(f, "\n%*s", col, "");
			at = col;
		} else if (at > col) {
			fputc(' ', f);
			at++;
		}
		fprintf(f, "%.*s", (int)w, text);
		at += (int)w;
		text += w;
		while (*text == ' ')
			text++;
	}
	fputc('\n', f);
}

static void put_opt(FILE *f, const struct arg_opt *o)
{
	char head[128];
	int n;

	n = snprintf(head, sizeof head, "  --%s%s%s", o->name, o->type == ARG_FLAG ? "" : " ",
		     o->type == ARG_FLAG ? "" : o->metavar ? o->metavar
		     : o->type == ARG_INT ? "N" : "VALUE");
	fputs(head, f);
	if (n + 2 > HELP_COL)
		fprintf(f, "\n%*s", HELP_COL, "");
	else
		fprintf(f, "%*s", HELP_COL - n, "");
	wrap(f, o->help ? o->help : "", HELP_COL);
}

static void put_subs(FILE *f, const struct cli_cmd *subs)
{
	const struct cli_cmd *s;

	fprintf(f, "\ncommands:\n");
	for (s = subs; s->name; s++) {
		int n;

		if (s->hidden)
			continue;
		n = fprintf(f, "  %s", s->name);
		fprintf(f, "%*s", n + 2 > 14 ? 2 : 14 - n, "");
		wrap(f, s->summary, n + 2 > 14 ? n + 2 : 14);
	}
}

int help_leaf(const char *usage, const struct arg_opt *opts)
{
	const struct cli_cmd *c = depth ? path[depth - 1] : NULL;
	const struct arg_opt *o;
	int settings = 0;

	if (cap.on) {
		snprintf(cap.usage, sizeof cap.usage, "%s", usage);
		cap.desc.usage = cap.usage;
		cap.desc.opts = cap.opts;
		for (cap.desc.nopts = 0; opts[cap.desc.nopts].name; cap.desc.nopts++)
			if (cap.desc.nopts < HELP_MAX_OPTS)
				cap.opts[cap.desc.nopts] = opts[cap.desc.nopts];
		if (cap.desc.nopts > HELP_MAX_OPTS)
			cap.desc.nopts = HELP_MAX_OPTS;
		cap.answered = 1;
		return CLI_HELPED;
	}
	printf("usage: %s %s\n", help_program(), usage);
	if (c && c->summary) {
		printf("\n");
		wrap(stdout, c->summary, 0);
	}
	if (c && c->subs)
		put_subs(stdout, c->subs);
	printf("\noptions:\n");
	for (o = opts; o->name; o++) {
		if (o->setting) {
			settings++;
			continue;
		}
		put_opt(stdout, o);
	}
	printf("  -h, --help%*s", HELP_COL - 12, "");
	wrap(stdout, "this help, then exit", HELP_COL);
	if (settings) {
		printf("\nsettings (each also $STAGEDOOR_KEY or KEY = VALUE in the config file; "
		       "flag > environment > file > default; see stagedoor.conf(5)):\n");
		for (o = opts; o->name; o++)
			if (o->setting)
				put_opt(stdout, o);
	}
	fflush(stdout);
	return CLI_HELPED;
}

/* dispatch_help: --help of a command that has subcommands alone */
static int dispatch_help(const struct cli_cmd *c, FILE *f)
{
	const char *prog = help_program();
	int root = path_at(c) == 0, man = root && strcmp(prog, "stagedoor") == 0;

	if (root) {
		fprintf(f, "usage: %s COMMAND [options]\n"
			   "       %s help COMMAND [SUBCOMMAND]   (or COMMAND --help)\n"
			   "       %s --version\n\n", prog, prog, prog);
		wrap(f, c->summary, 0);
	} else {
		fprintf(f, "usage: ");
		put_path(f);
		fprintf(f, " COMMAND [options]\n\n");
		wrap(f, c->summary, 0);
	}
	put_subs(f, c->subs);
	fprintf(f, "\nRun '");
	put_path(f);
	fprintf(f, " COMMAND --help' for a command's options%s.\n",
		man ? "; man stagedoor for all of them" : "");
	return CLI_HELPED;
}

/* help_words: "help A B" run as "A B --help" under c */
static int help_words(const struct cli_cmd *c, int argc, char **argv)
{
	char *words[HELP_DEPTH + 2];
	int i, n = 0;

	for (i = 1; i < argc && n < HELP_DEPTH; i++)
		words[n++] = argv[i];
	words[n++] = (char *)"--help";
	words[n] = NULL;
	return help_dispatch(c, n, words);
}

int help_dispatch(const struct cli_cmd *c, int argc, char **argv)
{
	const struct cli_cmd *s;
	int at = path_at(c);

	path_set(c, at >= 0 ? at : depth);
	if (argc >= 1 && c->subs) {
		/* "help WORDS", but "help --man 1" is the help command's own */
		if (strcmp(argv[0], "help") == 0 && !(argc >= 2 && argv[1][0] == '-'))
			return help_words(c, argc, argv);
		for (s = c->subs; s->name; s++)
			if (strcmp(argv[0], s->name) == 0) {
				path_set(s, path_at(c) + 1);
				return help_dispatch(s, argc - 1, argv + 1);
			}
	}
	if (c->fn)
		return c->fn(argc, argv);
	if (argc >= 1 && (strcmp(argv[0], "--help") == 0 || strcmp(argv[0], "-h") == 0))
		return dispatch_help(c, stdout);
	if (argc >= 1) {
		/* an option before the command, or a word that is none */
		if (argv[0][0] == '-') {
			fprintf(stderr, "%s: a command comes first; usage: ", help_program());
		} else {
			fprintf(stderr, "%s: unknown command '", help_program());
			put_path(stderr);
			fprintf(stderr, " %s'; usage: ", argv[0]);
		}
		put_path(stderr);
		fprintf(stderr, " COMMAND [options] (try '");
		put_path(stderr);
		fprintf(stderr, " --help')\n");
		return 2;
	}
	dispatch_help(c, stderr);
	return 2;
}

int help_wanted(int argc, char **argv)
{
	int i;

	if (argc >= 1 && strcmp(argv[0], "help") == 0)
		return 1;
	for (i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0)
			return 0;
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return 1;
	}
	return 0;
}

/* walk: c at depth d of the walk, then its subcommands */
static int walk(const struct cli_cmd *c, int d, help_visit visit, void *arg, char *err,
		size_t errsize)
{
	const struct cli_cmd *s;
	const struct help_leaf_desc *leaf = NULL;

	path_set(c, d);
	if (c->fn) {
		char *words[] = { (char *)"--help", NULL };
		int rc;

		memset(&cap.desc, 0, sizeof cap.desc);
		cap.on = 1;
		cap.answered = 0;
		rc = c->fn(1, words);
		cap.on = 0;
		if (rc != CLI_HELPED || !cap.answered) {
			int i, o = 0;

			for (i = 1; i <= d && o < (int)errsize; i++)
				o += snprintf(err + o, errsize - (size_t)o, "%s%s", i > 1 ? " " : "",
					      path[i]->name);
			return -1;
		}
		leaf = &cap.desc;
	}
	visit(path + 1, d, leaf, arg);
	for (s = c->subs; s && s->name; s++)
		if (!s->hidden && walk(s, d + 1, visit, arg, err, errsize) != 0)
			return -1;
	return 0;
}

int help_walk(const struct cli_cmd *root, help_visit visit, void *arg, char *err,
	      size_t errsize)
{
	const struct cli_cmd *s;

	path_set(root, 0);
	for (s = root->subs; s && s->name; s++)
		if (!s->hidden && walk(s, 1, visit, arg, err, errsize) != 0)
			return -1;
	depth = 0;
	return 0;
}
