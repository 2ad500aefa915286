/*
 * test_smtp.c: the SMTP transports against a real SMTP server over TLS.
 *
 * The server is aiosmtpd (Debian's python3-aiosmtpd) run by
 * tests/smtp_sink.py on a free loopback port; the certificates are made
 * for each test by tools/certs.sh (a CA, a server certificate for
 * 127.0.0.1/localhost signed by it, one signed by it for another host, a
 * self-signed one) plus one from a second, untrusted CA.  Nothing is skipped: without python3-aiosmtpd or
 * openssl the tests fail and say what to install.
 *
 * What arrives is parsed here (base64 and quoted-printable decoded without
 * mail.c), and what the client said in clear is read from the sink's
 * transcript of command verbs.
 *
 * The job-level tests (at the end) place and render one order as
 * test_mailapi.c does and run the real send_tickets handler (ticket_job_send)
 * through a standalone handler context on the fake clock, its mailer
 * pointed at the sink.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "blob.h"
#include "code.h"
#include "event_edit.h"
#include "events.h"
#include "idem.h"
#include "mail.h"
#include "orders.h"
#include "statedir.h"
#include "testutil.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "worker.h"

#define PYTHON "/usr/bin/python3"	/* Debian's: it sees python3-aiosmtpd */
#define SINK_SCRIPT "tests/smtp_sink.py"
#define PDF_LEN 150001			/* several upload callbacks' worth */

extern char **environ;

static pid_t sink_pid;
static unsigned char pdf[PDF_LEN];
static struct mail_attachment att = { "tickets-AB12.pdf", "application/pdf", pdf, sizeof pdf };

/* A ticket-like message: a PDF-looking attachment of every byte value, a
 * text with a long line and lines that start with a dot. */
static char long_text[6000];

static struct mail_message sample(const char *key)
{
	struct mail_message m = {
		.from = "box@venue.example",
		.from_name = "Box office",
		.to = "jose@example.org",
		.to_name = "Jos\xc3\xa9 M\xc3\xbcller",
		.subject = "Your tickets for Hamlet",
		.text = long_text,
		.attachments = &att,
		.n_attachments = 1,
		.idempotency_key = key,
	};
	size_t i, n;

	memcpy(pdf, "%PDF-1.4\n", 9);
	for (i = 9; i < sizeof pdf; i++)
		pdf[i] = (unsigned char)(i * 131 + 17);
	n = (size_t)snprintf(long_text, sizeof long_text,
			     "Hello Jos\xc3\xa9,\n.\n.a line that starts with a dot\n"
			     "trailing space \nfrom here a long line: ");
	for (i = 0; i < 3000; i++)
		long_text[n++] = "0123456789abcdef=\xc3\xa9 "[i % 20];
	long_text[n] = '\0';
	strcat(long_text, "\nOrder AB12\n");
	return m;
}

/* ---- set-up: certificates, the sink ---------------------------------- */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void sh(const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof cmd, fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc != 0)
		fail_msg("command failed (%d): %s", rc, cmd);
}

/* dir/certs: tools/certs.sh's ca.pem, and as NAME.pem and NAME.key its
 * server (for 127.0.0.1 and localhost, from ca), wrong (for wrong.example,
 * from ca) and unknown (self-signed), and made here: stranger (for
 * 127.0.0.1, from a second CA that no test trusts). */
static void make_certs(const struct tu_env *env)
{
	if (system("command -v openssl >/dev/null 2>&1") != 0)
		fail_msg("openssl is missing: apt-get install openssl");
	if (access("tools/certs.sh", R_OK) != 0)
		fail_msg("tools/certs.sh not found: run the tests from the source tree");
	sh("set -e; d='%s/certs'; sh tools/certs.sh \"$d\"; cd \"$d\"; "
	   "k='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2'; "
	   "openssl req -x509 $k -keyout ca2.key -out ca2.pem -subj /CN=unknown-ca "
	   ">/dev/null 2>&1; "
	   "openssl req -x509 $k -keyout stranger.key -out stranger.pem -subj /CN=localhost "
	   "-addext subjectAltName=IP:127.0.0.1,DNS:localhost -CA ca2.pem -CAkey ca2.key "
	   ">/dev/null 2>&1",
	   env->dir);
}

static void need_aiosmtpd(void)
{
	if (access(PYTHON, X_OK) != 0)
		fail_msg(PYTHON " is missing: run make deps (apt-get install python3-aiosmtpd)");
	if (system(PYTHON " -c 'import aiosmtpd' >/dev/null 2>&1") != 0)
		fail_msg("python3-aiosmtpd is missing: run make deps "
			 "(apt-get install python3-aiosmtpd)");
	if (access(SINK_SCRIPT, R_OK) != 0)
		fail_msg(SINK_SCRIPT " not found: run the tests from the source tree");
}

