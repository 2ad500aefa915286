/*
 * help.h: the command tree, and every form of its help.
 *
 * The commands are one tree of struct cli_cmd (cli_tree.c): a command has
 * subcommands, a function that takes the words after its name, or both
 * (`backup DEST` and `backup verify DEST`).  Each function declares its
 * options in the arg_opt table it parses with (args.h), and cli_parse
 * answers --help from that table before it parses anything.  So the help
 * text, the man page and the bash completion are all read off the tables
 * the parser uses, and cannot drift from it:
 *
 *   stagedoor order add --help     help_leaf, from order add's own table
 *   stagedoor help order add       the same words with --help at the end
 *   stagedoor order --help         help_dispatch: order's subcommands
 *   stagedoor help --man 1|5       help_man (help_gen.c), by help_walk
 *                                  (src/cmd/help.c is the command)
 *   stagedoor help --completion bash
 *
 * help_walk calls each function with the single word "--help" while a
 * capture is set: cli_parse then records the table and usage instead of
 * printing them, and the function returns CLI_HELPED before it has done
 * anything else.  A function that did not (it opened a database first) is
 * a bug the walk reports and test_help fails on.
 */
#ifndef SD_HELP_H
#define SD_HELP_H

#include <stdio.h>

struct arg_opt;

struct cli_cmd {
	const char *name;
	int (*fn)(int argc, char **argv);	/* the words after the name; NULL: none */
	const char *summary;			/* one line: what it is for */
	const struct cli_cmd *subs;		/* ended by a NULL name; NULL: none */
	int hidden;				/* run's own children modes: not listed */
};

/* CLI_NODE: a command's node, as src/cmd's files define them */
#define CLI_NODE(name, fn, subs, summary) { (name), (fn), (summary), (subs), 0 }

/* What a function returns once it has answered --help: main exits 0.
 * Above every exit status a command returns (0..5). */
#define CLI_HELPED 0x1000

/* help_program: the program being dispatched, its root's name
 * ("stagedoor", "stagedoor-bench"), which messages begin with. */
const char *help_program(void);

/* help_root: the root of the tree being dispatched (NULL before
 * help_dispatch), for a command that reads the whole tree (help --man). */
const struct cli_cmd *help_root(void);

/* help_dispatch: run the words argv[0..argc) under command c (its own name
 * already taken): a subcommand by its name, "help WORDS" as WORDS --help,
 * else c's function; a command with subcommands alone lists them on --help
 * (CLI_HELPED) and refuses anything else with its usage (2). */
int help_dispatch(const struct cli_cmd *c, int argc, char **argv);

/* help_leaf: --help for the command being dispatched, from the usage line
 * and the table its function parses with: printed on stdout, or recorded
 * while help_walk captures.  Returns CLI_HELPED. */
int help_leaf(const char *usage, const struct arg_opt *opts);

/* help_wanted: the words ask for help (--help or -h anywhere, or "help"
 * first), so that nothing else (the config file) is read first. */
int help_wanted(int argc, char **argv);

/* A function's options as help_walk captured them. */
#define HELP_MAX_OPTS 96
struct help_leaf_desc {
	const char *usage;
	int nopts;
	struct arg_opt *opts;	/* nopts entries; their value pointers are dead */
};

/* help_visit: one command of the walk: path[0..depth) from the root's
 * first child; leaf is NULL for a command with subcommands alone. */
typedef void (*help_visit)(const struct cli_cmd *const *path, int depth,
			   const struct help_leaf_desc *leaf, void *arg);

/* help_walk: every command under root that is not hidden, depth first in
 * the tree's order.  0, or -1 with the path of a function that did not
 * answer --help at once written into err (errsize bytes). */
int help_walk(const struct cli_cmd *root, help_visit visit, void *arg, char *err,
	      size_t errsize);

/* help_man: stagedoor(1) (section 1) or stagedoor.conf(5) (section 5) in
 * roff on out, dated date (YYYY-MM-DD).  0, or -1 with the message in err. */
int help_man(const struct cli_cmd *root, FILE *out, int section, const char *version,
	     const char *date, char *err, size_t errsize);

/* help_completion: the bash completion script for commands, subcommands
 * and flags (files for a flag whose value is a FILE, PATH or DIR). */
int help_completion(const struct cli_cmd *root, FILE *out, char *err, size_t errsize);

#endif
