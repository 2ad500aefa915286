/*
 * test_config.c: the mail settings (config.h) and `stagedoor mail test`.
 *
 * The rules under test: a flag beats the environment, which beats the
 * config file, which beats the default; the file is read strictly and its
 * errors name the file, the line and the key but never a value; `mail test`
 * sends one message through whatever transport the settings name and says
 * what happened (exit 0, or 1 with one line on stderr); and the worker gives
 * send_tickets a lease longer than a send can take.
 *
 * The library tests call config_* directly; the command tests run the real
 * binary ($STAGEDOOR_BIN) in a fresh temp directory.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "args.h"
#include "cli.h"
#include "config.h"
#include "mail.h"
#include "queue.h"
#include "result.h"
#include "testutil.h"

#define OUT_MAX (64 * 1024)

static char out[OUT_MAX], err[OUT_MAX];

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

/* Every STAGEDOOR_MAIL_* variable a test may set, cleared around each test
 * so that neither the caller's environment nor another test leaks in. */
static void clear_env(void)
{
	int k;

	for (k = 0; k < CONFIG_N_KEYS; k++)
		unsetenv(config_key_env((enum config_key)k));
	unsetenv("STAGEDOOR_CONFIG");
}

static int setup(void **state)
{
	clear_env();
	return tu_setup_real(state);
}

static int teardown(void **state)
{
	clear_env();
	queue_policy_reset();
	return tu_teardown(state);
}

/* write_file: dir/name with text; [out] path. */
static void write_file(const struct tu_env *e, const char *name, const char *text, char *path,
		       size_t size)
{
	FILE *f;

	snprintf(path, size, "%s/%s", e->dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int n_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

/* The failure contract: exit want, one line "stagedoor: ...", no stdout. */
static void assert_one_line_error(int rc, int want, const char *what)
{
	if (rc != want || strncmp(err, "stagedoor: ", 11) != 0 || n_lines(err) != 1 || out[0])
		fail_msg("%s: want exit %d and one line 'stagedoor: ...' on stderr, nothing on "
			 "stdout; got rc=%d stdout='%s' stderr='%s'", what, want, rc, out, err);
}

/* The files in dir (dot files aside); [out] the last one's name. */
static int count_files(const char *dir, char *last, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		n++;
		if (last)
			snprintf(last, size, "%s", de->d_name);
	}
	closedir(d);
	return n;
}

/* ---- precedence ---------------------------------------------------------- */

static void test_precedence_flag_env_file_default(void **state)
{
	const struct tu_env *e = *state;
	const char *flags[CONFIG_N_KEYS] = { 0 };
	struct mail_config mc;
	struct config c;
	char path[512];

	write_file(e, "box.conf",
		   "# the venue's relay\n"
		   "\n"
		   "mail_url = smtp://file.example:587\n"
		   "  mail_from=file@venue.example   \n"
		   "mail_user = box\n"
		   "mail_timeout_ms = 5000\n",
		   path, sizeof path);

	/* the file alone; what it does not set keeps the default */
	assert_int_equal(config_resolve(&c, path, flags), SD_OK);
	assert_string_equal(config_mail_url(&c), "smtp://file.example:587");
	assert_string_equal(config_mail_from(&c), "file@venue.example");
	assert_null(c.value[CONFIG_MAIL_CA_FILE]);
	config_mail(&c, &mc);
	assert_string_equal(mc.user, "box");
	assert_null(mc.password_file);
	assert_int_equal(mc.timeout_ms, 5000);
	config_free(&c);

	/* the environment over the file */
	setenv("STAGEDOOR_MAIL_URL", "smtps://env.example:465", 1);
	setenv("STAGEDOOR_MAIL_TIMEOUT_MS", "7000", 1);
	setenv("STAGEDOOR_MAIL_USER", "", 1);	/* empty: unset */
	assert_int_equal(config_resolve(&c, path, flags), SD_OK);
	assert_string_equal(config_mail_url(&c), "smtps://env.example:465");
	assert_string_equal(c.origin[CONFIG_MAIL_URL], "STAGEDOOR_MAIL_URL");
	assert_string_equal(config_mail_from(&c), "file@venue.example");
	assert_string_equal(c.value[CONFIG_MAIL_USER], "box");
	assert_int_equal(c.mail_timeout_ms, 7000);
	config_free(&c);

	/* a flag over both */
	flags[CONFIG_MAIL_URL] = "maildir:/tmp/flag";
	flags[CONFIG_MAIL_TIMEOUT_MS] = " 9000 ";
	assert_int_equal(config_resolve(&c, path, flags), SD_OK);
	assert_string_equal(config_mail_url(&c), "maildir:/tmp/flag");
	assert_string_equal(c.origin[CONFIG_MAIL_URL], "--mail-url");
	assert_int_equal(c.mail_timeout_ms, 9000);
	assert_string_equal(config_mail_from(&c), "file@venue.example");
	config_free(&c);

	/* nothing anywhere: every key unset, the modules' defaults apply */
	clear_env();
	memset(flags, 0, sizeof flags);
	assert_int_equal(config_resolve(&c, NULL, flags), SD_OK);
	assert_null(config_mail_url(&c));
	assert_null(config_mail_from(&c));
	assert_int_equal(c.mail_timeout_ms, 0);
	config_free(&c);
}

/* The same rule through the binary: each level names another maildir and
 * the message lands in the one that should win. */
static void test_precedence_through_mail_test(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], text[1200], dir[700];
	int rc;

	snprintf(text, sizeof text, "mail_url = maildir:%s/file-md\n", e->dir);
	write_file(e, "box.conf", text, conf, sizeof conf);

	rc = RUN("mail", "test", "--to", "a@b.example", "--config", conf, "--db", e->db_path);
	assert_int_equal(rc, 0);
	snprintf(dir, sizeof dir, "%s/file-md/new", e->dir);
	assert_int_equal(count_files(dir, NULL, 0), 1);

	snprintf(text, sizeof text, "maildir:%s/env-md", e->dir);
	setenv("STAGEDOOR_MAIL_URL", text, 1);
	rc = RUN("mail", "test", "--to", "a@b.example", "--config", conf, "--db", e->db_path);
	assert_int_equal(rc, 0);
	snprintf(dir, sizeof dir, "%s/env-md/new", e->dir);
	assert_int_equal(count_files(dir, NULL, 0), 1);

	snprintf(text, sizeof text, "maildir:%s/flag-md", e->dir);
	rc = RUN("mail", "test", "--to", "a@b.example", "--config", conf, "--mail-url", text,
		 "--db", e->db_path);
	assert_int_equal(rc, 0);
	snprintf(dir, sizeof dir, "%s/flag-md/new", e->dir);
	assert_int_equal(count_files(dir, NULL, 0), 1);
	/* and the losers got nothing more */
	snprintf(dir, sizeof dir, "%s/file-md/new", e->dir);
	assert_int_equal(count_files(dir, NULL, 0), 1);
	snprintf(dir, sizeof dir, "%s/env-md/new", e->dir);
	assert_int_equal(count_files(dir, NULL, 0), 1);
}