/*
 * Start the sink with mode ("--require-starttls", "--no-starttls",
 * "--implicit-tls"), the certificate NAME (may be NULL) and extra
 * arguments (may be NULL); its messages go to dir/out.  Returns the port.
 */
static int sink_start(const struct tu_env *env, const char *mode, const char *cert,
		      const char *extra1, const char *extra2)
{
	char port_file[400], out[400], tr[400], certp[400], keyp[400], log[400], buf[32];
	const char *argv[24];
	posix_spawn_file_actions_t fa;
	int n = 0, i, rc;
	FILE *f;

	need_aiosmtpd();
	snprintf(port_file, sizeof port_file, "%s/sink.port", env->dir);
	snprintf(out, sizeof out, "%s/out", env->dir);
	snprintf(tr, sizeof tr, "%s/transcript", env->dir);
	mkdir(out, 0700);
	unlink(port_file);	/* a sink started before left its port */
	unlink(tr);
	argv[n++] = PYTHON;
	argv[n++] = SINK_SCRIPT;
	argv[n++] = "--port-file";
	argv[n++] = port_file;
	argv[n++] = "--outdir";
	argv[n++] = out;
	argv[n++] = "--transcript";
	argv[n++] = tr;
	argv[n++] = mode;
	if (cert) {
		snprintf(certp, sizeof certp, "%s/certs/%s.pem", env->dir, cert);
		snprintf(keyp, sizeof keyp, "%s/certs/%s.key", env->dir, cert);
		argv[n++] = "--cert";
		argv[n++] = certp;
		argv[n++] = "--key";
		argv[n++] = keyp;
	}
	if (extra1)
		argv[n++] = extra1;
	if (extra2)
		argv[n++] = extra2;
	argv[n] = NULL;
	/* the sink's log (the TLS failures a test provokes show there as
	 * tracebacks) stays out of the test output unless it fails to start */
	snprintf(log, sizeof log, "%s/sink.log", env->dir);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0600);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	rc = posix_spawn(&sink_pid, PYTHON, &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		fail_msg("cannot start the SMTP sink: %s", strerror(rc));
	for (i = 0; i < 200; i++) {	/* 10 s */
		if ((f = fopen(port_file, "r"))) {
			int port = 0;

			if (fgets(buf, sizeof buf, f))
				port = atoi(buf);
			fclose(f);
			if (port > 0)
				return port;
		}
		if (waitpid(sink_pid, &rc, WNOHANG) == sink_pid) {
			sink_pid = 0;
			sh("cat '%s' >&2", log);
			fail_msg("the SMTP sink exited at start (status %d); its log is above", rc);
		}
		tu_sleep_ms(50);
	}
	fail_msg("the SMTP sink did not start within 10 s");
	return -1;
}

static void sink_stop(void)
{
	if (sink_pid > 0) {
		kill(sink_pid, SIGTERM);
		if (tu_wait(sink_pid, 5000) == -2) {
			kill(sink_pid, SIGKILL);
			tu_wait(sink_pid, 5000);
		}
	}
	sink_pid = 0;
}

static int setup(void **state)
{
	return tu_setup_real_nodb(state);
}

static int teardown(void **state)
{
	sink_stop();
	return tu_teardown(state);
}

static struct mailer *open_smtp(const char *scheme, int port, const struct mail_config *cfg)
{
	struct mailer *m = NULL;
	char url[100];

	snprintf(url, sizeof url, "%s://127.0.0.1:%d", scheme, port);
	if (mail_open_opts(url, cfg, &m) != SD_OK)
		fail_msg("mail_open_opts(%s): %s", url, err_msg());
	return m;
}

/* ---- reading what arrived -------------------------------------------- */

static char *read_file(const char *path, size_t *len)
{
	size_t n;
	char *p = (char *)tu_slurp(path, &n);

	if (len)
		*len = n;
	return p;
}

static int sink_count(const struct tu_env *env)
{
	char path[400];
	int n;

	for (n = 0;; n++) {
		snprintf(path, sizeof path, "%s/out/%d.eml", env->dir, n + 1);
		if (access(path, F_OK) != 0)
			return n;
	}
}

/* The sink writes before it answers 250, so an accepted message is there. */
static char *sink_message(const struct tu_env *env, int n, const char *suffix, size_t *len)
{
	char path[400];

	snprintf(path, sizeof path, "%s/out/%d.%s", env->dir, n, suffix);
	if (access(path, F_OK) != 0)
		fail_msg("no message %s at the sink", path);
	return read_file(path, len);
}

