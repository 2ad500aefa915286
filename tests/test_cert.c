/*
 * test_cert.c: the box CA and server certificates (cert.h), `stagedoor tls
 * init|show`, and the TLS client (cert_conn.c), judged by real tools: the
 * openssl command reads and verifies what the box made, openssl s_server
 * serves with it, and curl connects with and without the box CA.
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
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench_http.h"
#include "cert.h"
#include "clock.h"
#include "testutil.h"

#define DAY_MS (86400LL * 1000)
#define OUT_MAX 65536

extern char **environ;

static pid_t server_pid;	/* openssl s_server, killed by teardown */

static int teardown(void **state)
{
	if (server_pid > 0) {
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
		server_pid = 0;
	}
	return tu_teardown(state);
}

/* ======================== helpers ======================================== */

/* file_text: the file at path into buf (size bytes, NUL-terminated); its
 * length, or -1 when it cannot be read.  No allocation: a failed assertion
 * after it leaks nothing. */
static long file_text(const char *path, char *buf, size_t size)
{
	FILE *f = fopen(path, "rb");
	size_t n;

	buf[0] = '\0';
	if (!f)
		return -1;
	n = fread(buf, 1, size - 1, f);
	buf[n] = '\0';
	fclose(f);
	return (long)n;
}

/* run: argv (a program on PATH) with stdout and stderr into out; the exit
 * status. */
static int run(const struct tu_env *e, const char *const *argv, char *out, size_t size)
{
	char path[300];
	int rc;

	snprintf(path, sizeof path, "%s/cmd.out", e->dir);
	rc = tu_exec(argv, path, path, 30000);
	file_text(path, out, size);
	unlink(path);
	return rc;
}

/* tls: bin/stagedoor tls ... with the state folder e->dir/box (or dir). */
static int tls(const char *state_dir, char *out, char *err, const char *const *args)
{
	const char *argv[24];
	int n = 0, i;

	argv[n++] = "tls";
	for (i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n++] = "--state-dir";
	argv[n++] = state_dir;
	argv[n] = NULL;
	return tu_run(out, out ? OUT_MAX : 0, err, err ? OUT_MAX : 0, argv);
}

struct box {
	char state[300];
	char tls[320];
	char ca_pem[340], ca_key[340], srv_pem[340], srv_key[340];
};

static void box_names(struct box *b, const struct tu_env *e, const char *name)
{
	snprintf(b->state, sizeof b->state, "%s/%s", e->dir, name);
	snprintf(b->tls, sizeof b->tls, "%s/tls", b->state);
	snprintf(b->ca_pem, sizeof b->ca_pem, "%s/ca.pem", b->tls);
	snprintf(b->ca_key, sizeof b->ca_key, "%s/ca.key", b->tls);
	snprintf(b->srv_pem, sizeof b->srv_pem, "%s/server.pem", b->tls);
	snprintf(b->srv_key, sizeof b->srv_key, "%s/server.key", b->tls);
}

/* openssl x509 -in path -noout WHAT... into out; must succeed. */
static void x509(const struct tu_env *e, const char *path, const char *a, const char *b,
		 char *out, size_t size)
{
	const char *argv[] = { "openssl", "x509", "-in", path, "-noout", a, b, NULL };

	assert_int_equal(run(e, argv, out, size), 0);
}

/* the value after '=' of openssl's one-line answer ("serial=ABCD\n") */
static void after_eq(const char *line, char *out, size_t size)
{
	const char *p = strchr(line, '=');

	assert_non_null(p);
	snprintf(out, size, "%s", p + 1);
	out[strcspn(out, "\r\n")] = '\0';
}

/* openssl's "notBefore=Dec  2 09:40:50 2026 GMT" as ms since the epoch */
static int64_t openssl_date_ms(const char *line)
{
	struct tm tm;
	const char *p = strchr(line, '=');

	assert_non_null(p);
	memset(&tm, 0, sizeof tm);
	assert_non_null(strptime(p + 1, "%b %d %H:%M:%S %Y GMT", &tm));
	return (int64_t)timegm(&tm) * 1000;
}

static int mode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return (int)(st.st_mode & 07777);
}

static int exists(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0;
}

/* one line on stderr, "stagedoor: ..." */
static void one_line_error(const char *err)
{
	assert_true(strncmp(err, "stagedoor: ", 11) == 0);
	assert_non_null(strchr(err, '\n'));
	assert_true(strchr(err, '\n')[1] == '\0');
}