/* ---- strict parsing ------------------------------------------------------ */

/* load: config_load_file on text written to name; the result and message. */
static enum sd_result load(const struct tu_env *e, const char *name, const char *text,
			   char *path, size_t size)
{
	struct config c;
	enum sd_result r;

	write_file(e, name, text, path, size);
	config_init(&c);
	r = config_load_file(&c, path);
	config_free(&c);
	return r;
}

static void assert_msg_has(const char *what)
{
	if (!strstr(err_msg(), what))
		fail_msg("message '%s' lacks '%s'", err_msg(), what);
}

static void test_file_errors_name_file_line_and_key(void **state)
{
	const struct tu_env *e = *state;
	char path[512], want[600];

	/* an unknown key, on line 3 */
	assert_int_equal(load(e, "a.conf", "# ok\nmail_url = maildir:/x\nmail_uri = smtp://h\n",
			      path, sizeof path), SD_INVALID);
	snprintf(want, sizeof want, "%s:3:", path);
	assert_msg_has(want);
	assert_msg_has("unknown key 'mail_uri'");

	/* a malformed value, on line 2: named by key, not echoed */
	assert_int_equal(load(e, "b.conf", "\nmail_timeout_ms = 12s34\n", path, sizeof path),
			 SD_INVALID);
	snprintf(want, sizeof want, "%s:2:", path);
	assert_msg_has(want);
	assert_msg_has("mail_timeout_ms");
	assert_null(strstr(err_msg(), "12s34"));
	assert_int_equal(load(e, "b2.conf", "mail_timeout_ms = 99999999999\n", path, sizeof path),
			 SD_INVALID);
	assert_msg_has("mail_timeout_ms");
	assert_int_equal(load(e, "b3.conf", "mail_from = not an address\n", path, sizeof path),
			 SD_INVALID);
	assert_msg_has(":1: mail_from");

	/* a value that is not clean UTF-8 text: named by line and key, not echoed */
	assert_int_equal(load(e, "u1.conf", "\nmail_user = ab\xed\xa0\x80" "cd\n", path, sizeof path),
			 SD_INVALID);
	assert_msg_has(":2: mail_user: the value is not valid UTF-8 (byte 2)");
	assert_int_equal(load(e, "u2.conf", "mail_user = ab\xe2\x80\xae" "cd\n", path, sizeof path),
			 SD_INVALID);
	assert_msg_has(":1: mail_user: the value holds a bidirectional override (U+202E)");
	assert_null(strstr(err_msg(), "\xe2\x80\xae"));
	assert_int_equal(load(e, "u3.conf", "mail_user = ab\x01" "cd\n", path, sizeof path),
			 SD_INVALID);
	assert_msg_has(":1: mail_user: the value holds a control character");

	/* a line that is not key = value, and an empty value */
	assert_int_equal(load(e, "c.conf", "mail_url smtp://h\n", path, sizeof path), SD_INVALID);
	assert_msg_has(":1: not a 'key = value' line");
	assert_null(strstr(err_msg(), "smtp://h"));
	assert_int_equal(load(e, "d.conf", "mail_user =   \n", path, sizeof path), SD_INVALID);
	assert_msg_has(":1: mail_user needs a value");

	/* a key twice */
	assert_int_equal(load(e, "e.conf", "mail_user = a\n#\nmail_user = b\n", path, sizeof path),
			 SD_INVALID);
	assert_msg_has(":3: mail_user is set twice (first on line 1)");

	/* a password is never a config value, and never echoed */
	assert_int_equal(load(e, "f.conf", "mail_password = hunter2\n", path, sizeof path),
			 SD_INVALID);
	assert_msg_has(":1: mail_password:");
	assert_msg_has("mail_password_file");
	assert_null(strstr(err_msg(), "hunter2"));

	/* an unreadable file */
	snprintf(path, sizeof path, "%s/missing.conf", e->dir);
	{
		struct config c;

		config_init(&c);
		assert_int_equal(config_load_file(&c, path), SD_IO);
		config_free(&c);
	}
	assert_msg_has(path);

	/* comments, blanks, CRLF and surrounding blanks are fine */
	assert_int_equal(load(e, "ok.conf", "  # note\r\n\r\n\tmail_ca_file\t=\t/etc/ca.pem \r\n",
			      path, sizeof path), SD_OK);
}