static char *transcript(const struct tu_env *env)
{
	char path[400];

	snprintf(path, sizeof path, "%s/transcript", env->dir);
	if (access(path, F_OK) != 0)
		return strdup("");
	return read_file(path, NULL);
}

static int b64_value(char c)
{
	const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(a, c) : NULL;

	return p ? (int)(p - a) : -1;
}

static unsigned char *b64_decode(const char *s, const char *end, size_t *len)
{
	unsigned char *out = malloc((size_t)(end - s) + 1);
	uint32_t acc = 0;
	int bits = 0, v;
	size_t n = 0;

	assert_non_null(out);
	for (; s < end && *s != '='; s++) {
		if (*s == '\r' || *s == '\n')
			continue;
		if ((v = b64_value(*s)) < 0)
			fail_msg("not base64: 0x%02x", (unsigned char)*s);
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			out[n++] = (unsigned char)(acc >> (bits - 8));
			bits -= 8;
		}
	}
	*len = n;
	return out;
}

static int hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Quoted-printable from s to end, decoded. */
static char *qp_decode(const char *s, const char *end)
{
	char *out = malloc((size_t)(end - s) + 1);
	size_t n = 0;

	assert_non_null(out);
	while (s < end) {
		if (*s == '=' && end - s >= 3 && s[1] == '\r' && s[2] == '\n') {
			s += 3;
		} else if (*s == '=') {
			int hi = hex_value(s[1]), lo = hex_value(s[2]);

			if (hi < 0 || lo < 0)
				fail_msg("bad quoted-printable escape");
			out[n++] = (char)(hi * 16 + lo);
			s += 3;
		} else {
			out[n++] = *s++;
		}
	}
	out[n] = '\0';
	return out;
}

/* The part after head, up to the next boundary line. */
static const char *part(const char *msg, const char *head, const char **end)
{
	const char *p = strstr(msg, head), *q;

	if (!p)
		fail_msg("no part with %s", head);
	p += strlen(head);
	q = strstr(p, "\r\n--=_sd_");
	assert_non_null(q);
	*end = q + 2;	/* the part's last CRLF belongs to it */
	return p;
}

/* The text as mail_format normalises it: CRLF line ends, one at the end. */
static char *crlf_text(const char *text)
{
	char *out = malloc(strlen(text) * 2 + 3);
	size_t n = 0;
	const char *p;

	assert_non_null(out);
	for (p = text; *p; p++) {
		if (*p == '\n') {
			out[n++] = '\r';
			out[n++] = '\n';
		} else {
			out[n++] = *p;
		}
	}
	if (n < 2 || out[n - 1] != '\n') {
		out[n++] = '\r';
		out[n++] = '\n';
	}
	out[n] = '\0';
	return out;
}

/* Check message n at the sink: envelope, TLS, headers, the text after
 * quoted-printable, the attachment byte for byte, every line < 998. */
static void check_delivered(const struct tu_env *env, int n, const struct mail_message *m,
			    const char *auth_user)
{
	char *eml, *envl, *text, *want, line[300];
	const char *p, *q, *end;
	unsigned char *got;
	size_t len, glen;

	envl = sink_message(env, n, "env", NULL);
	snprintf(line, sizeof line, "from %s\nto %s\ntls 1\nauth %s\n", m->from, m->to,
		 auth_user ? auth_user : "");
	assert_string_equal(envl, line);
	free(envl);

	eml = sink_message(env, n, "eml", &len);
	snprintf(line, sizeof line, "\r\nMessage-ID: <%s@stagedoor.invalid>\r\n",
		 m->idempotency_key);
	assert_non_null(strstr(eml, line));
	assert_non_null(strstr(eml, "\r\nSubject: Your tickets for Hamlet\r\n"));
	for (p = eml; p < eml + len;) {
		const char *eol = strstr(p, "\r\n");

		assert_non_null(eol);
		assert_true(eol - p < 998);
		p = eol + 2;
	}

	p = part(eml, "Content-Transfer-Encoding: quoted-printable\r\n\r\n", &end);
	/* the text part: ASCII lines of at most 76, none starting with '.' */
	for (q = p; q < end;) {
		const char *eol = strstr(q, "\r\n");

		assert_true(eol - q <= 76);
		assert_true(*q != '.');
		for (; q < eol; q++)
			assert_true((unsigned char)*q >= 0x20 && (unsigned char)*q < 0x7f);
		q = eol + 2;
	}
	text = qp_decode(p, end);
	want = crlf_text(m->text);
	assert_string_equal(text, want);
	free(text);
	free(want);

	p = part(eml, "Content-Disposition: attachment; filename=\"tickets-AB12.pdf\"\r\n\r\n",
		 &end);
	got = b64_decode(p, end, &glen);
	assert_int_equal(glen, sizeof pdf);
	assert_memory_equal(got, pdf, sizeof pdf);
	free(got);
	free(eml);
}