/* a port nothing listens on now (bound and released) */
static int free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	assert_true(fd >= 0);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* dial: a TCP connection to 127.0.0.1:port, -1 when refused. */
static int dial(int port)
{
	struct sockaddr_in a;
	struct timeval tv = { 10, 0 };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* s_server: openssl s_server -www with the box's server files on port. */
static void s_server(const struct tu_env *e, const struct box *b, int port)
{
	char portbuf[16], log[300];
	const char *argv[] = { "openssl", "s_server", "-cert", b->srv_pem, "-key", b->srv_key,
			       "-accept", portbuf, "-www", "-quiet", NULL };
	posix_spawn_file_actions_t fa;
	int i, fd;

	snprintf(portbuf, sizeof portbuf, "%d", port);
	snprintf(log, sizeof log, "%s/s_server.log", e->dir);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	assert_int_equal(posix_spawnp(&server_pid, "openssl", &fa, NULL, (char *const *)argv,
				      environ), 0);
	posix_spawn_file_actions_destroy(&fa);
	for (i = 0; i < 500; i++) {
		if ((fd = dial(port)) >= 0) {
			close(fd);
			return;
		}
		tu_sleep_ms(10);
	}
	fail_msg("openssl s_server did not listen on %d", port);
}

/* ======================== tls init, judged by openssl ==================== */

static void test_init_verifies_with_openssl(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], err[OUT_MAX], o[OUT_MAX];
	const char *args[] = { "init", "--name", "box.example", "--ip", "192.0.2.10", NULL };
	struct box b;
	int64_t made_ms = (int64_t)time(NULL) * 1000, nb, na;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, err, args), 0);
	assert_non_null(strstr(out, "made a new box CA"));
	assert_non_null(strstr(out, "made the server certificate"));
	assert_non_null(strstr(out, "http_tls_cert = "));
	assert_non_null(strstr(out, "/tls/server.pem\n"));
	assert_non_null(strstr(out, "http_tls_key = "));
	assert_non_null(strstr(out, "/tls/server.key\n"));

	/* the chain verifies with a TLS stack that is not mbedTLS */
	{
		const char *argv[] = { "openssl", "verify", "-CAfile", b.ca_pem, b.srv_pem, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
		assert_non_null(strstr(o, "server.pem: OK"));
	}
	/* exactly the names asked for, no defaults mixed in */
	x509(e, b.srv_pem, "-ext", "subjectAltName", o, sizeof o);
	assert_non_null(strstr(o, "DNS:box.example, IP Address:192.0.2.10"));
	assert_null(strstr(o, "localhost"));
	x509(e, b.srv_pem, "-ext", "extendedKeyUsage", o, sizeof o);
	assert_non_null(strstr(o, "TLS Web Server Authentication"));
	x509(e, b.srv_pem, "-ext", "basicConstraints,keyUsage", o, sizeof o);
	assert_non_null(strstr(o, "CA:FALSE"));
	assert_non_null(strstr(o, "Digital Signature"));
	assert_null(strstr(o, "Certificate Sign"));
	x509(e, b.srv_pem, "-subject", "-issuer", o, sizeof o);
	assert_non_null(strstr(o, "subject=CN = box.example, O = Stagedoor Box"));
	assert_non_null(strstr(o, "issuer=CN = Stagedoor Box CA"));
	x509(e, b.ca_pem, "-ext", "basicConstraints,keyUsage", o, sizeof o);
	assert_non_null(strstr(o, "critical"));
	assert_non_null(strstr(o, "CA:TRUE, pathlen:0"));
	assert_non_null(strstr(o, "Certificate Sign, CRL Sign"));
	x509(e, b.ca_pem, "-subject", "-text", o, sizeof o);
	assert_non_null(strstr(o, "subject=CN = Stagedoor Box CA"));
	assert_non_null(strstr(o, "O = Stagedoor Box"));
	assert_non_null(strstr(o, "ecdsa-with-SHA256"));
	assert_non_null(strstr(o, "P-256"));
	/* a 16-byte serial: 32 hex digits */
	x509(e, b.srv_pem, "-serial", "-noout", o, sizeof o);
	assert_int_equal(strcspn(o + 7, "\n"), 32);

	/* validity: from an hour back, 398 days / 3650 days exactly */
	x509(e, b.srv_pem, "-startdate", "-noout", o, sizeof o);
	nb = openssl_date_ms(o);
	x509(e, b.srv_pem, "-enddate", "-noout", o, sizeof o);
	na = openssl_date_ms(o);
	assert_true(llabs(nb - (made_ms - 3600 * 1000)) <= 60 * 1000);
	assert_int_equal(na - nb, 398 * DAY_MS);
	x509(e, b.ca_pem, "-startdate", "-noout", o, sizeof o);
	nb = openssl_date_ms(o);
	x509(e, b.ca_pem, "-enddate", "-noout", o, sizeof o);
	na = openssl_date_ms(o);
	assert_int_equal(na - nb, 3650 * DAY_MS);
	x509(e, b.srv_pem, "-checkend", "34300800", o, sizeof o);	/* 397 days: still valid */
	{
		const char *argv[] = { "openssl", "x509", "-in", b.srv_pem, "-noout", "-checkend",
				       "34387200", NULL };			/* 398 days */
		assert_int_equal(run(e, argv, o, sizeof o), 1);
	}

	/* the keys are the box user's alone, and so are the folders */
	assert_int_equal(mode_of(b.ca_key), 0600);
	assert_int_equal(mode_of(b.srv_key), 0600);
	assert_int_equal(mode_of(b.tls), 0700);
	assert_int_equal(mode_of(b.state), 0700);
	/* no temp file left: ca.pem ca.key server.pem server.key lock */
	assert_int_equal(tu_count_files(b.tls), 5);
	/* the keys parse for openssl and are P-256 */
	{
		const char *argv[] = { "openssl", "pkey", "-in", b.srv_key, "-noout", "-text", NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
		assert_non_null(strstr(o, "P-256"));
	}
}

/* No --name or --ip: this machine's names and the loopback addresses. */
static void test_init_default_names(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], o[OUT_MAX];
	const char *args[] = { "init", NULL };
	char host[256], want[300];
	struct box b;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, NULL, args), 0);
	x509(e, b.srv_pem, "-ext", "subjectAltName", o, sizeof o);
	assert_non_null(strstr(o, "DNS:localhost"));
	assert_non_null(strstr(o, "IP Address:127.0.0.1"));
	assert_non_null(strstr(o, "IP Address:0:0:0:0:0:0:0:1"));
	assert_int_equal(gethostname(host, sizeof host), 0);
	if (strcmp(host, "localhost") != 0 && !strchr(host, '.') && !strchr(host, '_')) {
		snprintf(want, sizeof want, "DNS:%s,", host);
		assert_non_null(strstr(o, want));
		snprintf(want, sizeof want, "DNS:%s.local,", host);
		assert_non_null(strstr(o, want));
	}
}

/* ======================== tls show ======================================= */

static void test_show_matches_openssl(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], err[OUT_MAX], o[OUT_MAX];
	const char *init[] = { "init", "--name", "box.example", "--ip", "192.0.2.10", NULL };
	const char *show[] = { "show", NULL };
	const char *show_json[] = { "show", "--json", NULL };
	char fpr[128], srv_fpr[128], serial[80], want[300];
	struct box b, none;

	box_names(&b, e, "box");
	box_names(&none, e, "none");
	/* nothing there yet: a clear message and a failure, nothing made */
	assert_int_equal(tls(none.state, out, err, show), 1);
	one_line_error(err);
	assert_non_null(strstr(err, "no box CA in "));
	assert_non_null(strstr(err, "run stagedoor tls init"));
	assert_false(exists(none.state));

	assert_int_equal(tls(b.state, out, NULL, init), 0);
	x509(e, b.ca_pem, "-fingerprint", "-sha256", o, sizeof o);
	after_eq(o, fpr, sizeof fpr);
	assert_int_equal(strlen(fpr), 95);
	/* init prints the CA's fingerprint too */
	snprintf(want, sizeof want, "CA fingerprint (SHA-256): %s\n", fpr);
	assert_non_null(strstr(out, want));
	x509(e, b.srv_pem, "-fingerprint", "-sha256", o, sizeof o);
	after_eq(o, srv_fpr, sizeof srv_fpr);
	x509(e, b.srv_pem, "-serial", "-noout", o, sizeof o);
	after_eq(o, serial, sizeof serial);

	assert_int_equal(tls(b.state, out, err, show), 0);
	snprintf(want, sizeof want, "box CA: ");
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "/tls/ca.pem\n"));
	snprintf(want, sizeof want, "SHA-256  %s\n", fpr);
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "GET /ca.pem"));
	assert_non_null(strstr(out, "names    box.example, 192.0.2.10\n"));
	assert_non_null(strstr(out, "(397 days left)"));
	assert_non_null(strstr(out, serial));
	assert_non_null(strstr(out, "(matches, mode 0600)"));

	assert_int_equal(tls(b.state, out, err, show_json), 0);
	snprintf(want, sizeof want, "\"fingerprint_sha256\":\"%s\"", fpr);
	assert_non_null(strstr(out, want));
	snprintf(want, sizeof want, "\"fingerprint_sha256\":\"%s\"", srv_fpr);
	assert_non_null(strstr(out, want));
	assert_non_null(strstr(out, "\"dns\":[\"box.example\"],\"ip\":[\"192.0.2.10\"]"));
	assert_non_null(strstr(out, "\"days_left\":397"));
	assert_non_null(strstr(out, "\"days_left\":3649"));
	assert_non_null(strstr(out, "\"server_key_ok\":true"));

	/* a server key others may read: show says so and fails */
	assert_int_equal(chmod(b.srv_key, 0644), 0);
	assert_int_equal(tls(b.state, out, err, show), 1);
	assert_non_null(strstr(err, "chmod 600"));
	assert_int_equal(chmod(b.srv_key, 0600), 0);
	/* a box with a CA but no server certificate */
	assert_int_equal(unlink(b.srv_pem), 0);
	assert_int_equal(tls(b.state, out, err, show), 1);
	assert_non_null(strstr(err, "no server certificate in "));
}

/* ======================== kept, renewed ================================== */