/* The binary: a bad file is one line naming file:line and key, exit 2, and
 * nothing sent; an unreadable one is exit 1. */
static void test_bad_config_file_through_the_binary(void **state)
{
	const struct tu_env *e = *state;
	char conf[512], want[600];
	int rc;

	write_file(e, "bad.conf", "mail_url = maildir:/nowhere\nmail_timeout_ms = soon\n", conf,
		   sizeof conf);
	rc = RUN("mail", "test", "--to", "a@b.example", "--config", conf, "--db", e->db_path);
	assert_one_line_error(rc, 2, "mail test with a bad value");
	snprintf(want, sizeof want, "%s:2: mail_timeout_ms", conf);
	assert_non_null(strstr(err, want));

	rc = RUN("worker", "--drain", "--config", conf, "--db", e->db_path);
	assert_one_line_error(rc, 2, "worker with a bad value");
	assert_non_null(strstr(err, want));

	write_file(e, "bad2.conf", "mail_transport = smtp\n", conf, sizeof conf);
	rc = RUN("worker", "--drain", "--config", conf, "--db", e->db_path);
	assert_one_line_error(rc, 2, "worker with an unknown key");
	snprintf(want, sizeof want, "%s:1: unknown key 'mail_transport'", conf);
	assert_non_null(strstr(err, want));

	snprintf(conf, sizeof conf, "%s/none.conf", e->dir);
	rc = RUN("worker", "--drain", "--config", conf, "--db", e->db_path);
	assert_one_line_error(rc, 1, "worker with a missing config file");
	assert_non_null(strstr(err, conf));

	/* and a malformed flag or variable is named the same way */
	rc = RUN("mail", "test", "--to", "a@b.example", "--mail-timeout-ms", "x", "--db",
		 e->db_path);
	assert_one_line_error(rc, 2, "a bad --mail-timeout-ms");
	assert_non_null(strstr(err, "--mail-timeout-ms: mail_timeout_ms"));
	setenv("STAGEDOOR_MAIL_FROM", "nobody", 1);
	rc = RUN("mail", "test", "--to", "a@b.example", "--db", e->db_path);
	assert_one_line_error(rc, 2, "a bad STAGEDOOR_MAIL_FROM");
	assert_non_null(strstr(err, "STAGEDOOR_MAIL_FROM: mail_from"));
}

/* ---- mail test ----------------------------------------------------------- */