/* ---- the tests --------------------------------------------------------- */

static void test_starttls_delivers(void **state)
{
	struct tu_env *env = *state;
	struct mail_message m = sample("tickets-41");
	struct mail_config cfg = { 0 };
	struct mail_result res;
	struct mailer *mailer;
	char ca[400], *tr;
	int port;

	make_certs(env);
	port = sink_start(env, "--require-starttls", "server", NULL, NULL);
	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	cfg.ca_file = ca;
	mailer = open_smtp("smtp", port, &cfg);
	if (mail_send(mailer, &m, &res) != SD_OK)
		fail_msg("send: %s", err_msg());
	assert_string_equal(res.message_id, "tickets-41@stagedoor.invalid");
	assert_int_equal(res.duplicate, 0);
	assert_int_equal(sink_count(env), 1);
	check_delivered(env, 1, &m, NULL);
	/* nothing but EHLO and STARTTLS before TLS */
	tr = transcript(env);
	assert_true(strncmp(tr, "EHLO\nSTARTTLS\nEHLO+tls\nMAIL+tls\nRCPT+tls\nDATA+tls\n",
			    strlen("EHLO\nSTARTTLS\nEHLO+tls\nMAIL+tls\nRCPT+tls\nDATA+tls\n")) == 0);
	free(tr);
	mail_close(mailer);
}

static void test_smtps_delivers(void **state)
{
	struct tu_env *env = *state;
	struct mail_message m = sample("tickets-42");
	struct mail_config cfg = { 0 };
	struct mail_result res;
	struct mailer *mailer;
	char ca[400], *tr;
	int port;

	make_certs(env);
	port = sink_start(env, "--implicit-tls", "server", NULL, NULL);
	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	cfg.ca_file = ca;
	mailer = open_smtp("smtps", port, &cfg);
	if (mail_send(mailer, &m, &res) != SD_OK)
		fail_msg("send: %s", err_msg());
	assert_string_equal(res.message_id, "tickets-42@stagedoor.invalid");
	check_delivered(env, 1, &m, NULL);
	tr = transcript(env);
	assert_true(strncmp(tr, "EHLO+tls\nMAIL+tls\n", 18) == 0);
	free(tr);
	mail_close(mailer);
}

/* A refused send: SD_IO naming the host, nothing delivered, and the client
 * never sent AUTH, MAIL or anything else in clear. */
static void check_refused(const struct tu_env *env, struct mailer *mailer, int port,
			  const char *why)
{
	struct mail_message m = sample("tickets-43");
	struct mail_result res;
	char where[64], *tr;

	assert_int_equal(mail_send(mailer, &m, &res), SD_IO);
	print_message("refused as it should be: %s\n", err_msg());
	snprintf(where, sizeof where, "127.0.0.1:%d", port);
	if (!strstr(err_msg(), where) || !strstr(err_msg(), why))
		fail_msg("error '%s' should name %s and say '%s'", err_msg(), where, why);
	assert_null(strstr(err_msg(), "s3cret-pw"));
	assert_int_equal(sink_count(env), 0);
	tr = transcript(env);
	assert_null(strstr(tr, "AUTH"));
	assert_null(strstr(tr, "MAIL"));
	assert_null(strstr(tr, "RCPT"));
	assert_null(strstr(tr, "DATA"));
	free(tr);
}

