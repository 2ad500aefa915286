/*
 * test_redact.c: a password in a database URI is never shown.
 *
 * text_redact_url is the one place a secret in a URL is hidden; every
 * message, log line, --json answer and `config show` that can hold a URI
 * goes through it.  On PostgreSQL, every command that takes --db runs with
 * a password in the URI, in both forms (postgresql://user:SECRET@host and
 * ?password=SECRET), and the password is in no output, no error and no log
 * line: the commands that open the database work for real (the test
 * cluster trusts loopback, so the password is sent and ignored), the ones
 * that need more arguments say so, and the ones that run until stopped
 * (run, worker, relay, serve) log their start and are stopped.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "cmd/commands.h"
#include "help.h"
#include "testutil.h"
#include "text.h"

/* ======================== the function ================================== */

static void test_redact_url(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "postgresql://u:s3cret@db.lan:5432/box", "postgresql://u:***@db.lan:5432/box" },
		{ "postgres://u:s3cret@h/db?password=p2&target_session_attrs=read-write",
		  "postgres://u:***@h/db?password=***&target_session_attrs=read-write" },
		{ "postgresql://h/db?PassWord=p2", "postgresql://h/db?PassWord=***" },
		{ "postgresql://h/db?sslpassword=k&options=-csearch_path%3Dx",
		  "postgresql://h/db?sslpassword=***&options=-csearch_path%3Dx" },
		{ "postgresql://u@h/db", "postgresql://u@h/db" },
		{ "postgresql://u:p@w@h/db", "postgresql://u:***@h/db" },	/* the last '@' */
		{ "postgresql://h1,h2/db?target_session_attrs=read-write&password=x",
		  "postgresql://h1,h2/db?target_session_attrs=read-write&password=***" },
		{ "smtp://box:pw@mail.example:587", "smtp://box:***@mail.example:587" },
		{ "https://api.mail.example/v3/send?key=K123", "https://api.mail.example/v3/send?***" },
		{ "/var/lib/stagedoor/stagedoor.db", "/var/lib/stagedoor/stagedoor.db" },
		{ "", "" },
	};
	char buf[256], small[12];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		text_redact_url(cases[i].in, buf, sizeof buf);
		assert_string_equal(buf, cases[i].want);
	}
	text_redact_url(NULL, buf, sizeof buf);
	assert_string_equal(buf, "");
	/* cut short, never overrun, never the secret */
	text_redact_url("postgresql://u:s3cret@h/db", small, sizeof small);
	assert_int_equal(strlen(small), sizeof small - 1);
	assert_null(strstr(small, "s3cret"));
}

/* ======================== every command ================================= */

#define SECRET_USER "Sd7userinfoSecret"
#define SECRET_PARAM "Sd7parameterSecret"
#define LEAVES_MAX 96

struct leaves {
	char words[LEAVES_MAX][4][24];
	int nwords[LEAVES_MAX];
	int n;
};

/* every command that takes --db, from the tree the parser uses */
static void visit(const struct cli_cmd *const *path, int depth, const struct help_leaf_desc *d,
		  void *arg)
{
	struct leaves *l = arg;
	int i;

	if (!d || l->n >= LEAVES_MAX || strcmp(path[0]->name, "bench") == 0)
		return;	/* the benchmarks make boxes of their own */
	for (i = 0; i < d->nopts && strcmp(d->opts[i].name, "db") != 0; i++)
		;
	if (i == d->nopts)
		return;
	for (i = 0; i < depth && i < 4; i++)
		snprintf(l->words[l->n][i], sizeof l->words[0][0], "%s", path[i]->name);
	l->nwords[l->n++] = depth;
}

/* The URI of the test's schema with a password in it, in one form or the
 * other: "postgresql://user:SECRET@host..." or "...&password=SECRET". */
static void secret_uri(const char *uri, int form, char *buf, size_t size)
{
	const char *scheme = strstr(uri, "://"), *at;

	if (form == 1) {
		snprintf(buf, size, "%s%cpassword=" SECRET_PARAM, uri, strchr(uri, '?') ? '&' : '?');
		return;
	}
	assert_non_null(scheme);
	at = strchr(scheme + 3, '@');
	assert_non_null(at);	/* tools/pg.sh's URIs name their user */
	snprintf(buf, size, "%.*s:" SECRET_USER "%s", (int)(at - uri), uri, at);
}

