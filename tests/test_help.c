/*
 * test_help.c: every command and subcommand answers --help and `help`, from
 * the table its parser uses; the man pages and the bash completion are made
 * from the same tables; --version names the schema and the libraries.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "config.h"
#include "db.h"
#include "cmd/commands.h"
#include "help.h"
#include "testutil.h"

#define MAX_LEAVES 96
#define OUT_MAX (64 * 1024)

/* What the walk saw of each command that parses options. */
struct leaf {
	char path[64];			/* "order add" */
	char words[4][24];		/* the same, a word each */
	int nwords;
	char flags[HELP_MAX_OPTS][48];	/* the table's option names */
	int nflags;
};

struct seen {
	struct leaf leaves[MAX_LEAVES];
	int n, dispatchers;
	char problems[4096];
};

static void note(struct seen *s, const char *fmt, const char *a, const char *b)
{
	size_t o = strlen(s->problems);

	snprintf(s->problems + o, sizeof s->problems - o, fmt, a, b);
}

static void visit(const struct cli_cmd *const *path, int depth,
		  const struct help_leaf_desc *d, void *arg)
{
	struct seen *s = arg;
	struct leaf *l;
	int i, j;

	if (!path[depth - 1]->summary || !*path[depth - 1]->summary)
		note(s, "%s%s: no summary\n", path[depth - 1]->name, "");
	if (!d) {
		s->dispatchers++;
		return;
	}
	assert_true(s->n < MAX_LEAVES);
	l = &s->leaves[s->n++];
	for (i = 0; i < depth && i < 4; i++) {
		snprintf(l->words[i], sizeof l->words[i], "%s", path[i]->name);
		snprintf(l->path + strlen(l->path), sizeof l->path - strlen(l->path), "%s%s",
			 i ? " " : "", path[i]->name);
	}
	l->nwords = depth;
	if (!d->usage || strncmp(d->usage, path[0]->name, strlen(path[0]->name)) != 0)
		note(s, "%s: the usage line does not start with the command (%s)\n", l->path,
		     d->usage ? d->usage : "none");
	for (i = 0; i < d->nopts; i++) {
		const struct arg_opt *o = &d->opts[i];

		if (!o->help || strlen(o->help) < 4)
			note(s, "%s: --%s has no help\n", l->path, o->name);
		if (strcmp(o->name, "help") == 0)
			note(s, "%s: --%s is the help's own\n", l->path, o->name);
		for (j = 0; j < l->nflags; j++)
			if (strcmp(l->flags[j], o->name) == 0)
				note(s, "%s: --%s twice\n", l->path, o->name);
		snprintf(l->flags[l->nflags++], sizeof l->flags[0], "%s", o->name);
	}
}

static struct seen *walk_all(void)
{
	struct seen *s = calloc(1, sizeof *s);
	char err[256] = "";

	assert_non_null(s);
	if (help_walk(commands_root(), visit, s, err, sizeof err) != 0)
		fail_msg("'stagedoor %s --help' did not answer before doing its work", err);
	return s;
}

/* Every command's function answers --help from its table at once, every
 * option there says what it is, and every command has a summary. */
static void test_every_command_answers_help_from_its_table(void **state)
{
	struct tu_env *e = *state;
	char cwd[512];
	struct seen *s;

	/* a function that did its work anyway would do it here, not in the tree */
	assert_non_null(getcwd(cwd, sizeof cwd));
	assert_int_equal(chdir(e->dir), 0);
	s = walk_all();
	assert_int_equal(chdir(cwd), 0);
	if (s->problems[0])
		tu_fail_free(s, NULL, "%s", s->problems);
	/* order has seven, jobs six, token three, ...: 35 in all today */
	assert_true(s->n >= 35);
	assert_true(s->dispatchers >= 7);	/* config jobs event order token tls mail */
	free(s);
}

/* help_flags: the options a --help text lists (lines "  --name ..."),
 * each as " name " appended to out */
static void help_flags(const char *text, char *out, size_t size)
{
	const char *p = text;

	*out = '\0';
	while ((p = strstr(p, "\n  --"))) {
		size_t n = strspn(p + 5, "abcdefghijklmnopqrstuvwxyz0123456789-");
		size_t o = strlen(out);

		snprintf(out + o, size - o, " %.*s ", (int)n, p + 5);
		p += 5 + n;
	}
}

/* The binary's `X --help` and `help X` print the same text, exit 0, and
 * list exactly the options of the table X parses with. */