static void test_init_twice_keeps_renew_reissues(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], err[OUT_MAX], o[OUT_MAX], ca1[8192], srv1[8192], key1[8192],
		buf[8192], san1[1024];
	const char *init[] = { "init", "--name", "box.example", "--ip", "192.0.2.10", NULL };
	const char *again[] = { "init", NULL };
	const char *other[] = { "init", "--name", "other.example", NULL };
	const char *renew[] = { "renew", NULL };
	const char *renew_new[] = { "renew", "--name", "door-2.local", NULL };
	const char *renew_public[] = { "renew", "--name", "new.example", NULL };
	char serial1[80], serial2[80];
	struct box b;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	assert_true(file_text(b.ca_pem, ca1, sizeof ca1) > 0);
	assert_true(file_text(b.srv_pem, srv1, sizeof srv1) > 0);
	assert_true(file_text(b.srv_key, key1, sizeof key1) > 0);
	x509(e, b.srv_pem, "-serial", "-noout", o, sizeof o);
	after_eq(o, serial1, sizeof serial1);
	x509(e, b.srv_pem, "-ext", "subjectAltName", san1, sizeof san1);

	/* again: every file as it was, and the output says so */
	assert_int_equal(tls(b.state, out, NULL, again), 0);
	assert_non_null(strstr(out, "kept the box CA"));
	assert_non_null(strstr(out, "kept the server certificate"));
	assert_non_null(strstr(out, "tls renew"));
	file_text(b.ca_pem, buf, sizeof buf);
	assert_string_equal(buf, ca1);
	file_text(b.srv_pem, buf, sizeof buf);
	assert_string_equal(buf, srv1);
	file_text(b.srv_key, buf, sizeof buf);
	assert_string_equal(buf, key1);
	/* new names without --renew: kept, and told */
	assert_int_equal(tls(b.state, out, NULL, other), 0);
	assert_non_null(strstr(out, "not applied"));
	file_text(b.srv_pem, buf, sizeof buf);
	assert_string_equal(buf, srv1);

	/* --renew: a new key and serial, the same names, under the same CA */
	assert_int_equal(tls(b.state, out, err, renew), 0);
	assert_non_null(strstr(out, "kept the box CA"));
	assert_non_null(strstr(out, "renewed the server certificate"));
	file_text(b.ca_pem, buf, sizeof buf);
	assert_string_equal(buf, ca1);
	file_text(b.srv_key, buf, sizeof buf);
	assert_string_not_equal(buf, key1);
	x509(e, b.srv_pem, "-serial", "-noout", o, sizeof o);
	after_eq(o, serial2, sizeof serial2);
	assert_string_not_equal(serial1, serial2);
	x509(e, b.srv_pem, "-ext", "subjectAltName", o, sizeof o);
	assert_string_equal(o, san1);
	{
		const char *argv[] = { "openssl", "verify", "-CAfile", b.ca_pem, b.srv_pem, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
	}
	assert_int_equal(mode_of(b.srv_key), 0600);
	assert_int_equal(tu_count_files(b.tls), 5);

	/* renew with names: those names only */
	assert_int_equal(tls(b.state, out, err, renew_new), 0);
	x509(e, b.srv_pem, "-ext", "subjectAltName", o, sizeof o);
	assert_non_null(strstr(o, "DNS:door-2.local\n"));
	assert_null(strstr(o, "box.example"));
	assert_null(strstr(o, "192.0.2.10"));
	/* a public name the CA was not made for: refused, nothing changed */
	file_text(b.srv_pem, srv1, sizeof srv1);
	assert_int_equal(tls(b.state, out, err, renew_public), 1);
	one_line_error(err);
	assert_non_null(strstr(err, "may not sign for new.example"));
	file_text(b.srv_pem, buf, sizeof buf);
	assert_string_equal(buf, srv1);
}

/* mint: a certificate for name (a fresh key, subjectAltName DNS:name) signed
 * with the CA's key by openssl, as whoever took the box would make one;
 * into path_pem and path_key */
static void mint(const struct tu_env *e, const struct box *b, const char *name,
		 const char *path_pem, const char *path_key)
{
	char csr[340], subj[300], san[300], o[4096];
	const char *req[] = { "openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
			      "ec_paramgen_curve:P-256", "-nodes", "-keyout", path_key, "-subj",
			      subj, "-addext", san, "-out", csr, NULL };
	const char *sign[] = { "openssl", "x509", "-req", "-in", csr, "-CA", b->ca_pem, "-CAkey",
			       b->ca_key, "-set_serial", "7", "-days", "30", "-copy_extensions",
			       "copy", "-out", path_pem, NULL };

	snprintf(csr, sizeof csr, "%s/mint.csr", e->dir);
	snprintf(subj, sizeof subj, "/CN=%s", name);
	snprintf(san, sizeof san, "subjectAltName=DNS:%s", name);
	if (run(e, req, o, sizeof o) != 0 || run(e, sign, o, sizeof o) != 0)
		fail_msg("openssl could not mint a certificate for %s: %s", name, o);
}

/* The box CA signs for the box only: critical name constraints and path
 * length 0, so that a certificate minted with its key for another site
 * fails openssl verify and curl, while one for a private name passes. */
static void test_ca_signs_only_for_the_box(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], o[OUT_MAX];
	const char *init[] = { "init", "--name", "box.venue.example", "--ip", "192.0.2.10", NULL };
	char evil_pem[340], evil_key[340], good_pem[340], good_key[340], url[128], res[128];
	struct box b, evil, good;
	int port;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	x509(e, b.ca_pem, "-text", "-noout", o, sizeof o);
	assert_non_null(strstr(o, "X509v3 Name Constraints: critical"));
	assert_non_null(strstr(o, "CA:TRUE, pathlen:0"));
	assert_non_null(strstr(o, "DNS:box.venue.example"));
	assert_non_null(strstr(o, "IP:192.0.2.10/255.255.255.255"));
	assert_non_null(strstr(o, "IP:192.168.0.0/255.255.0.0"));

	snprintf(evil_pem, sizeof evil_pem, "%s/evil.pem", e->dir);
	snprintf(evil_key, sizeof evil_key, "%s/evil.key", e->dir);
	snprintf(good_pem, sizeof good_pem, "%s/good.pem", e->dir);
	snprintf(good_key, sizeof good_key, "%s/good.key", e->dir);
	mint(e, &b, "accounts.google.com", evil_pem, evil_key);
	mint(e, &b, "door.local", good_pem, good_key);
	{
		const char *v_evil[] = { "openssl", "verify", "-CAfile", b.ca_pem, evil_pem, NULL };
		const char *v_good[] = { "openssl", "verify", "-CAfile", b.ca_pem, good_pem, NULL };

		assert_int_not_equal(run(e, v_evil, o, sizeof o), 0);
		assert_non_null(strstr(o, "permitted subtree violation"));
		assert_int_equal(run(e, v_good, o, sizeof o), 0);
	}
	/* curl, trusting the box CA, meets a server showing each */
	evil = b;
	snprintf(evil.srv_pem, sizeof evil.srv_pem, "%s", evil_pem);
	snprintf(evil.srv_key, sizeof evil.srv_key, "%s", evil_key);
	good = evil;
	snprintf(good.srv_pem, sizeof good.srv_pem, "%s", good_pem);
	snprintf(good.srv_key, sizeof good.srv_key, "%s", good_key);
	for (int i = 0; i < 2; i++) {
		const char *name = i == 0 ? "accounts.google.com" : "door.local";
		const char *argv[] = { "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
				       "--max-time", "20", "--cacert", b.ca_pem, "--resolve", res,
				       url, NULL };
		int rc;

		port = free_port();
		s_server(e, i == 0 ? &evil : &good, port);
		snprintf(res, sizeof res, "%s:%d:127.0.0.1", name, port);
		snprintf(url, sizeof url, "https://%s:%d/", name, port);
		rc = run(e, argv, o, sizeof o);
		kill(server_pid, SIGKILL);
		waitpid(server_pid, NULL, 0);
		server_pid = 0;
		if (i == 0 && rc != 60)
			fail_msg("curl trusted a certificate for %s from the box CA: %d %s", name, rc,
				 o);
		if (i == 1 && (rc != 0 || strcmp(o, "200") != 0))
			fail_msg("curl refused %s: %d %s", name, rc, o);
	}
}