static void write_password(const struct tu_env *env, char *path, size_t size, mode_t mode)
{
	FILE *f;

	snprintf(path, size, "%s/password", env->dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("s3cret-pw\n", f);
	fclose(f);
	assert_int_equal(chmod(path, mode), 0);
}

static void test_no_starttls_sends_nothing(void **state)
{
	struct tu_env *env = *state;
	struct mail_config cfg = { 0 };
	struct mailer *mailer;
	char ca[400], pw[400];
	int port;

	make_certs(env);
	port = sink_start(env, "--no-starttls", NULL, NULL, NULL);
	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	write_password(env, pw, sizeof pw, 0600);
	cfg.ca_file = ca;
	cfg.user = "box";
	cfg.password_file = pw;
	mailer = open_smtp("smtp", port, &cfg);
	check_refused(env, mailer, port, "STARTTLS");
	mail_close(mailer);
}

static void test_wrong_host_certificate_refused(void **state)
{
	struct tu_env *env = *state;
	struct mail_config cfg = { 0 };
	struct mailer *mailer;
	char ca[400];
	int port;

	make_certs(env);
	port = sink_start(env, "--require-starttls", "wrong", NULL, NULL);
	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	cfg.ca_file = ca;
	mailer = open_smtp("smtp", port, &cfg);
	check_refused(env, mailer, port, "certificate");
	mail_close(mailer);
}

static void test_unknown_ca_refused(void **state)
{
	struct tu_env *env = *state;
	struct mail_config cfg = { 0 };
	struct mailer *mailer;
	char ca[400];
	int port;

	make_certs(env);
	port = sink_start(env, "--implicit-tls", "stranger", NULL, NULL);
	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	cfg.ca_file = ca;
	mailer = open_smtp("smtps", port, &cfg);
	check_refused(env, mailer, port, "certificate");
	mail_close(mailer);
	sink_stop();

	/* the same over STARTTLS */
	port = sink_start(env, "--require-starttls", "stranger", NULL, NULL);
	mailer = open_smtp("smtp", port, &cfg);
	check_refused(env, mailer, port, "certificate");
	mail_close(mailer);
	sink_stop();

	/* a self-signed certificate, with our CA and with the system's store */
	port = sink_start(env, "--require-starttls", "unknown", NULL, NULL);
	mailer = open_smtp("smtp", port, &cfg);
	check_refused(env, mailer, port, "certificate");
	mail_close(mailer);
	mailer = open_smtp("smtp", port, NULL);
	check_refused(env, mailer, port, "certificate");
	mail_close(mailer);
}

static void test_auth_with_password_file(void **state)
{
	struct tu_env *env = *state;
	struct mail_message m = sample("tickets-44");
	struct mail_config cfg = { 0 };
	struct mail_result res;
	struct mailer *mailer;
	char ca[400], pw[400], arg[500], credir[400], cred[500];
	FILE *f;
	int port;

	make_certs(env);
	write_password(env, pw, sizeof pw, 0600);
	snprintf(arg, sizeof arg, "box:%s", pw);
	port = sink_start(env, "--require-starttls", "server", "--auth", arg);
	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	cfg.ca_file = ca;
	cfg.user = "box";
	cfg.password_file = pw;
	mailer = open_smtp("smtp", port, &cfg);
	if (mail_send(mailer, &m, &res) != SD_OK)
		fail_msg("send: %s", err_msg());
	check_delivered(env, 1, &m, "box");
	mail_close(mailer);

	/* $CREDENTIALS_DIRECTORY/mail_password when no file is named */
	snprintf(credir, sizeof credir, "%s/creds", env->dir);
	assert_int_equal(mkdir(credir, 0700), 0);
	snprintf(cred, sizeof cred, "%s/mail_password", credir);
	f = fopen(cred, "w");
	assert_non_null(f);
	fputs("s3cret-pw", f);
	fclose(f);
	assert_int_equal(chmod(cred, 0400), 0);
	setenv("CREDENTIALS_DIRECTORY", credir, 1);
	cfg.password_file = NULL;
	mailer = open_smtp("smtp", port, &cfg);
	unsetenv("CREDENTIALS_DIRECTORY");
	m.idempotency_key = "tickets-45";
	if (mail_send(mailer, &m, &res) != SD_OK)
		fail_msg("send: %s", err_msg());
	check_delivered(env, 2, &m, "box");
	mail_close(mailer);

	/* a wrong password: a transient failure that does not show it */
	f = fopen(pw, "w");
	assert_non_null(f);
	fputs("wrong-s3cret-pw\n", f);
	fclose(f);
	cfg.password_file = pw;
	mailer = open_smtp("smtp", port, &cfg);
	m.idempotency_key = "tickets-46";
	assert_int_equal(mail_send(mailer, &m, &res), SD_IO);
	assert_null(strstr(err_msg(), "s3cret"));
	assert_int_equal(sink_count(env), 2);
	mail_close(mailer);
}

static void test_password_file_checks(void **state)
{
	struct tu_env *env = *state;
	struct mail_config cfg = { 0 };
	struct mailer *m = NULL;
	char pw[400];

	write_password(env, pw, sizeof pw, 0644);
	cfg.user = "box";
	cfg.password_file = pw;
	assert_int_equal(mail_open_opts("smtp://127.0.0.1:2525", &cfg, &m), SD_INVALID);
	assert_null(m);
	assert_non_null(strstr(err_msg(), "0644"));
	assert_null(strstr(err_msg(), "s3cret"));
	assert_int_equal(chmod(pw, 0640), 0);
	assert_int_equal(mail_open_opts("smtp://127.0.0.1:2525", &cfg, &m), SD_INVALID);
	assert_int_equal(chmod(pw, 0600), 0);
	assert_int_equal(mail_open_opts("smtp://127.0.0.1:2525", &cfg, &m), SD_OK);
	mail_close(m);
	/* a user without any password, and a password without a user */
	unsetenv("CREDENTIALS_DIRECTORY");
	cfg.password_file = NULL;
	assert_int_equal(mail_open_opts("smtp://127.0.0.1:2525", &cfg, &m), SD_INVALID);
	assert_non_null(strstr(err_msg(), "password"));
	cfg.user = NULL;
	cfg.password_file = pw;
	assert_int_equal(mail_open_opts("smtp://127.0.0.1:2525", &cfg, &m), SD_INVALID);
	/* a missing password file and a missing CA file are named at open */
	cfg.user = "box";
	cfg.password_file = "/nonexistent/pw";
	assert_int_equal(mail_open_opts("smtp://127.0.0.1:2525", &cfg, &m), SD_INVALID);
	assert_non_null(strstr(err_msg(), "/nonexistent/pw"));
	memset(&cfg, 0, sizeof cfg);
	cfg.ca_file = "/nonexistent/ca.pem";
	assert_int_equal(mail_open_opts("smtp://127.0.0.1:2525", &cfg, &m), SD_INVALID);
	assert_non_null(strstr(err_msg(), "/nonexistent/ca.pem"));
}

static void test_smtp_urls(void **state)
{
	struct mailer *m = NULL;

	(void)state;
	assert_int_equal(mail_open("smtp://user:s3cret@mail.example.org:587", &m), SD_INVALID);
	assert_null(m);
	assert_null(strstr(err_msg(), "s3cret"));
	assert_non_null(strstr(err_msg(), "user or password"));
	assert_int_equal(mail_open("smtps://mail.example.org:465/path", &m), SD_INVALID);
	assert_int_equal(mail_open("smtp://mail.example.org:0", &m), SD_INVALID);
	assert_int_equal(mail_open("smtp://mail.example.org:99999", &m), SD_INVALID);
	assert_int_equal(mail_open("smtp://mail.example.org:x", &m), SD_INVALID);
	assert_int_equal(mail_open("smtp://", &m), SD_INVALID);
	assert_int_equal(mail_open("smtp://mail.example.org?x=1", &m), SD_INVALID);
	assert_int_equal(mail_open("smtp:/mail.example.org", &m), SD_INVALID);
	/* opening connects nowhere: only a send does */
	assert_int_equal(mail_open("smtp://mail.example.org:587", &m), SD_OK);
	mail_close(m);
	assert_int_equal(mail_open("smtps://[::1]:465/", &m), SD_OK);
	mail_close(m);
	assert_int_equal(mail_open("smtp://mail.example.org", &m), SD_OK);
	mail_close(m);
}

static void test_rejected_recipient_is_permanent(void **state)
{
	struct tu_env *env = *state;
	struct mail_message m = sample("tickets-47");
	struct mail_config cfg = { 0 };
	struct mail_result res;
	struct mailer *mailer;
	char ca[400];
	int port;

	make_certs(env);
	port = sink_start(env, "--require-starttls", "server", "--reject-rcpt", "jose@example.org");
	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	cfg.ca_file = ca;
	mailer = open_smtp("smtp", port, &cfg);
	assert_int_equal(mail_send(mailer, &m, &res), SD_INVALID);
	assert_non_null(strstr(err_msg(), "recipient"));
	assert_int_equal(sink_count(env), 0);
	mail_close(mailer);
}

/* A server that accepts the connection and never speaks: the total
 * timeout ends the send, as a transient failure. */
static void test_silent_server_times_out(void **state)
{
	struct mail_message m = sample("tickets-48");
	struct mail_config cfg = { 0 };
	struct sockaddr_in a = { 0 };
	socklen_t alen = sizeof a;
	struct mail_result res;
	struct mailer *mailer;
	struct timespec t0, t1;
	long ms;
	int s;

	(void)state;
	s = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(s >= 0);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(listen(s, 4), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &alen), 0);
	cfg.timeout_ms = 700;
	mailer = open_smtp("smtp", ntohs(a.sin_port), &cfg);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	assert_int_equal(mail_send(mailer, &m, &res), SD_IO);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	assert_true(ms >= 600 && ms < 5000);
	assert_non_null(strstr(err_msg(), "timed out"));
	mail_close(mailer);
	close(s);
}