static void test_help_text_lists_exactly_the_parsers_options(void **state)
{
	struct seen *s = walk_all();
	char *out1 = malloc(OUT_MAX), *out2 = malloc(OUT_MAX), *err = malloc(OUT_MAX);
	char *listed = malloc(OUT_MAX), want[128];
	int i, j;

	(void)state;
	assert_true(out1 && out2 && err && listed);
	for (i = 0; i < s->n; i++) {
		const struct leaf *l = &s->leaves[i];
		const char *a1[8], *a2[8];
		int n = 0, rc1, rc2;

		a2[0] = "help";
		for (j = 0; j < l->nwords; j++, n++) {
			a1[n] = l->words[j];
			a2[n + 1] = l->words[j];
		}
		a1[n] = "--help";
		a1[n + 1] = NULL;
		a2[n + 1] = NULL;
		rc1 = tu_run(out1, OUT_MAX, err, OUT_MAX, a1);
		if (rc1 != 0 || err[0])
			fail_msg("stagedoor %s --help: exit %d, stderr '%s'", l->path, rc1, err);
		rc2 = tu_run(out2, OUT_MAX, NULL, 0, a2);
		if (rc2 != 0 || strcmp(out1, out2) != 0)
			fail_msg("stagedoor help %s: exit %d, and not the text of --help:\n%s\n---\n%s",
				 l->path, rc2, out2, out1);
		snprintf(want, sizeof want, "usage: stagedoor %s", l->words[0]);
		if (strncmp(out1, want, strlen(want)) != 0)
			fail_msg("stagedoor %s --help starts '%.60s'", l->path, out1);
		help_flags(out1, listed, OUT_MAX);
		for (j = 0; j < l->nflags; j++) {
			snprintf(want, sizeof want, " %s ", l->flags[j]);
			if (!strstr(listed, want))
				fail_msg("stagedoor %s --help does not list --%s", l->path,
					 l->flags[j]);
			/* each once: remove it */
			memset(strstr(listed, want), ' ', strlen(want));
		}
		if (strspn(listed, " ") != strlen(listed))
			fail_msg("stagedoor %s --help lists options its parser does not take: %s",
				 l->path, listed);
	}
	free(out1);
	free(out2);
	free(err);
	free(listed);
	free(s);
}

/* Commands with subcommands list them; a wrong word is refused with exit 2
 * and a pointer to the help; an option a parser does not know still is. */
static void test_dispatchers_list_their_subcommands(void **state)
{
	static char out[64 * 1024], err[8192];
	static const char *const subs[] = { "add", "show", "find", "pdf", "resend", "set-email",
					    "cancel" };
	size_t i;

	(void)state;
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "order", "--help", NULL }), 0);
	for (i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		char line[64];

		snprintf(line, sizeof line, "\n  %s ", subs[i]);
		if (!strstr(out, line))
			fail_msg("order --help does not list %s:\n%s", subs[i], out);
	}
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "help", "order", NULL }), 0);
	assert_non_null(strstr(out, "\n  set-email "));
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
				(const char *const[]){ "order", "frob", NULL }), 2);
	assert_non_null(strstr(err, "unknown command 'stagedoor order frob'"));
	assert_non_null(strstr(err, "stagedoor order --help"));
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
				(const char *const[]){ "order", NULL }), 2);
	assert_non_null(strstr(err, "usage: stagedoor order COMMAND"));
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err,
				(const char *const[]){ "order", "add", "--bogus", "1", NULL }), 2);
	assert_non_null(strstr(err, "unknown option --bogus"));
	assert_int_equal(tu_run(out, sizeof out, NULL, 0, (const char *const[]){ "--help", NULL }),
			 0);
	assert_non_null(strstr(out, "\n  order "));
	/* the benchmarks are a program of their own (stagedoor-bench) */
	assert_null(strstr(out, "\n  bench "));
	/* a broken config file does not hide the help */
	setenv("STAGEDOOR_CONFIG", "/nonexistent/stagedoor.conf", 1);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "run", "--help", NULL }), 0);
	unsetenv("STAGEDOOR_CONFIG");
	assert_non_null(strstr(out, "\n  --mail-url URL "));
}

/* run_to: stagedoor ARGS with stdout into path; its exit status */
static int run_to(const char *path, const char *const *argv)
{
	return tu_exec(argv, path, NULL, 30000);
}

/* The man pages: groff finds nothing to warn about, stagedoor(1) has a
 * section for every command, stagedoor.conf(5) every key. */