/* The CA's key kept off the box: init writes it to the file given and not
 * to tls/, renew needs it and takes it from --ca-key; an existing box's key
 * is moved off; no key file is ever written over. */
static void test_ca_key_off_the_box(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], err[OUT_MAX], o[OUT_MAX], srv1[8192], buf[8192];
	char usb[300], usb2[340];
	const char *init[] = { "init", "--name", "box.local", "--ca-key-out", usb, NULL };
	const char *renew[] = { "renew", NULL };
	const char *renew_key[] = { "renew", "--ca-key", usb, NULL };
	const char *move[] = { "init", "--ca-key-out", usb2, NULL };
	struct box b, c;

	snprintf(usb, sizeof usb, "%s/usb.key", e->dir);
	snprintf(usb2, sizeof usb2, "%s/usb2.key", e->dir);
	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, err, init), 0);
	assert_false(exists(b.ca_key));
	assert_int_equal(mode_of(usb), 0600);
	assert_non_null(strstr(out, "kept off the box"));
	assert_int_equal(cert_key_check(b.ca_pem, usb), SD_OK);
	file_text(b.srv_pem, srv1, sizeof srv1);

	assert_int_equal(tls(b.state, out, err, renew), 1);
	one_line_error(err);
	assert_non_null(strstr(err, "--ca-key"));
	file_text(b.srv_pem, buf, sizeof buf);
	assert_string_equal(buf, srv1);
	assert_int_equal(tls(b.state, out, err, renew_key), 0);
	assert_non_null(strstr(out, "renewed the server certificate"));
	{
		const char *argv[] = { "openssl", "verify", "-CAfile", b.ca_pem, b.srv_pem, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
	}
	/* a second box may not write its new key over the first's */
	box_names(&c, e, "box2");
	assert_int_equal(tls(c.state, out, err, init), 1);
	assert_non_null(strstr(err, "exists"));
	assert_int_equal(cert_key_check(b.ca_pem, usb), SD_OK);
	assert_false(exists(c.ca_pem));

	/* a box whose key is in tls/: moved off */
	assert_int_equal(tls(c.state, out, err, (const char *const[]){ "init", NULL }), 0);
	assert_true(exists(c.ca_key));
	assert_int_equal(tls(c.state, out, err, move), 0);
	assert_false(exists(c.ca_key));
	assert_int_equal(cert_key_check(c.ca_pem, usb2), SD_OK);
	assert_int_equal(tls(c.state, out, err, move), 1);
}

/* --new-ca: a new CA in place of the old (a box made before name
 * constraints, or a new public name), and a server certificate under it. */
static void test_new_ca(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], err[OUT_MAX], o[OUT_MAX];
	const char *init[] = { "init", "--name", "box.local", NULL };
	const char *new_ca[] = { "init", "--new-ca", "--name", "tickets.venue.example", NULL };
	char fpr1[128], fpr2[128];
	struct box b;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, err, init), 0);
	x509(e, b.ca_pem, "-fingerprint", "-sha256", o, sizeof o);
	after_eq(o, fpr1, sizeof fpr1);
	assert_int_equal(tls(b.state, out, err, new_ca), 0);
	assert_non_null(strstr(out, "in place of the old one"));
	x509(e, b.ca_pem, "-fingerprint", "-sha256", o, sizeof o);
	after_eq(o, fpr2, sizeof fpr2);
	assert_string_not_equal(fpr1, fpr2);
	x509(e, b.srv_pem, "-ext", "subjectAltName", o, sizeof o);
	assert_non_null(strstr(o, "DNS:tickets.venue.example"));
	{
		const char *argv[] = { "openssl", "verify", "-CAfile", b.ca_pem, b.srv_pem, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
	}
	assert_int_equal(tls(b.state, out, err, (const char *const[]){ "show", NULL }), 0);
	assert_non_null(strstr(out, "signs only for the box's names"));
}

/* ca.pem lost but ca.key kept: made again from the key, and certificates
 * it signed before still verify; ca.key lost: nothing can be signed. */
static void test_ca_remade_or_refused(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], err[OUT_MAX], o[OUT_MAX], srv1[8192], buf[8192];
	const char *init[] = { "init", "--name", "box.example", NULL };
	const char *renew[] = { "renew", NULL };
	char fpr1[128], fpr2[128];
	struct box b;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	x509(e, b.ca_pem, "-fingerprint", "-sha256", o, sizeof o);
	after_eq(o, fpr1, sizeof fpr1);
	file_text(b.srv_pem, srv1, sizeof srv1);

	assert_int_equal(unlink(b.ca_pem), 0);
	assert_int_equal(tls(b.state, out, err, init), 0);
	assert_non_null(strstr(out, "made again from the existing ca.key"));
	x509(e, b.ca_pem, "-fingerprint", "-sha256", o, sizeof o);
	after_eq(o, fpr2, sizeof fpr2);
	assert_string_not_equal(fpr1, fpr2);
	assert_int_equal(cert_key_check(b.ca_pem, b.ca_key), SD_OK);
	{
		const char *argv[] = { "openssl", "verify", "-CAfile", b.ca_pem, b.srv_pem, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
	}

	assert_int_equal(unlink(b.ca_key), 0);
	assert_int_equal(tls(b.state, out, err, renew), 1);
	one_line_error(err);
	assert_non_null(strstr(err, "ca.key"));
	file_text(b.srv_pem, buf, sizeof buf);
	assert_string_equal(buf, srv1);
}

/* ======================== bad input ====================================== */

static void test_bad_input_writes_nothing(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], err[OUT_MAX], srv1[8192], buf[8192];
	const char *bad[][6] = {
		{ "init", "--ip", "192.0.2.300", NULL },
		{ "init", "--ip", "", NULL },
		{ "init", "--ip", "fe80::1%eth0", NULL },
		{ "init", "--name", "box.example", "--ip=1.2.3", NULL },
		{ "init", "--name", "bad_name.example", NULL },
		{ "init", "--name", "-box.example", NULL },
		{ "init", "--name", "192.0.2.10", NULL },
		{ "init", "--name=", NULL },
		{ "init", "--name", NULL },
		{ "init", "--ip", NULL },
		{ "init", "--bogus", NULL },
		{ "init", "--renew=yes", NULL },
		{ "init", "stray", NULL },
		{ "show", "--name", "x", NULL },
		{ "frob", NULL },
	};
	const char *init[] = { "init", "--name", "box.example", NULL };
	const char *renew_bad[] = { "init", "--renew", "--ip", "10.0.0.256", NULL };
	const char *none[] = { NULL };
	struct box b;
	size_t i;

	box_names(&b, e, "box");
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (tls(b.state, out, err, bad[i]) != 2)
			fail_msg("tls %s %s %s: not exit 2", bad[i][0], bad[i][1] ? bad[i][1] : "",
				 bad[i][1] && bad[i][2] ? bad[i][2] : "");
		one_line_error(err);
		assert_false(exists(b.state));
	}
	assert_int_equal(tls(b.state, out, err, none), 2);
	assert_non_null(strstr(err, "usage"));
	assert_false(exists(b.state));
	assert_int_equal(tls(b.state, out, err, bad[0]), 2);
	assert_non_null(strstr(err, "192.0.2.300"));

	/* on a box that has its files: a bad --renew changes none of them */
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	file_text(b.srv_pem, srv1, sizeof srv1);
	assert_int_equal(tls(b.state, out, err, renew_bad), 2);
	file_text(b.srv_pem, buf, sizeof buf);
	assert_string_equal(buf, srv1);
}