/* run words + --db uri, stdout and stderr to log; a command that is still
 * running after 3 s (run, worker, relay, serve) is stopped with SIGTERM */
static void run_leaf(const struct leaves *l, int i, const char *uri, const char *log)
{
	const char *argv[8];
	int n = 0, k, rc;
	pid_t pid;

	for (k = 0; k < l->nwords[i]; k++)
		argv[n++] = l->words[i][k];
	argv[n++] = "--db";
	argv[n++] = uri;
	argv[n] = NULL;
	pid = tu_spawn(argv, log);
	if ((rc = tu_wait(pid, 3000)) == -2) {
		kill(pid, SIGTERM);
		if (tu_wait(pid, 45000) == -2)
			fail_msg("%s %s did not stop on SIGTERM", l->words[i][0], l->words[i][1]);
	}
}

/* the secret anywhere in the file */
static void assert_no_secret(const char *path, const char *what)
{
	size_t len = 0;
	unsigned char *text = tu_slurp(path, &len);

	assert_non_null(text);
	if (strstr((char *)text, SECRET_USER) || strstr((char *)text, SECRET_PARAM))
		tu_fail_free(text, NULL, "%s shows the URI's password:\n%s", what, (char *)text);
	free(text);
}

static void test_every_command_hides_the_password(void **state)
{
	struct tu_env *e = *state;
	struct leaves *l;
	char err[256] = "", uri[1024], log[600], what[200], cwd[512];
	int pass, form, i, ran = 0;

	TU_PG_ONLY();	/* before the allocation: a skip leaks nothing */
	l = calloc(1, sizeof *l);
	assert_non_null(l);
	assert_non_null(getcwd(cwd, sizeof cwd));
	/* a command that makes files (a maildir, demo's ./var/demo) makes them
	 * here, never in the checkout the suite runs from */
	assert_int_equal(chdir(e->dir), 0);
	if (help_walk(commands_root(), visit, l, err, sizeof err) != 0)
		fail_msg("the command tree: %s", err);
	assert_true(l->n >= 20);
	setenv("STAGEDOOR_STATE_DIR", e->dir, 1);
	setenv("STAGEDOOR_HTTP_LISTEN", "off", 1);
	snprintf(log, sizeof log, "maildir:%s/maildir", e->dir);
	setenv("STAGEDOOR_MAIL_URL", log, 1);
	/* each form with a state folder, then without one, where a command
	 * that needs it must refuse without naming the URI it was given */
	for (pass = 0; pass < 4; pass++) {
		form = pass % 2;
		if (pass == 2)
			unsetenv("STAGEDOOR_STATE_DIR");
		secret_uri(e->db_path, form, uri, sizeof uri);
		for (i = -1; i < l->n; i++) {
			/* init first: the schema the other commands find */
			int k = i < 0 ? 0 : i;

			if (i >= 0 && strcmp(l->words[i][0], "init") == 0)
				continue;
			if (i < 0) {
				for (k = 0; k < l->n && strcmp(l->words[k][0], "init") != 0; k++)
					;
				assert_true(k < l->n);
			}
			snprintf(log, sizeof log, "%s/out-%d-%d.log", e->dir, pass, k);
			run_leaf(l, k, uri, log);
			snprintf(what, sizeof what, "'%s %s --db URI' (%s, %s)", l->words[k][0],
				 l->nwords[k] > 1 ? l->words[k][1] : "",
				 form ? "?password=" : "user:password@",
				 pass < 2 ? "a state folder" : "no state folder");
			assert_no_secret(log, what);
			ran++;
		}
	}
	assert_int_equal(chdir(cwd), 0);
	unsetenv("STAGEDOOR_STATE_DIR");
	unsetenv("STAGEDOOR_HTTP_LISTEN");
	unsetenv("STAGEDOOR_MAIL_URL");
	print_message("    %d commands, each with a password in both forms, with and without a "
		      "state folder\n", ran / 4);
	free(l);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_redact_url),
		cmocka_unit_test_setup_teardown(test_every_command_hides_the_password,
						tu_setup_real, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