/* ---- the send_tickets job over SMTP ------------------------------------ */

/* One order, placed and rendered, and a handler context whose environment's
 * mailer each test points at its sink (as in test_mailapi.c). */
static struct {
	struct tickets_env *tenv;
	struct handler_ctx *ctx;
	int64_t order_id;
	char public_id[ORDER_ID_MAX];
} J;

static const char SQL_J_ORDER_ID[] = "SELECT id FROM orders WHERE public_id = '%s'";
static const char SQL_J_SENT[] =
	"SELECT count(*) FROM email_sends WHERE order_id = %lld AND sent_at IS NOT NULL";
static const char SQL_J_RELEASED[] =
	"SELECT count(*) FROM email_sends WHERE order_id = %lld AND claimed_at = 0 "
	"AND sent_at IS NULL";

/* A handler job for kind on the order; payload is the caller's buffer. */
static struct job job_for(char *kind, char *job_id, char *payload, size_t size, int64_t id,
			  int64_t delivery)
{
	struct job job;

	snprintf(payload, size, "{\"order_id\":%lld}", (long long)J.order_id);
	memset(&job, 0, sizeof job);
	job.id = id;
	job.lease_token = delivery;
	job.deliveries = delivery;
	job.job_id = job_id;
	job.kind = kind;
	job.payload = payload;
	return job;
}