/* ======================== real handshakes ================================ */

static void test_handshake_curl_and_client(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], o[OUT_MAX];
	const char *init[] = { "init", "--name", "localhost", "--ip", "127.0.0.1", NULL };
	char url[80], url_ip[80], resp[4096];
	struct cert_client *cl = NULL, *stranger = NULL;
	struct cert_conn *t = NULL;
	struct box b, other;
	size_t got, have = 0;
	int port, fd;

	box_names(&b, e, "box");
	box_names(&other, e, "other");
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	assert_int_equal(tls(other.state, out, NULL, init), 0);
	port = free_port();
	s_server(e, &b, port);
	snprintf(url, sizeof url, "https://localhost:%d/", port);
	snprintf(url_ip, sizeof url_ip, "https://127.0.0.1:%d/", port);

	/* curl (OpenSSL) trusts the box CA, by DNS name and by address */
	{
		const char *argv[] = { "curl", "-sS", "--max-time", "20", "--cacert", b.ca_pem, url,
				       NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
		assert_non_null(strstr(o, "s_server"));
	}
	{
		const char *argv[] = { "curl", "-sS", "--max-time", "20", "--cacert", b.ca_pem,
				       url_ip, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
	}
	/* without the CA, or with another box's, verification fails (60) */
	{
		const char *argv[] = { "curl", "-sS", "--max-time", "20", url, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 60);
	}
	{
		const char *argv[] = { "curl", "-sS", "--max-time", "20", "--cacert", other.ca_pem,
				       url, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 60);
	}

	/* the box's own client (mbedTLS) */
	assert_int_equal(cert_client_new(b.ca_pem, &cl), SD_OK);
	assert_true((fd = dial(port)) >= 0);
	assert_int_equal(cert_conn_open(cl, fd, "localhost", &t), SD_OK);
	assert_string_equal(cert_conn_version(t), "TLSv1.2");
	assert_int_equal(cert_conn_write(t, "GET / HTTP/1.0\r\n\r\n", 18), SD_OK);
	do {
		assert_int_equal(cert_conn_read(t, resp + have, sizeof resp - 1 - have, &got),
				 SD_OK);
		have += got;
	} while (got && have < sizeof resp - 1);
	resp[have] = '\0';
	cert_conn_close(t);
	t = NULL;
	close(fd);
	assert_non_null(strstr(resp, "HTTP/1.0 200"));

	/* a name the certificate does not hold: refused */
	assert_true((fd = dial(port)) >= 0);
	assert_int_equal(cert_conn_open(cl, fd, "box.example", &t), SD_IO);
	assert_null(t);
	assert_non_null(strstr(err_msg(), "refused"));
	close(fd);
	/* another box's CA: refused */
	assert_int_equal(cert_client_new(other.ca_pem, &stranger), SD_OK);
	assert_true((fd = dial(port)) >= 0);
	assert_int_equal(cert_conn_open(stranger, fd, "localhost", &t), SD_IO);
	assert_non_null(strstr(err_msg(), "refused"));
	close(fd);
	cert_client_free(stranger);
	cert_client_free(cl);
	/* a client needs a CA file that is one */
	assert_int_equal(cert_client_new(b.srv_key, &cl), SD_INVALID);
	assert_null(cl);
}

/* serve_tls_on: `stagedoor serve` on host:port with the box's TLS files
 * (cert: server.pem or another), its log at e->dir/serve-<port>.log; the
 * pid, killed by tu_kill_spawned at teardown. */
static pid_t serve_tls_on(const struct tu_env *e, const struct box *b, const char *cert,
			  const char *key, const char *host, int port, char *log, size_t size)
{
	char listen[64];
	pid_t pid;

	snprintf(listen, sizeof listen, "%s:%d", host, port);
	snprintf(log, size, "%s/serve-%d.log", e->dir, port);
	setenv("STAGEDOOR_HTTP_TLS_CERT", cert, 1);
	setenv("STAGEDOOR_HTTP_TLS_KEY", key, 1);
	pid = tu_spawn((const char *const[]){ "serve", "--db", e->db_path, "--state-dir", b->state,
					      "--http-listen", listen, NULL },
		       log);
	unsetenv("STAGEDOOR_HTTP_TLS_CERT");
	unsetenv("STAGEDOOR_HTTP_TLS_KEY");
	tu_wait_log(log, "msg=\"http listening\"", 1, 20000);
	return pid;
}

static pid_t serve_tls(const struct tu_env *e, const struct box *b, const char *cert,
		       const char *key, int port, char *log, size_t size)
{
	return serve_tls_on(e, b, cert, key, "127.0.0.1", port, log, size);
}

/* Python's ssl as a client: GET url, verifying with cafile ("" for the
 * system's trust store); prints the body's length, exits 3 when the
 * certificate is not trusted. */
static const char py_client[] =
	"import ssl, sys, urllib.request\n"
	"ctx = ssl.create_default_context(cafile=sys.argv[2] or None)\n"
	"try:\n"
	"    body = urllib.request.urlopen(sys.argv[1], context=ctx, timeout=20).read()\n"
	"except urllib.error.URLError as e:\n"
	"    if isinstance(e.reason, ssl.SSLCertVerificationError):\n"
	"        print('untrusted:', e.reason.verify_message)\n"
	"        sys.exit(3)\n"
	"    raise\n"
	"print(len(body), ctx.minimum_version)\n";

/* /metrics shows live sales: on a listener that faces the venue's network
 * it needs a monitor token unless metrics_auth says off; on loopback it is
 * open unless metrics_auth says on. */
static void test_metrics_closed_on_a_network_by_default(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX];
	const char *init[] = { "init", "--name", "localhost", "--ip", "127.0.0.1", NULL };
	char url[96], log[400];
	struct box b;
	pid_t pid;
	int port, i;
	static const struct {
		const char *host, *setting;
		const char *want;
	} cases[] = {
		{ "0.0.0.0", NULL, "401" }, { "0.0.0.0", "off", "200" },
		{ "127.0.0.1", NULL, "200" }, { "127.0.0.1", "on", "401" },
	};

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "init", "--db", e->db_path, "--state-dir",
						       b.state, NULL }), 0);
	for (i = 0; i < (int)(sizeof cases / sizeof cases[0]); i++) {
		const char *argv[] = { "curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}",
				       "--max-time", "20", "--cacert", b.ca_pem, url, NULL };

		if (cases[i].setting)
			setenv("STAGEDOOR_METRICS_AUTH", cases[i].setting, 1);
		port = free_port();
		pid = serve_tls_on(e, &b, b.srv_pem, b.srv_key, cases[i].host, port, log,
				   sizeof log);
		unsetenv("STAGEDOOR_METRICS_AUTH");
		snprintf(url, sizeof url, "https://127.0.0.1:%d/metrics", port);
		assert_int_equal(run(e, argv, out, sizeof out), 0);
		if (strcmp(out, cases[i].want) != 0)
			fail_msg("/metrics on %s, metrics_auth %s: %s, not %s", cases[i].host,
				 cases[i].setting ? cases[i].setting : "unset", out, cases[i].want);
		kill(pid, SIGTERM);
		assert_int_equal(tu_reap(pid, 30000, "serve"), 0);
	}
}