static void test_mail_test_through_maildir(void **state)
{
	const struct tu_env *e = *state;
	char url[600], dir[700], name[256], path[1000], id[MAIL_ID_MAX + 1], want[MAIL_ID_MAX + 20];
	const char *p;
	unsigned char *msg;
	size_t len;
	int rc;

	snprintf(url, sizeof url, "maildir:%s/md", e->dir);
	rc = RUN("mail", "test", "--to", "door@venue.example", "--mail-url", url, "--mail-from",
		 "box@venue.example", "--db", e->db_path);
	if (rc != 0)
		fail_msg("mail test: rc=%d stderr=%s", rc, err);
	assert_non_null(strstr(out, url));

	/* the id it printed */
	p = strstr(out, "message id");
	assert_non_null(p);
	p += strlen("message id");
	while (*p == ' ')
		p++;
	snprintf(id, sizeof id, "%.*s", (int)strcspn(p, "\n"), p);
	assert_int_equal(strncmp(id, "mail-test-", 10), 0);

	/* exactly one message, carrying that id */
	snprintf(dir, sizeof dir, "%s/md/new", e->dir);
	assert_int_equal(count_files(dir, name, sizeof name), 1);
	snprintf(path, sizeof path, "%s/%s", dir, name);
	msg = tu_slurp(path, &len);
	assert_non_null(msg);
	snprintf(want, sizeof want, "Message-ID: <%s>", id);
	assert_non_null(strstr((char *)msg, want));
	assert_non_null(strstr((char *)msg, "To: door@venue.example"));
	assert_non_null(strstr((char *)msg, "box@venue.example"));
	free(msg);

	/* a second test is a second message: every test has its own key */
	assert_int_equal(RUN("mail", "test", "--to", "door@venue.example", "--mail-url", url,
			     "--db", e->db_path), 0);
	assert_int_equal(count_files(dir, NULL, 0), 2);
}

static void test_mail_test_smtp_no_server_fails(void **state)
{
	const struct tu_env *e = *state;
	struct sockaddr_in a = { 0 };
	socklen_t alen = sizeof a;
	char url[64], port[16];
	int s, rc;

	/* a loopback port that was free a moment ago: nobody listens there */
	s = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s >= 0);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &alen), 0);
	close(s);
	snprintf(port, sizeof port, "%d", ntohs(a.sin_port));
	snprintf(url, sizeof url, "smtp://127.0.0.1:%s", port);

	rc = RUN("mail", "test", "--to", "door@venue.example", "--mail-url", url,
		 "--mail-timeout-ms", "3000", "--db", e->db_path);
	assert_one_line_error(rc, 1, "mail test with no server");
	assert_non_null(strstr(err, "mail test via smtp://127.0.0.1:"));
	assert_non_null(strstr(err, port));
	assert_non_null(strstr(err, "failed"));

	/* a URL with a password is refused without echoing it, also exit 1 */
	rc = RUN("mail", "test", "--to", "door@venue.example", "--mail-url",
		 "smtp://u:s3cret@127.0.0.1:25", "--db", e->db_path);
	assert_true(rc != 0);
	assert_null(strstr(err, "s3cret"));
}

static void test_mail_test_usage(void **state)
{
	const struct tu_env *e = *state;

	assert_int_equal(RUN("mail", "test", "--db", e->db_path), 2);
	assert_int_equal(RUN("mail", "send", "--to", "a@b.example", "--db", e->db_path), 2);
	assert_one_line_error(RUN("mail", "test", "--to", "a\r\nRCPT TO:<x@y>", "--db",
				  e->db_path), 2, "an address with CRLF");
}

/* ---- the send_tickets lease ------------------------------------------- */

static void test_send_lease_longer_than_timeout(void **state)
{
	const struct tu_env *e = *state;
	const char *flags[CONFIG_N_KEYS] = { 0 };
	struct config c;
	int64_t lease = 0;
	char conf[512];

	(void)e;
	/* the defaults: 60 s for the whole send (libcurl's total timeout
	 * includes the connect) + the margin */
	config_init(&c);
	assert_int_equal(config_apply_leases(&c, 0, &lease), SD_OK);
	assert_true(lease >= MAIL_TIMEOUT_MS + CONFIG_LEASE_MARGIN_MS);
	assert_int_equal(queue_policy("send_tickets")->lease_ms, lease);
	assert_int_equal(queue_policy("render_tickets")->lease_ms, QUEUE_LEASE_MS_DEFAULT);
	config_free(&c);
	queue_policy_reset();

	/* a long configured timeout lengthens the lease with it */
	flags[CONFIG_MAIL_TIMEOUT_MS] = "300000";
	assert_int_equal(config_resolve(&c, NULL, flags), SD_OK);
	assert_int_equal(config_apply_leases(&c, 0, &lease), SD_OK);
	assert_true(lease >= 300000 + CONFIG_LEASE_MARGIN_MS);
	assert_int_equal(queue_policy("send_tickets")->lease_ms, lease);
	config_free(&c);
	queue_policy_reset();

	/* a short --lease-ms shortens every other kind, never send_tickets */
	config_init(&c);
	assert_int_equal(config_apply_leases(&c, 500, &lease), SD_OK);
	assert_int_equal(queue_policy("render_tickets")->lease_ms, 500);
	assert_true(queue_policy("send_tickets")->lease_ms >= MAIL_TIMEOUT_MS +
							      CONFIG_LEASE_MARGIN_MS);
	config_free(&c);
	queue_policy_reset();

	/* a long --lease-ms is kept for send_tickets too */
	config_init(&c);
	assert_int_equal(config_apply_leases(&c, 600000, &lease), SD_OK);
	assert_int_equal(lease, 600000);
	config_free(&c);

	/* the worker does the same at start, and says so */
	write_file(e, "w.conf", "mail_timeout_ms = 200000\n", conf, sizeof conf);
	setenv("STAGEDOOR_LOG_LEVEL", "info", 1);
	assert_int_equal(RUN("worker", "--drain", "--lease-ms", "1000", "--config", conf, "--db",
			     e->db_path), 0);
	unsetenv("STAGEDOOR_LOG_LEVEL");
	if (!strstr(err, "send_tickets_lease_ms=205000"))
		fail_msg("worker log lacks the send_tickets lease: %s", err);
}