static int job_setup(void **state)
{
	struct event_new e = { "Hamlet", "Salle Zo\xc3\xab", 1900000000000LL, 100 };
	struct order_new o = { 0, "Jos\xc3\xa9 M\xc3\xbcller", "jose@example.org", 2, NULL };
	static char kind[] = "render_tickets", job_id[] = "render-1";
	struct tu_env *env;
	struct job_result res;
	struct job job;
	char path[600], payload[64];
	int64_t event_id;
	int replayed = -1;

	tu_setup(state);	/* a database, the fake clock */
	env = *state;
	memset(&J, 0, sizeof J);
	assert_int_equal(statedir_init(env->db_path, NULL), SD_OK);
	J.tenv = calloc(1, sizeof *J.tenv);
	assert_non_null(J.tenv);
	snprintf(J.tenv->db_path, sizeof J.tenv->db_path, "%s", env->db_path);
	snprintf(J.tenv->mail_from, sizeof J.tenv->mail_from, "box@venue.example");
	snprintf(path, sizeof path, "%s/blobs", env->dir);
	if (blob_open(path, &J.tenv->blobs) != SD_OK ||
	    code_key_path(env->db_path, NULL, path, sizeof path) != SD_OK ||
	    code_key_load(path, J.tenv->key) != SD_OK)
		fail_msg("tickets env: %s", err_msg());
	assert_int_equal(event_add(env->db, &e, &event_id), SD_OK);
	o.event_id = event_id;
	assert_int_equal(order_add(env->db, &o, J.public_id, &replayed), SD_OK);
	J.order_id = tu_countf(env->db_path, SQL_J_ORDER_ID, J.public_id);
	assert_true(J.order_id > 0);
	J.ctx = handler_ctx_new(env->db_path, J.tenv);
	assert_non_null(J.ctx);
	job = job_for(kind, job_id, payload, sizeof payload, 1, 1);
	memset(&res, 0, sizeof res);
	if (ticket_job_render(J.ctx, &job, &res) != JOB_DONE)
		fail_msg("render: %s", res.error);
	return 0;
}

static int job_teardown(void **state)
{
	sink_stop();
	handler_ctx_free(J.ctx);
	tickets_env_close(J.tenv);
	memset(&J, 0, sizeof J);
	return tu_teardown(state);
}

/* The handlers' mailer: a new one for the sink at port. */
static void job_mailer(const struct tu_env *env, const char *scheme, int port)
{
	struct mail_config cfg = { 0 };
	char ca[400];

	snprintf(ca, sizeof ca, "%s/certs/ca.pem", env->dir);
	cfg.ca_file = ca;
	mail_close(J.tenv->mail);
	J.tenv->mail = open_smtp(scheme, port, &cfg);
}

/* One run of send_tickets for the order; it must end as want. */
static void job_send(enum job_outcome want, struct job_result *out)
{
	static char kind[] = "send_tickets", job_id[] = "outbox:2";
	static int64_t delivery;
	struct job_result res;
	struct job job;
	char payload[64];
	enum job_outcome got;

	job = job_for(kind, job_id, payload, sizeof payload, 2, ++delivery);
	memset(&res, 0, sizeof res);
	got = ticket_job_send(J.ctx, &job, &res);
	if (got != want)
		fail_msg("send_tickets: outcome %d, expected %d (%s)", (int)got, (int)want,
			 res.error);
	if (out)
		*out = res;
}

/* The one message at the sink: envelope over TLS, Message-ID from the
 * order's key, the PDF attachment byte for byte the stored blob. */