/* The box's own HTTPS server, as devices meet it: curl (OpenSSL) and
 * Python's ssl trust it through the box CA, by name and by address, and
 * fetch /ca.pem, the very file `tls show` names; without that CA both
 * refuse it.  A certificate with fewer than 30 days left is named in the
 * log at start. */
static void test_box_serves_https_to_curl_and_python(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX], ca[8192];
	const char *init[] = { "init", "--name", "localhost", "--ip", "127.0.0.1", NULL };
	char url[96], url_ip[96], script[300], log[400], short_pem[400], short_key[400], got[32];
	struct cert_names names;
	struct box b;
	int port;
	long ca_len;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	assert_int_equal(tu_run(out, sizeof out, NULL, 0,
				(const char *const[]){ "init", "--db", e->db_path, "--state-dir",
						       b.state, NULL }), 0);
	port = free_port();
	serve_tls(e, &b, b.srv_pem, b.srv_key, port, log, sizeof log);
	assert_int_equal(tu_count_in(log, "expires soon"), 0);
	snprintf(url, sizeof url, "https://localhost:%d/ca.pem", port);
	snprintf(url_ip, sizeof url_ip, "https://127.0.0.1:%d/ca.pem", port);
	assert_true((ca_len = file_text(b.ca_pem, ca, sizeof ca)) > 0);

	{
		const char *argv[] = { "curl", "-sS", "--max-time", "20", "--cacert", b.ca_pem, url,
				       NULL };
		assert_int_equal(run(e, argv, out, sizeof out), 0);
		assert_string_equal(out, ca);
	}
	{
		const char *argv[] = { "curl", "-sS", "--max-time", "20", "--cacert", b.ca_pem,
				       url_ip, NULL };
		assert_int_equal(run(e, argv, out, sizeof out), 0);
		assert_string_equal(out, ca);
	}
	{
		const char *argv[] = { "curl", "-sS", "--max-time", "20", url, NULL };
		assert_int_equal(run(e, argv, out, sizeof out), 60);
	}

	snprintf(script, sizeof script, "%s/tls_client.py", e->dir);
	{
		FILE *f = fopen(script, "w");

		assert_non_null(f);
		fputs(py_client, f);
		fclose(f);
	}
	{
		const char *argv[] = { "python3", script, url, b.ca_pem, NULL };
		assert_int_equal(run(e, argv, out, sizeof out), 0);
		snprintf(got, sizeof got, "%ld ", ca_len);
		assert_true(strncmp(out, got, strlen(got)) == 0);
	}
	{
		const char *argv[] = { "python3", script, url_ip, b.ca_pem, NULL };
		assert_int_equal(run(e, argv, out, sizeof out), 0);
	}
	{
		const char *argv[] = { "python3", script, url, "", NULL };
		assert_int_equal(run(e, argv, out, sizeof out), 3);
		assert_non_null(strstr(out, "untrusted"));
	}

	/* a certificate of the same CA with 10 days left: a warning at start */
	snprintf(short_pem, sizeof short_pem, "%s/short.pem", e->dir);
	snprintf(short_key, sizeof short_key, "%s/short.key", e->dir);
	memset(&names, 0, sizeof names);
	assert_int_equal(cert_names_add_dns(&names, "localhost"), SD_OK);
	assert_int_equal(cert_server_make(b.ca_pem, b.ca_key, &names, 10, short_pem, short_key,
					  clock_now_ms()), SD_OK);
	port = free_port();
	serve_tls(e, &b, short_pem, short_key, port, log, sizeof log);
	assert_int_equal(tu_count_in(log, "the HTTPS certificate expires soon"), 1);
	assert_int_equal(tu_count_in(log, "days_left=9"), 1);
}

/* an HTTP/1.1 keep-alive server over TLS (Python's ssl, i.e. OpenSSL) whose
 * answer is how many requests its connection has carried */
static const char py_server[] =
	"import http.server, ssl, sys\n"
	"class H(http.server.BaseHTTPRequestHandler):\n"
	"    protocol_version = 'HTTP/1.1'\n"
	"    def do_GET(self):\n"
	"        self.n = getattr(self, 'n', 0) + 1\n"
	"        b = str(self.n).encode()\n"
	"        self.send_response(200)\n"
	"        self.send_header('Content-Length', str(len(b)))\n"
	"        self.end_headers()\n"
	"        self.wfile.write(b)\n"
	"    def log_message(self, *a):\n"
	"        pass\n"
	"s = http.server.ThreadingHTTPServer(('127.0.0.1', int(sys.argv[1])), H)\n"
	"c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)\n"
	"c.load_cert_chain(sys.argv[2], sys.argv[3])\n"
	"s.socket = c.wrap_socket(s.socket, server_side=True)\n"
	"s.serve_forever()\n";

static void py_tls_server(const struct tu_env *e, const struct box *b, int port)
{
	char portbuf[16], script[300];
	const char *argv[] = { "python3", script, portbuf, b->srv_pem, b->srv_key, NULL };
	FILE *f;
	int i, fd;

	snprintf(portbuf, sizeof portbuf, "%d", port);
	snprintf(script, sizeof script, "%s/tls_server.py", e->dir);
	assert_non_null(f = fopen(script, "w"));
	fputs(py_server, f);
	fclose(f);
	assert_int_equal(posix_spawnp(&server_pid, "python3", NULL, NULL, (char *const *)argv,
				      environ), 0);
	for (i = 0; i < 1000; i++) {
		if ((fd = dial(port)) >= 0) {
			close(fd);
			return;
		}
		tu_sleep_ms(10);
	}
	fail_msg("the Python TLS server did not listen on %d", port);
}