/* ---- every key ------------------------------------------------------------ */

/* The flags every long command takes are the keys, one each, in order. */
static void test_every_key_has_its_flag(void **state)
{
	struct cli_config_flags cf;
	struct arg_opt opts[] = { CLI_CONFIG_OPTS(&cf), { NULL, 0, NULL, 0, 0, 0 } };
	int k;

	(void)state;
	assert_string_equal(opts[0].name, "config");
	for (k = 0; k < CONFIG_N_KEYS; k++) {
		char env[80];
		size_t i;

		assert_string_equal(opts[k + 1].name, config_key_flag((enum config_key)k));
		assert_ptr_equal(opts[k + 1].value, &cf.value[k]);
		snprintf(env, sizeof env, "STAGEDOOR_%s", config_key_name((enum config_key)k));
		for (i = 10; env[i]; i++)
			env[i] = (char)(env[i] >= 'a' && env[i] <= 'z' ? env[i] - 32 : env[i]);
		assert_string_equal(config_key_env((enum config_key)k), env);
	}
	assert_null(opts[CONFIG_N_KEYS + 1].name);
}

static void test_numeric_keys_precedence_and_defaults(void **state)
{
	const struct tu_env *e = *state;
	const char *flags[CONFIG_N_KEYS] = { 0 };
	char path[512];
	struct config c;

	write_file(e, "n.conf", "workers = 3\nconcurrency = 6\nlease_ms = 5000\n"
		   "durability = full\nlog_level = warn\n", path, sizeof path);
	setenv("STAGEDOOR_CONCURRENCY", "7", 1);
	flags[CONFIG_WORKERS] = "9";
	assert_int_equal(config_resolve(&c, path, flags), SD_OK);
	assert_int_equal(config_int(&c, CONFIG_WORKERS), 9);
	assert_string_equal(config_origin(&c, CONFIG_WORKERS), "--workers");
	assert_int_equal(config_int(&c, CONFIG_CONCURRENCY), 7);
	assert_string_equal(config_origin(&c, CONFIG_CONCURRENCY), "STAGEDOOR_CONCURRENCY");
	assert_int_equal(config_int(&c, CONFIG_LEASE_MS), 5000);
	assert_non_null(strstr(config_origin(&c, CONFIG_LEASE_MS), "n.conf:3"));
	assert_string_equal(config_str(&c, CONFIG_DURABILITY), "full");
	/* unset: the default, said to be one */
	assert_int_equal(config_int(&c, CONFIG_GRACE_MS), 30000);
	assert_string_equal(config_origin(&c, CONFIG_GRACE_MS), "default");
	assert_string_equal(config_str(&c, CONFIG_DB), "./var/stagedoor.db");
	assert_true(config_int(&c, CONFIG_RETENTION_MS) == 7LL * 24 * 3600 * 1000);
	config_free(&c);

	/* workers defaults to the cores */
	assert_int_equal(config_resolve(&c, NULL, NULL), SD_OK);
	assert_int_equal(config_int(&c, CONFIG_WORKERS), sysconf(_SC_NPROCESSORS_ONLN));
	config_free(&c);

	/* STAGEDOOR_CONFIG names the file when --config does not */
	setenv("STAGEDOOR_CONFIG", path, 1);
	assert_int_equal(config_resolve(&c, NULL, NULL), SD_OK);
	assert_int_equal(config_int(&c, CONFIG_WORKERS), 3);
	assert_string_equal(c.file, path);
	config_free(&c);
}

