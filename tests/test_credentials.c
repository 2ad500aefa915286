/*
 * test_credentials.c: secrets from systemd's credentials
 * ($CREDENTIALS_DIRECTORY, LoadCredential= in dist/stagedoor.service) next
 * to the box's own files (cred.h):
 *   - a file of the box's own is 0600 or 0400; a credential may also be
 *     0440 (systemd's ACL mask) when root or this user owns it; group
 *     write, any bit for others, or another owner are refused;
 *   - the HTTPS listener takes $CREDENTIALS_DIRECTORY/http_tls_key when
 *     http_tls_cert is set and http_tls_key is not, and refuses one that
 *     others may read, naming it; without the credential the certificate
 *     alone is still refused;
 *   - the SMTP password comes from $CREDENTIALS_DIRECTORY/mail_password at
 *     0440 as at 0400.
 * The test sets CREDENTIALS_DIRECTORY itself, to a folder it fills as
 * systemd would.
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

#include "cred.h"
#include "mail.h"
#include "mail_curl.h"
#include "serve.h"
#include "testutil.h"

static char creds[300];		/* the test's $CREDENTIALS_DIRECTORY */

static int setup(void **state)
{
	int rc = tu_setup_real(state);

	if (rc != 0)
		return rc;
	snprintf(creds, sizeof creds, "%s/creds", ((struct tu_env *)*state)->dir);
	if (mkdir(creds, 0700) != 0)
		return -1;
	setenv("CREDENTIALS_DIRECTORY", creds, 1);
	return 0;
}

static int teardown(void **state)
{
	unsetenv("CREDENTIALS_DIRECTORY");
	return tu_teardown(state);
}

/* put: a file at dir/name with text, mode mode; [out] path. */
static void put(const char *dir, const char *name, const char *text, mode_t mode, char *path,
		size_t size)
{
	FILE *f;

	snprintf(path, size, "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

/* mode_ok: cred_mode_ok on the file at path. */
static int mode_ok(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return cred_mode_ok(path, &st);
}

/* modes_check: chmod path to each mode and ask cred_mode_ok; ok[i] is the
 * answer wanted for modes[i]. */
static void modes_check(const char *path, const mode_t *modes, const int *ok, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		assert_int_equal(chmod(path, modes[i]), 0);
		if (mode_ok(path) != ok[i])
			fail_msg("%s at %04o: wanted %s", path, (unsigned)modes[i],
				 ok[i] ? "accepted" : "refused");
	}
}

static void test_modes_of_files_and_credentials(void **state)
{
	static const mode_t modes[] = { 0600, 0400, 0440, 0604, 0444, 0460, 0442, 0640 };
	/* the box's own file: no group or other bit */
	static const int own_ok[] = { 1, 1, 0, 0, 0, 0, 0, 0 };
	/* a credential: what systemd makes (0440: the ACL's mask), nothing
	 * that others may read or the group may write */
	static const int cred_ok[] = { 1, 1, 1, 0, 0, 0, 0, 1 };
	const struct tu_env *e = *state;
	char own[400], cred[400], sub[400], buf[500];

	put(e->dir, "secret", "x\n", 0600, own, sizeof own);
	modes_check(own, modes, own_ok, sizeof modes / sizeof modes[0]);
	put(creds, "secret", "x\n", 0400, cred, sizeof cred);
	modes_check(cred, modes, cred_ok, sizeof modes / sizeof modes[0]);
	/* owned by someone else (neither root nor this user) */
	assert_int_equal(chmod(cred, 0400), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(cred, 4242, 4242), 0);
		assert_false(mode_ok(cred));
		assert_int_equal(chown(cred, 0, 0), 0);
	}
	/* a file in a folder below it is not systemd's */
	snprintf(sub, sizeof sub, "%s/sub", creds);
	assert_int_equal(mkdir(sub, 0700), 0);
	put(sub, "secret", "x\n", 0440, buf, sizeof buf);
	assert_false(mode_ok(buf));

	/* cred_find: only a file that is there, only with the variable */
	assert_true(cred_find("secret", buf, sizeof buf));
	assert_string_equal(buf, cred);
	assert_false(cred_find("absent", buf, sizeof buf));
	unsetenv("CREDENTIALS_DIRECTORY");
	assert_false(cred_find("secret", buf, sizeof buf));
	assert_true(mode_ok(cred));	/* 0400: fine as a file of the box's own too */
	assert_int_equal(chmod(cred, 0440), 0);
	assert_false(mode_ok(cred));
}

/* serve_start on the test's database, TLS with the certificate only. */
static enum sd_result serve_tls(const struct tu_env *e, const char *cert, struct serve **s)
{
	struct serve_opts o;

	memset(&o, 0, sizeof o);
	o.db_path = e->db_path;
	o.listen = "127.0.0.1:0";
	o.tls_cert = cert;
	return serve_start(&o, s);
}

static void test_https_listener_takes_the_key_credential(void **state)
{
	const struct tu_env *e = *state;
	char certs[400], cmd[600], cert[500], key[500], cred[400];
	unsigned char *pem;
	struct serve *s = NULL;
	size_t size;

	snprintf(certs, sizeof certs, "%s/certs", e->dir);
	snprintf(cmd, sizeof cmd, "sh tools/certs.sh '%s'", certs);
	assert_int_equal(system(cmd), 0);
	snprintf(cert, sizeof cert, "%s/server.pem", certs);
	snprintf(key, sizeof key, "%s/server.key", certs);
	pem = tu_slurp(key, &size);
	/* the box's ticket key, which the API needs */
	assert_int_equal(tu_run(NULL, 0, NULL, 0,
				(const char *const[]){ "init", "--db", e->db_path, NULL }), 0);

	/* no credential: a certificate without a key is refused */
	if (serve_tls(e, cert, &s) != SD_INVALID || !strstr(err_msg(), "without a key"))
		fail_msg("a certificate without a key: %s", err_msg());

	/* as systemd puts it: root's, 0440 by the ACL's mask */
	put(creds, "http_tls_key", (const char *)pem, 0440, cred, sizeof cred);
	assert_int_equal(serve_tls(e, cert, &s), SD_OK);
	assert_true(serve_port(s) > 0);
	serve_stop(s);
	s = NULL;

	/* one that every user may read is refused, naming it */
	assert_int_equal(chmod(cred, 0444), 0);
	assert_int_equal(serve_tls(e, cert, &s), SD_INVALID);
	assert_non_null(strstr(err_msg(), cred));
	assert_null(s);
	free(pem);
}

static void test_mail_password_credential_at_0440(void **state)
{
	struct mail_config mc = { .user = "stagedoor" };
	struct mail_curl *c = NULL;
	char cred[400];

	(void)state;
	put(creds, "mail_password", "s3cret\n", 0440, cred, sizeof cred);
	assert_int_equal(mail_curl_open("smtp://127.0.0.1:2525", &mc, &c), SD_OK);
	mail_curl_close(c);
	c = NULL;
	assert_int_equal(chmod(cred, 0444), 0);
	assert_int_equal(mail_curl_open("smtp://127.0.0.1:2525", &mc, &c), SD_INVALID);
	assert_non_null(strstr(err_msg(), cred));
	assert_null(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_modes_of_files_and_credentials, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_https_listener_takes_the_key_credential,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_mail_password_credential_at_0440, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