/* one GET through the bench's client: the body, as a number */
static int bench_get(struct bench_http *c)
{
	static const char req[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
	const char *body = NULL;
	size_t len = 0;
	int status = 0;

	if (bench_http_call(c, req, sizeof req - 1, &status, &body, &len) != 0)
		fail_msg("bench_http_call: %s", c->err);
	assert_int_equal(status, 200);
	return atoi(body);
}

/* The bench's HTTP client in TLS mode: keep-alive reuses one session,
 * one_shot makes a handshake per request, a wrong name is refused. */
static void test_bench_http_tls(void **state)
{
	struct tu_env *e = *state;
	static char out[OUT_MAX];
	const char *init[] = { "init", "--name", "localhost", NULL };
	struct cert_client *cl = NULL;
	struct bench_http c;
	struct box b;
	int port, i;

	box_names(&b, e, "box");
	assert_int_equal(tls(b.state, out, NULL, init), 0);
	port = free_port();
	py_tls_server(e, &b, port);
	assert_int_equal(cert_client_new(b.ca_pem, &cl), SD_OK);

	bench_http_init(&c, port);
	bench_http_use_tls(&c, cl, "localhost");
	for (i = 1; i <= 3; i++)
		assert_int_equal(bench_get(&c), i);	/* the same connection each time */
	assert_int_equal(c.dials, 1);
	/* one_shot: this answer ends the kept connection, each next is new */
	c.one_shot = 1;
	assert_int_equal(bench_get(&c), 4);
	assert_int_equal(c.fd, -1);
	for (i = 0; i < 3; i++)
		assert_int_equal(bench_get(&c), 1);
	assert_int_equal(c.dials, 4);
	assert_int_equal(c.fd, -1);
	bench_http_close(&c);

	/* a name the certificate does not hold: the call fails, no socket kept */
	bench_http_init(&c, port);
	bench_http_use_tls(&c, cl, "box.example");
	assert_int_equal(bench_http_dial(&c), -1);
	assert_non_null(strstr(c.err, "refused"));
	assert_int_equal(c.fd, -1);
	bench_http_close(&c);
	cert_client_free(cl);
}

/* bench api --tls: the HTTPS server it starts answers over kept sessions
 * and with a handshake per request, next to plain HTTP, in one run */
static void test_bench_api_tls(void **state)
{
	static char out[OUT_MAX], err[OUT_MAX];
	const char *tls_run[] = { "bench", "api", "--requests", "30", "--clients", "2", "--tls",
				  "--json", NULL };
	const char *plain[] = { "bench", "api", "--requests", "10", "--clients", "1", "--json",
				NULL };
	const char *text[] = { "bench", "api", "--requests", "10", "--clients", "1", "--tls",
			       NULL };
	static const char *const keys[] = {
		"\"transports\":{\"request\":\"GET /v1/orders/{id}\",\"rounds\":3,"
		"\"tls_version\":\"TLSv1.2\"",
		"\"http_keepalive\":{\"requests_per_s\":", "\"http_new_conn\":{\"requests_per_s\":",
		"\"https_keepalive\":{\"requests_per_s\":", "\"https_handshake\":{\"requests_per_s\":",
		"\"connections\":2,", "\"handshakes_per_s\":", "\"server_cpu_ms_per_request\":",
		"\"scans\":{\"request\":\"POST /v1/scan\",\"http_keepalive\":{\"scans_per_s\":",
		"\"https_keepalive\":{\"scans_per_s\":",
	};
	const char *p;
	size_t i;

	(void)state;
	if (tu_run(out, sizeof out, err, sizeof err, tls_run) != 0)
		fail_msg("bench api --tls failed: %s", err);
	for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
		if (!strstr(out, keys[i]))
			fail_msg("no %s in %s", keys[i], out);
	assert_non_null(p = strstr(out, "\"handshakes_per_s\":"));
	assert_true(atof(p + 19) > 0);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, plain), 0);
	assert_non_null(strstr(out, "\"transports\":null}"));
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, text), 0);
	assert_non_null(strstr(out, "https new connection each"));
	assert_non_null(strstr(out, "= full handshakes/s"));
}

/* ======================== the API directly =============================== */