/* load_err: config_load_file on text; the message (SD_INVALID wanted). */
static const char *load_err(const struct tu_env *e, const char *text)
{
	char path[512];
	struct config c;

	write_file(e, "bad.conf", text, path, sizeof path);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path), SD_INVALID);
	config_free(&c);
	return err_msg();
}

/* past_origin: the message after its "file:line: " origin, whose path (a
 * temporary folder with random letters) may hold any value by chance. */
static const char *past_origin(const char *m)
{
	const char *p = strstr(m, ": ");

	assert_non_null(p);
	return p + 2;
}

static void test_typed_values_are_checked(void **state)
{
	const struct tu_env *e = *state;
	const char *m;

	m = load_err(e, "# box\nworkers = lots\n");
	assert_non_null(strstr(m, "bad.conf:2"));
	assert_non_null(strstr(m, "workers"));
	assert_null(strstr(past_origin(m), "lots"));
	assert_non_null(strstr(load_err(e, "workers = 0\n"), "from 1 to 256"));
	assert_non_null(strstr(load_err(e, "lease_ms = -5\n"), "lease_ms"));
	assert_non_null(strstr(load_err(e, "durability = sometimes\n"), "normal or full"));
	assert_non_null(strstr(load_err(e, "log_level = chatty\n"), "debug, info"));
	m = load_err(e, "\n\nsend_tickets_max_attempts = 1e3\n");
	assert_non_null(strstr(m, ":3"));
	assert_non_null(strstr(m, "send_tickets_max_attempts"));
	m = load_err(e, "wokers = 4\n");
	assert_non_null(strstr(m, "unknown key 'wokers'"));
}

/* The periodic backup keys: none by default (no backup_dir), an hour and 24
 * kept once set, and bad values refused naming the key and its range. */
static void test_backup_keys(void **state)
{
	const struct tu_env *e = *state;
	const char *flags[CONFIG_N_KEYS] = { 0 };
	char path[512];
	struct config c;
	const char *m;

	assert_int_equal(config_resolve(&c, NULL, NULL), SD_OK);
	assert_null(config_str(&c, CONFIG_BACKUP_DIR));
	assert_int_equal(config_int(&c, CONFIG_BACKUP_INTERVAL_MS), 3600000);
	assert_int_equal(config_int(&c, CONFIG_BACKUP_KEEP), 24);
	config_free(&c);

	write_file(e, "b.conf", "backup_dir = /var/backups/box\nbackup_interval_ms = 900000\n"
		   "backup_keep = 48\n", path, sizeof path);
	setenv("STAGEDOOR_BACKUP_KEEP", "12", 1);
	flags[CONFIG_BACKUP_INTERVAL_MS] = "1000";
	assert_int_equal(config_resolve(&c, path, flags), SD_OK);
	assert_string_equal(config_str(&c, CONFIG_BACKUP_DIR), "/var/backups/box");
	assert_non_null(strstr(config_origin(&c, CONFIG_BACKUP_DIR), "b.conf:1"));
	assert_int_equal(config_int(&c, CONFIG_BACKUP_INTERVAL_MS), 1000);
	assert_string_equal(config_origin(&c, CONFIG_BACKUP_INTERVAL_MS), "--backup-interval-ms");
	assert_int_equal(config_int(&c, CONFIG_BACKUP_KEEP), 12);
	assert_string_equal(config_origin(&c, CONFIG_BACKUP_KEEP), "STAGEDOOR_BACKUP_KEEP");
	config_free(&c);

	m = load_err(e, "backup_interval_ms = 999\n");
	assert_non_null(strstr(m, "bad.conf:1"));
	assert_non_null(strstr(m, "backup_interval_ms must be a whole number from 1000 to"));
	assert_non_null(strstr(load_err(e, "backup_interval_ms = 1h\n"), "backup_interval_ms"));
	assert_non_null(strstr(load_err(e, "backup_keep = 0\n"),
			       "backup_keep must be a whole number from 1 to 10000"));
	m = load_err(e, "backup_keep = -3\n");
	assert_non_null(strstr(m, "backup_keep"));
	assert_null(strstr(past_origin(m), "-3"));
	assert_non_null(strstr(load_err(e, "backup_dir =\n"), "backup_dir needs a value"));
	/* the binary refuses them too, with one line and exit 2 */
	assert_int_equal(RUN("config", "show", "--backup-keep", "0"), 2);
	assert_non_null(strstr(err, "backup_keep must be a whole number from 1 to 10000"));
}