static void check_ticket_delivered(const struct tu_env *env)
{
	char *envl, *eml, head[200], key[BLOB_KEY_MAX + 1], want[64];
	unsigned char *got, *blob = NULL;
	size_t glen, blen = 0;
	const char *p, *end;
	struct order_view v;

	assert_int_equal(sink_count(env), 1);
	envl = sink_message(env, 1, "env", NULL);
	assert_string_equal(envl, "from box@venue.example\nto jose@example.org\ntls 1\nauth \n");
	free(envl);
	eml = sink_message(env, 1, "eml", NULL);
	idem_provider_key(want, sizeof want, "tickets", J.public_id);
	snprintf(head, sizeof head, "\r\nMessage-ID: <%s@stagedoor.invalid>\r\n", want);
	assert_non_null(strstr(eml, head));
	snprintf(head, sizeof head,
		 "Content-Disposition: attachment; filename=\"tickets-%s.pdf\"\r\n\r\n",
		 J.public_id);
	p = part(eml, head, &end);
	got = b64_decode(p, end, &glen);

	assert_int_equal(tickets_load_order(env->db, J.order_id, &v), SD_OK);
	tickets_pdf_key(&v, key, sizeof key);
	snprintf(head, sizeof head, "tickets/%s.pdf", J.public_id);
	assert_string_equal(key, head);
	assert_int_equal(blob_get(J.tenv->blobs, key, &blob, &blen), SD_OK);
	assert_true(blen > 1000);
	assert_int_equal(glen, blen);
	assert_memory_equal(got, blob, blen);
	free(blob);
	free(got);
	free(eml);
}

static void job_delivers(const struct tu_env *env, const char *scheme, const char *mode)
{
	int port;

	make_certs(env);
	port = sink_start(env, mode, "server", NULL, NULL);
	job_mailer(env, scheme, port);
	job_send(JOB_DONE, NULL);
	assert_int_equal(tu_countf(env->db_path, SQL_J_SENT, (long long)J.order_id), 1);
	check_ticket_delivered(env);
	/* a later delivery of the job finds it sent and sends nothing */
	job_send(JOB_DONE, NULL);
	assert_int_equal(sink_count(env), 1);
}

/* (1) The ticket email over STARTTLS, then over SMTPS. */
static void test_job_starttls_delivers(void **state)
{
	job_delivers(*state, "smtp", "--require-starttls");
}

static void test_job_smtps_delivers(void **state)
{
	job_delivers(*state, "smtps", "--implicit-tls");
}

/* (2) A sink that refuses to be safe: a transient failure naming why, the
 * claim given back, nothing delivered; then a good sink and a new mailer,
 * and the next run sends exactly one message. */
static void job_refused_then_delivered(const struct tu_env *env, const char *mode,
				       const char *cert, const char *why)
{
	struct job_result res;
	int port;

	make_certs(env);
	port = sink_start(env, mode, cert, NULL, NULL);
	job_mailer(env, "smtp", port);
	job_send(JOB_FAIL, &res);
	if (!strstr(res.error, why))
		fail_msg("error '%s' should say '%s'", res.error, why);
	assert_int_equal(tu_countf(env->db_path, SQL_J_RELEASED, (long long)J.order_id), 1);
	assert_int_equal(tu_countf(env->db_path, SQL_J_SENT, (long long)J.order_id), 0);
	assert_int_equal(sink_count(env), 0);
	sink_stop();

	port = sink_start(env, "--require-starttls", "server", NULL, NULL);
	job_mailer(env, "smtp", port);
	job_send(JOB_DONE, NULL);
	assert_int_equal(tu_countf(env->db_path, SQL_J_SENT, (long long)J.order_id), 1);
	check_ticket_delivered(env);
	job_send(JOB_DONE, NULL);
	assert_int_equal(sink_count(env), 1);
}

static void test_job_no_starttls_fails_then_delivers(void **state)
{
	job_refused_then_delivered(*state, "--no-starttls", NULL, "STARTTLS");
}

static void test_job_wrong_host_fails_then_delivers(void **state)
{
	job_refused_then_delivered(*state, "--require-starttls", "wrong", "certificate");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_smtp_urls),
		cmocka_unit_test_setup_teardown(test_password_file_checks, setup, teardown),
		cmocka_unit_test_setup_teardown(test_starttls_delivers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_smtps_delivers, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_starttls_sends_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wrong_host_certificate_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unknown_ca_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auth_with_password_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rejected_recipient_is_permanent, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_silent_server_times_out, setup, teardown),
		cmocka_unit_test_setup_teardown(test_job_starttls_delivers, job_setup,
						job_teardown),
		cmocka_unit_test_setup_teardown(test_job_smtps_delivers, job_setup, job_teardown),
		cmocka_unit_test_setup_teardown(test_job_no_starttls_fails_then_delivers,
						job_setup, job_teardown),
		cmocka_unit_test_setup_teardown(test_job_wrong_host_fails_then_delivers,
						job_setup, job_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