static void test_info_and_days_left(void **state)
{
	struct tu_env *e = *state;
	static char o[OUT_MAX];
	struct cert_names n;
	struct cert_init_report rep;
	struct cert_paths p;
	struct cert_info ca, srv;
	const int64_t now = 1700000000123LL;	/* 2023-11-14T22:13:20.123Z */
	const int64_t nb = 1700000000000LL - 3600 * 1000;
	char fpr[128], path[300];
	int64_t days;
	FILE *f;

	memset(&n, 0, sizeof n);
	assert_int_equal(cert_names_add_dns(&n, "Box.Example"), SD_OK);
	assert_int_equal(cert_names_add_ip(&n, "2001:DB8:0::1"), SD_OK);
	assert_int_equal(cert_names_add_ip(&n, "192.0.2.10"), SD_OK);
	assert_int_equal(cert_init(e->dir, &(struct cert_init_opts){ .names = &n }, now, &rep),
			 SD_OK);
	assert_true(rep.ca_made && rep.server_made && !rep.server_renewed && !rep.ca_remade);
	assert_int_equal(cert_paths(e->dir, &p), SD_OK);

	assert_int_equal(cert_info_load(p.server_cert, &srv), SD_OK);
	assert_true(srv.not_before_ms == nb);
	assert_true(srv.not_after_ms == nb + CERT_SERVER_DAYS * DAY_MS);
	assert_false(srv.is_ca);
	assert_true(srv.server_auth);
	assert_int_equal(srv.names.n_dns, 1);
	assert_string_equal(srv.names.dns[0], "box.example");
	assert_int_equal(srv.names.n_ip, 2);
	assert_string_equal(srv.names.ip[0], "2001:db8::1");
	assert_string_equal(srv.names.ip[1], "192.0.2.10");
	assert_int_equal(srv.names_more, 0);
	assert_non_null(strstr(srv.subject, "CN=box.example"));
	assert_non_null(strstr(srv.issuer, "CN=Stagedoor Box CA"));
	assert_int_equal(strlen(srv.serial), 32);

	assert_int_equal(cert_info_load(p.ca_cert, &ca), SD_OK);
	assert_true(ca.is_ca);
	assert_true(ca.server_auth);	/* what it signs is for servers only */
	assert_true(ca.name_constrained);
	assert_true(ca.not_before_ms == nb);
	assert_true(ca.not_after_ms == nb + CERT_CA_DAYS * DAY_MS);
	assert_int_equal(ca.names.n_dns + ca.names.n_ip, 0);
	assert_string_equal(ca.subject, ca.issuer);
	/* the fingerprint is openssl's */
	x509(e, p.ca_cert, "-fingerprint", "-sha256", o, sizeof o);
	after_eq(o, fpr, sizeof fpr);
	assert_string_equal(ca.fingerprint, fpr);
	/* made for a clock in 2023: openssl agrees it was valid then */
	{
		const char *argv[] = { "openssl", "verify", "-attime", "1700000000", "-CAfile",
				       p.ca_cert, p.server_cert, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
	}

	/* days left, rounded down, negative once expired */
	assert_int_equal(cert_days_left(p.server_cert, now, &days), SD_OK);
	assert_int_equal(days, CERT_SERVER_DAYS - 1);	/* 398 days less the hour back */
	assert_int_equal(cert_days_left(p.server_cert, nb, &days), SD_OK);
	assert_int_equal(days, CERT_SERVER_DAYS);
	assert_int_equal(cert_days_left(p.server_cert, srv.not_after_ms - 1, &days), SD_OK);
	assert_int_equal(days, 0);
	assert_int_equal(cert_days_left(p.server_cert, srv.not_after_ms + 1, &days), SD_OK);
	assert_int_equal(days, -1);
	assert_int_equal(cert_days_left(p.server_cert,
					srv.not_after_ms - (CERT_RENEW_WARN_DAYS - 1) * DAY_MS,
					&days), SD_OK);
	assert_true(days < CERT_RENEW_WARN_DAYS);
	assert_int_equal(cert_days_left(p.ca_cert, nb, &days), SD_OK);
	assert_int_equal(days, CERT_CA_DAYS);

	/* bad files: missing, not a certificate, a key others may read */
	snprintf(path, sizeof path, "%s/none.pem", e->dir);
	assert_int_equal(cert_info_load(path, &srv), SD_NOT_FOUND);
	assert_non_null(strstr(err_msg(), path));
	assert_int_equal(cert_days_left(path, now, &days), SD_NOT_FOUND);
	snprintf(path, sizeof path, "%s/junk.pem", e->dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n", f);
	fclose(f);
	assert_int_equal(cert_info_load(path, &srv), SD_INVALID);
	assert_non_null(strstr(err_msg(), path));
	assert_int_equal(cert_info_load(p.server_key, &srv), SD_INVALID);
	assert_int_equal(cert_key_check(p.server_cert, p.server_key), SD_OK);
	assert_int_equal(cert_key_check(p.server_cert, p.ca_key), SD_INVALID);
	assert_int_equal(chmod(p.server_key, 0640), 0);
	assert_int_equal(cert_key_check(p.server_cert, p.server_key), SD_INVALID);
	assert_non_null(strstr(err_msg(), "0640"));
	/* and init will not keep a server certificate with such a key */
	assert_int_equal(cert_init(e->dir, &(struct cert_init_opts){ 0 }, now, &rep), SD_INVALID);
	assert_non_null(strstr(err_msg(), "tls renew"));
	assert_int_equal(cert_init(e->dir, &(struct cert_init_opts){ .renew = 1 }, now, &rep),
			 SD_OK);
	assert_true(rep.server_renewed);
	assert_int_equal(mode_of(p.server_key), 0600);
	/* renewing kept the names */
	assert_int_equal(cert_info_load(p.server_cert, &srv), SD_OK);
	assert_true(cert_names_equal(&srv.names, &n));
}

static void test_names(void **state)
{
	static const char *const good[] = { "a", "box-1.example", "XN--BCHER-KVA.example",
					    "123.example", "localhost" };
	static const char *const bad[] = { "", "a..b", ".a", "a.", "-a", "a-", "a_b.example",
					   "1.2.3.4", "box.123", "a b", "bo\xc3\xa9.example" };
	static const char *const bad_ip[] = { "", "1.2.3", "192.0.2.256", "fe80::1%eth0",
					      "::g", "01.2.3.4x" };
	char label[64], longname[400];
	struct cert_names n;
	size_t i;

	(void)state;
	memset(&n, 0, sizeof n);
	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		assert_int_equal(cert_names_add_dns(&n, good[i]), SD_OK);
	assert_int_equal(n.n_dns, 5);
	assert_string_equal(n.dns[2], "xn--bcher-kva.example");
	assert_int_equal(cert_names_add_dns(&n, "LOCALHOST"), SD_OK);	/* a duplicate */
	assert_int_equal(n.n_dns, 5);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (cert_names_add_dns(&n, bad[i]) != SD_INVALID)
			fail_msg("'%s' was taken as a DNS name", bad[i]);
	assert_int_equal(n.n_dns, 5);
	memset(label, 'a', 63);
	label[63] = '\0';
	snprintf(longname, sizeof longname, "%s.example", label);
	assert_int_equal(cert_names_add_dns(&n, longname), SD_OK);
	snprintf(longname, sizeof longname, "%sa.example", label);	/* a 64-char label */
	assert_int_equal(cert_names_add_dns(&n, longname), SD_INVALID);
	snprintf(longname, sizeof longname, "%s.%s.%s.%s.ab", label, label, label, label);
	assert_int_equal(cert_names_add_dns(&n, longname), SD_INVALID);	/* 258 characters */

	for (i = 0; i < sizeof bad_ip / sizeof bad_ip[0]; i++)
		if (cert_names_add_ip(&n, bad_ip[i]) != SD_INVALID)
			fail_msg("'%s' was taken as an address", bad_ip[i]);
	assert_int_equal(cert_names_add_ip(&n, "::FFFF:192.0.2.1"), SD_OK);
	assert_string_equal(n.ip[0], "::ffff:192.0.2.1");
	assert_int_equal(cert_names_add_ip(&n, "0:0::1"), SD_OK);
	assert_string_equal(n.ip[1], "::1");
	assert_int_equal(cert_names_add_ip(&n, "::1"), SD_OK);
	assert_int_equal(n.n_ip, 2);

	/* at most CERT_NAMES_MAX of each */
	memset(&n, 0, sizeof n);
	for (i = 0; i < CERT_NAMES_MAX; i++) {
		snprintf(longname, sizeof longname, "h%zu.example", i);
		assert_int_equal(cert_names_add_dns(&n, longname), SD_OK);
		snprintf(longname, sizeof longname, "192.0.2.%zu", i);
		assert_int_equal(cert_names_add_ip(&n, longname), SD_OK);
	}
	assert_int_equal(cert_names_add_dns(&n, "one.more"), SD_INVALID);
	assert_int_equal(cert_names_add_ip(&n, "192.0.2.200"), SD_INVALID);

	assert_int_equal(cert_names_default(&n), SD_OK);
	assert_int_equal(n.n_ip, 2);
	assert_string_equal(n.ip[0], "127.0.0.1");
	assert_string_equal(n.ip[1], "::1");
	assert_string_equal(n.dns[n.n_dns - 1], "localhost");
}

/* Names past what the box makes (a public CA's certificate may hold 100):
 * listed up to CERT_NAMES_MAX, the rest counted; the dates still read. */
static void test_info_of_a_foreign_certificate(void **state)
{
	struct tu_env *e = *state;
	static char o[OUT_MAX], san[4096];
	char key[300], crt[300];
	struct cert_info info;
	size_t off = 0;
	int i;

	off += (size_t)snprintf(san + off, sizeof san - off, "subjectAltName=");
	for (i = 0; i < 20; i++)
		off += (size_t)snprintf(san + off, sizeof san - off, "%sDNS:h%d.example,IP:10.0.0.%d",
					i ? "," : "", i, i);
	snprintf(key, sizeof key, "%s/f.key", e->dir);
	snprintf(crt, sizeof crt, "%s/f.pem", e->dir);
	{
		const char *argv[] = { "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
				       "-keyout", key, "-out", crt, "-days", "30", "-subj",
				       "/CN=foreign.example", "-addext", san, NULL };
		assert_int_equal(run(e, argv, o, sizeof o), 0);
	}
	assert_int_equal(cert_info_load(crt, &info), SD_OK);
	assert_int_equal(info.names.n_dns, CERT_NAMES_MAX);
	assert_int_equal(info.names.n_ip, CERT_NAMES_MAX);
	assert_int_equal(info.names_more, 8);
	assert_string_equal(info.names.dns[0], "h0.example");
	assert_string_equal(info.names.ip[15], "10.0.0.15");
	assert_true(info.not_after_ms - info.not_before_ms == 30 * DAY_MS);
	assert_false(info.server_auth);	/* no extendedKeyUsage at all */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test_setup_teardown(test_info_and_days_left, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_info_of_a_foreign_certificate,
						tu_setup_real_nodb, teardown),
		cmocka_unit_test_setup_teardown(test_init_verifies_with_openssl, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_init_default_names, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_show_matches_openssl, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_init_twice_keeps_renew_reissues,
						tu_setup_real_nodb, teardown),
		cmocka_unit_test_setup_teardown(test_ca_signs_only_for_the_box, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_ca_key_off_the_box, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_new_ca, tu_setup_real_nodb, teardown),
		cmocka_unit_test_setup_teardown(test_ca_remade_or_refused, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_input_writes_nothing, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_handshake_curl_and_client, tu_setup_real_nodb,
						teardown),
		cmocka_unit_test_setup_teardown(test_bench_http_tls, tu_setup_real_nodb, teardown),
		cmocka_unit_test_setup_teardown(test_box_serves_https_to_curl_and_python,
						tu_setup_real_nodb, teardown),
		cmocka_unit_test_setup_teardown(test_metrics_closed_on_a_network_by_default,
						tu_setup_real_nodb, teardown),
		cmocka_unit_test(test_bench_api_tls),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