static void test_kind_policies_from_keys(void **state)
{
	const char *flags[CONFIG_N_KEYS] = { 0 };
	struct config c;

	(void)state;
	flags[CONFIG_LEASE_MS] = "4000";
	flags[CONFIG_MAX_ATTEMPTS] = "3";
	flags[CONFIG_RENDER_LEASE_MS] = "9000";
	flags[CONFIG_COUNT_MAX_ATTEMPTS] = "20";
	flags[CONFIG_SEND_BACKOFF_BASE_MS] = "250";
	flags[CONFIG_MAIL_TIMEOUT_MS] = "1000";
	assert_int_equal(config_resolve(&c, NULL, flags), SD_OK);
	assert_int_equal(config_apply_leases(&c, 0, NULL), SD_OK);
	assert_int_equal(queue_policy("render_tickets")->lease_ms, 9000);
	assert_int_equal(queue_policy("render_tickets")->max_attempts, 3);
	assert_int_equal(queue_policy("update_sales_counter")->lease_ms, 4000);
	assert_int_equal(queue_policy("update_sales_counter")->max_attempts, 20);
	assert_int_equal(queue_policy("send_tickets")->backoff_base_ms, 250);
	/* a 1 s mail timeout needs no more than the common 4 s lease... */
	assert_int_equal(queue_policy("send_tickets")->lease_ms, 1000 + CONFIG_LEASE_MARGIN_MS);
	/* ...and any other kind takes the common keys */
	assert_int_equal(queue_policy("noop")->lease_ms, 4000);
	assert_int_equal(queue_policy("noop")->max_attempts, 3);
	config_free(&c);
	queue_policy_reset();

	/* a cap below its base is refused, naming where both came from */
	flags[CONFIG_BACKOFF_BASE_MS] = "5000";
	flags[CONFIG_BACKOFF_CAP_MS] = "100";
	assert_int_equal(config_resolve(&c, NULL, flags), SD_OK);
	assert_int_equal(config_apply_leases(&c, 0, NULL), SD_INVALID);
	assert_non_null(strstr(err_msg(), "--backoff-cap-ms"));
	config_free(&c);
}

static void test_config_show(void **state)
{
	const struct tu_env *e = *state;
	char path[512];

	write_file(e, "s.conf", "workers = 2\nmail_password_file = /etc/stagedoor/mail.pass\n",
		   path, sizeof path);
	setenv("STAGEDOOR_MAIL_URL", "https://box:hunter2@api.mail.example/v1/messages?key=s3cret",
	       1);
	assert_int_equal(RUN("config", "show", "--config", path, "--grace-ms", "5000"), 0);
	unsetenv("STAGEDOOR_MAIL_URL");
	if (!strstr(out, "workers") || !strstr(out, "s.conf:1") || !strstr(out, "--grace-ms") ||
	    !strstr(out, "STAGEDOOR_MAIL_URL") || !strstr(out, "https://box:***@api.mail.example/v1/messages?***") ||
	    !strstr(out, "/etc/stagedoor/mail.pass") || !strstr(out, "# default"))
		fail_msg("config show: %s", out);
	assert_null(strstr(out, "hunter2"));
	assert_null(strstr(out, "s3cret"));
	/* every key, one line each, after the file line */
	assert_int_equal(n_lines(out), CONFIG_N_KEYS + 1);

	/* a bad file stops it with file, line and key */
	write_file(e, "b.conf", "workers = 2\nlease_ms = soon\n", path, sizeof path);
	assert_one_line_error(RUN("config", "show", "--config", path), 2, "bad config");
	assert_non_null(strstr(err, "b.conf:2"));
	assert_non_null(strstr(err, "lease_ms"));
	/* run stops with 78, which the unit does not restart into (running.md) */
	assert_one_line_error(RUN("run", "--config", path, "--db", e->db_path), 78,
			      "run bad config");
	assert_non_null(strstr(err, "b.conf:2"));
	/* and an unreadable one */
	assert_one_line_error(RUN("run", "--config", "/nonexistent/stagedoor.conf", "--db",
				  e->db_path), 78, "run no config");
	assert_non_null(strstr(err, "/nonexistent/stagedoor.conf"));
	/* an environment variable with a bad value names the variable */
	setenv("STAGEDOOR_WORKERS", "many", 1);
	assert_one_line_error(RUN("run", "--db", e->db_path), 78, "bad env");
	unsetenv("STAGEDOOR_WORKERS");
	assert_non_null(strstr(err, "STAGEDOOR_WORKERS"));
}

/* The config file's db is the default db of every command. */
/* "#" after a space starts a comment in the file; "\#" is a '#'; a '#'
 * inside a word is the value's. */