static void test_man_pages_are_made_from_the_tables(void **state)
{
	struct tu_env *e = *state;
	char m1[400], m5[400], cmd[1200], sec[128];
	unsigned char *text;
	size_t len;
	struct seen *s = walk_all();
	int i;

	snprintf(m1, sizeof m1, "%s/stagedoor.1", e->dir);
	snprintf(m5, sizeof m5, "%s/stagedoor.conf.5", e->dir);
	assert_int_equal(run_to(m1, (const char *const[]){ tu_bin(), "help", "--man", "1", NULL }),
			 0);
	assert_int_equal(run_to(m5, (const char *const[]){ tu_bin(), "help", "--man", "5", NULL }),
			 0);
	for (i = 0; i < 2; i++) {
		/* -ww: every warning; any output is a failure */
		snprintf(cmd, sizeof cmd, "LC_ALL=C.UTF-8 groff -man -ww -z %s 2>&1 | head -5 | "
			 "grep . && exit 1; exit 0", i ? m5 : m1);
		if (system(cmd) != 0)
			fail_msg("groff warns about %s", i ? m5 : m1);
	}
	text = tu_slurp(m1, &len);
	assert_non_null(strstr((char *)text, ".TH STAGEDOOR 1 "));
	for (i = 0; i < s->n; i++) {
		char *p;

		snprintf(sec, sizeof sec, ".SS \"stagedoor %s\"", s->leaves[i].path);
		/* the man page writes a dash as \- */
		for (p = sec; (p = strchr(p, '-')); p += 2) {
			memmove(p + 1, p, strlen(p) + 1);
			*p = '\\';
		}
		if (!strstr((char *)text, sec))
			tu_fail_free(text, s, "stagedoor.1 has no section %s", sec);
	}
	free(text);
	text = tu_slurp(m5, &len);
	for (i = 0; i < CONFIG_N_KEYS; i++) {
		char key[80];

		snprintf(key, sizeof key, ".BR \"%s = \"", config_key_name((enum config_key)i));
		if (!strstr((char *)text, key))
			tu_fail_free(text, s, "stagedoor.conf.5 has no %s", key);
	}
	free(text);
	free(s);
}

/* complete: what the completion offers for the words (the last is the one
 * being completed), in out */
static void complete(const char *script, const char *words, char *out, size_t size)
{
	char cmd[2048];
	FILE *p;
	size_t n;

	assert_true(snprintf(cmd, sizeof cmd,
			     "bash -c 'source %s; COMP_WORDS=(%s); "
			     "COMP_CWORD=$((${#COMP_WORDS[@]}-1)); "
			     "_stagedoor; echo \"${COMPREPLY[*]}\"'", script, words) < (int)sizeof cmd);
	assert_non_null(p = popen(cmd, "r"));
	n = fread(out, 1, size - 1, p);
	out[n] = '\0';
	assert_int_equal(pclose(p), 0);
}

/* The bash completion offers commands, subcommands and each command's
 * flags, and files where a flag takes a file. */
static void test_bash_completion(void **state)
{
	struct tu_env *e = *state;
	char script[400], out[4096], file[400];

	snprintf(script, sizeof script, "%s/stagedoor.bash", e->dir);
	assert_int_equal(run_to(script, (const char *const[]){ tu_bin(), "help", "--completion",
								 "bash", NULL }), 0);
	complete(script, "stagedoor or", out, sizeof out);
	assert_string_equal(out, "order\n");
	complete(script, "stagedoor order \"\"", out, sizeof out);
	assert_string_equal(out, "add show find pdf resend set-email cancel\n");
	complete(script, "stagedoor order add --ev", out, sizeof out);
	assert_string_equal(out, "--event\n");
	complete(script, "stagedoor run --mail-u", out, sizeof out);
	assert_string_equal(out, "--mail-url --mail-user\n");
	complete(script, "stagedoor backup ver", out, sizeof out);
	assert_string_equal(out, "verify\n");
	/* after a flag that takes a file: the files */
	snprintf(file, sizeof file, "%s/pick-me.conf", e->dir);
	fclose(fopen(file, "w"));
	snprintf(out, sizeof out, "stagedoor run --config %s/pick", e->dir);
	complete(script, out, out, sizeof out);
	assert_non_null(strstr(out, "pick-me.conf"));
	/* after a flag that takes another value: nothing to offer */
	complete(script, "stagedoor order add --seats \"\"", out, sizeof out);
	assert_string_equal(out, "\n");
}

/* --version: the VERSION file's version, the schema, the libraries */
static void test_version_names_schema_and_libraries(void **state)
{
	char out[2048], want[64], v[32] = "";
	FILE *f = fopen("VERSION", "r");

	(void)state;
	assert_non_null(f);
	assert_non_null(fgets(v, sizeof v, f));
	fclose(f);
	v[strcspn(v, "\n")] = '\0';
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "--version", NULL }), 0);
	snprintf(want, sizeof want, "stagedoor %s\n", v);
	assert_true(strncmp(out, want, strlen(want)) == 0);
	snprintf(want, sizeof want, "schema %d (SQLite), %d (PostgreSQL)", db_migration_count,
		 db_migration_count_pg);
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "SQLite 3."));
	assert_non_null(strstr(out, "libpq 1"));
	assert_non_null(strstr(out, "libcurl "));
	assert_non_null(strstr(out, "libharu 2."));
	assert_non_null(strstr(out, "mbedTLS 2."));
	assert_non_null(strstr(out, "libmicrohttpd 0."));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_every_command_answers_help_from_its_table,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test(test_help_text_lists_exactly_the_parsers_options),
		cmocka_unit_test(test_dispatchers_list_their_subcommands),
		cmocka_unit_test_setup_teardown(test_man_pages_are_made_from_the_tables,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_bash_completion, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test(test_version_names_schema_and_libraries),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