static void test_inline_comments(void **state)
{
	struct tu_env *e = *state;
	struct config c;
	char path[400];

	write_file(e, "c.conf",
		   "http_listen = 127.0.0.1:8080    # 0.0.0.0:8443 on a venue's network\n"
		   "log_file = /var/log/box.log\t# default: stderr\n"
		   "mail_url = https://mail.example/send#v2\n"
		   "backup_dir = /srv/box \\#2 # the second box's\n", path, sizeof path);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path), SD_OK);
	assert_string_equal(config_str(&c, CONFIG_HTTP_LISTEN), "127.0.0.1:8080");
	assert_string_equal(config_str(&c, CONFIG_LOG_FILE), "/var/log/box.log");
	assert_string_equal(config_str(&c, CONFIG_MAIL_URL), "https://mail.example/send#v2");
	assert_string_equal(config_str(&c, CONFIG_BACKUP_DIR), "/srv/box #2");
	config_free(&c);
	/* a value that is only a comment is no value */
	write_file(e, "e.conf", "log_file = # none\n", path, sizeof path);
	config_init(&c);
	assert_int_equal(config_load_file(&c, path), SD_INVALID);
	assert_non_null(strstr(err_msg(), "log_file needs a value"));
	config_free(&c);
}

static int key_known(const char *name)
{
	int k;

	for (k = 0; k < CONFIG_N_KEYS; k++)
		if (strcmp(config_key_name((enum config_key)k), name) == 0)
			return 1;
	return 0;
}

/* The shipped dist/stagedoor.conf with every example line uncommented
 * ("# key = value  # note" becomes "key = value  # note") loads, and no
 * value holds its note. */
static void test_shipped_examples_uncommented(void **state)
{
	struct tu_env *e = *state;
	size_t len, i, o = 0;
	unsigned char *text = tu_slurp("dist/stagedoor.conf", &len);
	char *file = calloc(1, len + 1), path[400], key[64];
	const char *line;
	struct config c;
	int n = 0, k;

	assert_non_null(text);
	assert_non_null(file);
	for (i = 0; i < len; i = (size_t)(strchr((char *)text + i, '\n') - (char *)text) + 1) {
		line = (const char *)text + i;
		/* "# name = ..." with a known key: the example, uncommented */
		if (sscanf(line, "# %63[a-z_.] = ", key) == 1 && strchr(line, '=') <
		    strchr(line, '\n') && key_known(key) && line[2] != ' ') {
			line += 2;
			n++;
		}
		memcpy(file + o, line, (size_t)(strchr(line, '\n') - line) + 1);
		o += (size_t)(strchr(line, '\n') - line) + 1;
	}
	write_file(e, "shipped.conf", file, path, sizeof path);
	assert_true(n >= 30);	/* the file's examples */
	config_init(&c);
	if (config_load_file(&c, path) != SD_OK)
		fail_msg("the shipped examples, uncommented, do not load: %s", err_msg());
	for (k = 0; k < CONFIG_N_KEYS; k++) {
		const char *v = config_str(&c, (enum config_key)k);

		if (v && strstr(v, " #"))
			fail_msg("%s took its note into its value: '%s'", config_key_name((enum config_key)k), v);
	}
	assert_string_equal(config_str(&c, CONFIG_HTTP_LISTEN), "127.0.0.1:8080");
	assert_string_equal(config_str(&c, CONFIG_BACKUP_DIR), "/var/backups/stagedoor");
	config_free(&c);
	free(file);
	free(text);
}

static void test_db_from_the_config_file(void **state)
{
	const struct tu_env *e = *state;
	char path[512], text[600];

	snprintf(text, sizeof text, "db = %s/box.db\n", e->dir);
	write_file(e, "d.conf", text, path, sizeof path);
	setenv("STAGEDOOR_CONFIG", path, 1);
	assert_int_equal(RUN("init"), 0);
	unsetenv("STAGEDOOR_CONFIG");
	assert_non_null(strstr(out, "box.db"));
	snprintf(path, sizeof path, "%s/box.db", e->dir);
	assert_int_equal(access(path, F_OK), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_precedence_flag_env_file_default, setup, teardown),
		cmocka_unit_test_setup_teardown(test_precedence_through_mail_test, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_errors_name_file_line_and_key, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_config_file_through_the_binary, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_mail_test_through_maildir, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mail_test_smtp_no_server_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_mail_test_usage, setup, teardown),
		cmocka_unit_test_setup_teardown(test_send_lease_longer_than_timeout, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_key_has_its_flag, setup, teardown),
		cmocka_unit_test_setup_teardown(test_numeric_keys_precedence_and_defaults, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_backup_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_inline_comments, setup, teardown),
		cmocka_unit_test_setup_teardown(test_shipped_examples_uncommented, setup, teardown),
		cmocka_unit_test_setup_teardown(test_typed_values_are_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kind_policies_from_keys, setup, teardown),
		cmocka_unit_test_setup_teardown(test_config_show, setup, teardown),
		cmocka_unit_test_setup_teardown(test_db_from_the_config_file, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
