/*
 * test_mailsink.c: the local HTTPS mail provider (tools/mailsink), driven
 * over real TLS by libcurl with verification on, as the HTTPS transport
 * will drive it.
 *
 * Each test makes throwaway certificates with tools/certs.sh in its temp
 * directory, starts build/mailsink ($MAILSINK_BIN) on a free loopback port
 * and stops it after.  What is checked is the provider's promise: one
 * message per idempotency key, whatever the retries and injected faults,
 * and no message at all to a client that cannot verify it.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

extern char **environ;

#define BODY "{\"from\":\"box@venue.example\",\"to\":\"jose@example.org\"," \
	"\"subject\":\"Your tickets\",\"text\":\"See you at the door.\"," \
	"\"attachments\":[{\"filename\":\"tickets-AB12.pdf\"," \
	"\"content_type\":\"application/pdf\",\"content\":\"JVBERi0xLjQKJcfs\"}]}"
#define BODY2 "{\"from\":\"box@venue.example\",\"to\":\"jose@example.org\"," \
	"\"subject\":\"Other tickets\",\"text\":\"-\",\"attachments\":[]}"

/* one test's provider */
struct sink {
	struct tu_env *env;
	char certs[300];	/* env->dir/certs */
	char maildir[300];	/* env->dir/mail */
	char ca[350];		/* the test CA */
	pid_t pid;		/* 0 when not running */
	int port;
};

static const char *sink_bin(void)
{
	const char *b = getenv("MAILSINK_BIN");

	return b && *b ? b : "build/mailsink";
}

static int sink_setup(void **state)
{
	struct sink *s = calloc(1, sizeof *s);
	char cmd[400];

	assert_non_null(s);
	tu_setup_real_nodb((void **)&s->env);
	snprintf(s->certs, sizeof s->certs, "%s/certs", s->env->dir);
	snprintf(s->maildir, sizeof s->maildir, "%s/mail", s->env->dir);
	snprintf(s->ca, sizeof s->ca, "%s/ca.pem", s->certs);
	snprintf(cmd, sizeof cmd, "sh tools/certs.sh '%s'", s->certs);
	assert_int_equal(system(cmd), 0);
	*state = s;
	return 0;
}

static void sink_stop(struct sink *s)
{
	int rc;

	if (s->pid <= 0)
		return;
	kill(s->pid, SIGTERM);
	rc = tu_wait(s->pid, 5000);
	if (rc == -2) {
		kill(s->pid, SIGKILL);
		tu_wait(s->pid, 5000);
	}
	s->pid = 0;
	if (rc != 0)
		fail_msg("mailsink did not stop cleanly on SIGTERM (%d)", rc);
}

static int sink_teardown(void **state)
{
	struct sink *s = *state;

	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		tu_wait(s->pid, 5000);
	}
	tu_teardown((void **)&s->env);
	free(s);
	return 0;
}

/*
 * sink_run: start mailsink with cert (a base name in certs/: "server",
 * "wrong", "unknown") and extra arguments (NULL-terminated); returns the
 * exit status when it ends by itself within 2 s (as when it refuses its
 * arguments), else 0 once its port file is there (s->port).
 */
static int sink_run(struct sink *s, const char *cert, const char *listen, const char *const *extra)
{
	char cert_path[400], key_path[400], port_file[350], log_path[350];
	const char *args[32];
	posix_spawn_file_actions_t fa;
	int n = 0, i, waited;

	snprintf(cert_path, sizeof cert_path, "%s/%s.pem", s->certs, cert);
	snprintf(key_path, sizeof key_path, "%s/%s.key", s->certs, cert);
	snprintf(port_file, sizeof port_file, "%s/port", s->env->dir);
	snprintf(log_path, sizeof log_path, "%s/mailsink.log", s->env->dir);
	unlink(port_file);
	args[n++] = sink_bin();
	args[n++] = "--listen";
	args[n++] = listen;
	args[n++] = "--cert";
	args[n++] = cert_path;
	args[n++] = "--key";
	args[n++] = key_path;
	args[n++] = "--maildir";
	args[n++] = s->maildir;
	args[n++] = "--port-file";
	args[n++] = port_file;
	for (i = 0; extra && extra[i] && n < 31; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (posix_spawn(&s->pid, args[0], &fa, NULL, (char *const *)args, environ) != 0)
		fail_msg("cannot run %s (make build/mailsink)", args[0]);
	posix_spawn_file_actions_destroy(&fa);

	for (waited = 0; waited < 5000; waited += 10) {
		FILE *f = fopen(port_file, "r");
		int rc;

		if (f) {
			int ok = fscanf(f, "%d", &s->port) == 1;

			fclose(f);
			if (ok && s->port > 0)
				return 0;
		}
		rc = tu_wait(s->pid, 0);
		if (rc != -2) {
			s->pid = 0;
			return rc;
		}
		tu_sleep_ms(10);
	}
	fail_msg("mailsink wrote no port file within 5 s");
	return -1;
}

static void sink_start(struct sink *s, const char *const *extra)
{
	assert_int_equal(sink_run(s, "server", "127.0.0.1:0", extra), 0);
}

/* ---- one HTTPS request ----------------------------------------------- */

struct reply {
	long status;			/* 0 when no answer came */
	char body[1024];
	size_t len;
	char retry_after[32];		/* the Retry-After header's value, or "" */
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = size * n, room = sizeof r->body - 1 - r->len;

	memcpy(r->body + r->len, p, len < room ? len : room);
	r->len += len < room ? len : room;
	r->body[r->len] = '\0';
	return len;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
	struct reply *r = arg;
	size_t len = size * n;

	if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
		char *v = p + 12;
		size_t vlen = len - 12;

		while (vlen > 0 && *v == ' ') {
			v++;
			vlen--;
		}
		while (vlen > 0 && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n'))
			vlen--;
		if (vlen >= sizeof r->retry_after)
			vlen = sizeof r->retry_after - 1;
		memcpy(r->retry_after, v, vlen);
		r->retry_after[vlen] = '\0';
	}
	return len;
}

/*
 * request: method "POST" (body, key may be NULL) or "GET" to
 * https://127.0.0.1:port/path, trusting cafile only, verification on.
 * [out] *r.  Returns curl's code.
 */
static CURLcode request(int port, const char *cafile, const char *path, const char *key,
			const char *body, size_t body_len, struct reply *r)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char url[200], keyhdr[300];
	CURLcode rc;

	assert_non_null(h);
	memset(r, 0, sizeof *r);
	snprintf(url, sizeof url, "https://127.0.0.1:%d%s", port, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CAINFO, cafile);
	curl_easy_setopt(h, CURLOPT_CAPATH, NULL);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 8000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	if (body) {
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		if (key) {
			snprintf(keyhdr, sizeof keyhdr, "Idempotency-Key: %s", key);
			hdrs = curl_slist_append(hdrs, keyhdr);
		}
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body_len);
	}
	rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return rc;
}

static CURLcode post(struct sink *s, const char *key, const char *body, struct reply *r)
{
	return request(s->port, s->ca, "/v1/messages", key, body, strlen(body), r);
}

/* The "id" of a 200 answer, into id. */
static void reply_id(const struct reply *r, char *id, size_t size)
{
	const char *p = strstr(r->body, "\"id\":\"");
	const char *end;

	if (!p)
		fail_msg("no id in %s", r->body);
	p += 6;
	end = strchr(p, '"');
	assert_non_null(end);
	assert_true((size_t)(end - p) < size);
	memcpy(id, p, (size_t)(end - p));
	id[end - p] = '\0';
}

/* Files in maildir/new. */
static int count_new(struct sink *s)
{
	char path[400];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof path, "%s/new", s->maildir);
	dir = opendir(path);
	if (!dir)
		return 0;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* The provider's own count for key, from GET /v1/stats. */
static int stats_messages(struct sink *s, const char *key)
{
	struct reply r;
	char want[200];
	const char *p;

	assert_int_equal(request(s->port, s->ca, "/v1/stats", NULL, NULL, 0, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	snprintf(want, sizeof want, "\"%s\": {\"messages\": ", key);
	p = strstr(r.body, want);
	return p ? atoi(p + strlen(want)) : 0;
}

static void assert_one_message(struct sink *s, const char *key, const char *id)
{
	char path[600];
	struct stat st;

	assert_int_equal(count_new(s), 1);
	assert_int_equal(stats_messages(s, key), 1);
	if (id) {
		snprintf(path, sizeof path, "%s/new/%s.eml", s->maildir, id);
		assert_int_equal(stat(path, &st), 0);
	}
}

/* ---- tests ------------------------------------------------------------- */

static void test_one_message_per_key(void **state)
{
	struct sink *s = *state;
	struct reply r;
	char id1[100], id2[100], path[600], counts[350];
	unsigned char *file;
	size_t size;

	sink_start(s, NULL);
	assert_int_equal(post(s, "tickets-1", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	reply_id(&r, id1, sizeof id1);
	assert_int_equal(count_new(s), 1);

	/* the stored file is the message: headers, and the attachment as sent */
	snprintf(path, sizeof path, "%s/new/%s.eml", s->maildir, id1);
	file = tu_slurp(path, &size);
	assert_non_null(strstr((char *)file, "To: jose@example.org\r\n"));
	assert_non_null(strstr((char *)file, "Subject: Your tickets\r\n"));
	assert_non_null(strstr((char *)file, "Message-ID: <tickets-1@"));
	assert_non_null(strstr((char *)file, "filename=\"tickets-AB12.pdf\""));
	assert_non_null(strstr((char *)file, "\r\nJVBERi0xLjQKJcfs\r\n"));
	free(file);

	/* the same key and body: the first answer again, nothing stored */
	assert_int_equal(post(s, "tickets-1", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	reply_id(&r, id2, sizeof id2);
	assert_string_equal(id2, id1);
	assert_one_message(s, "tickets-1", id1);

	/* the same key with another body: 422 */
	assert_int_equal(post(s, "tickets-1", BODY2, &r), CURLE_OK);
	assert_int_equal(r.status, 422);
	assert_one_message(s, "tickets-1", id1);

	/* no key, or not JSON: 400, nothing stored */
	assert_int_equal(post(s, NULL, BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 400);
	assert_int_equal(post(s, "tickets-2", "{\"from\":", &r), CURLE_OK);
	assert_int_equal(r.status, 400);
	assert_int_equal(count_new(s), 1);

	/* another key: another message */
	assert_int_equal(post(s, "tickets-2", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_int_equal(count_new(s), 2);

	/* the count file agrees, and SIGTERM stops the provider */
	sink_stop(s);
	snprintf(counts, sizeof counts, "%s/counts.json", s->env->dir);
	file = tu_slurp(counts, &size);
	assert_non_null(strstr((char *)file, "\"tickets-1\": {\"messages\": 1, \"replays\": 1, \"requests\": 3}"));
	assert_non_null(strstr((char *)file, "\"tickets-2\": {\"messages\": 1"));
	free(file);
}

static void test_fail_500_then_one_message(void **state)
{
	struct sink *s = *state;
	const char *extra[] = { "--fail-500", "1", NULL };
	struct reply r;
	char id[100];

	sink_start(s, extra);
	assert_int_equal(post(s, "tickets-500", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 500);
	assert_int_equal(count_new(s), 0);
	assert_int_equal(post(s, "tickets-500", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	reply_id(&r, id, sizeof id);
	assert_one_message(s, "tickets-500", id);
}

static void test_fail_429_retry_after(void **state)
{
	struct sink *s = *state;
	const char *extra[] = { "--fail-429", "1", "--retry-after", "2", NULL };
	struct reply r;
	char id[100];

	sink_start(s, extra);
	assert_int_equal(post(s, "tickets-429", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 429);
	assert_string_equal(r.retry_after, "2");
	assert_int_equal(count_new(s), 0);
	assert_int_equal(post(s, "tickets-429", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.retry_after, "");
	reply_id(&r, id, sizeof id);
	assert_one_message(s, "tickets-429", id);
}

static void test_drop_after_accept_then_same_id(void **state)
{
	struct sink *s = *state;
	const char *extra[] = { "--drop-after-accept", "1", NULL };
	struct reply r;
	char id[100];
	CURLcode rc;

	sink_start(s, extra);
	rc = post(s, "tickets-drop", BODY, &r);
	/* no HTTP answer at all: curl says "empty reply" or a receive error */
	if (rc == CURLE_OK)
		fail_msg("an answer came: %ld %s", r.status, r.body);
	assert_int_equal(r.status, 0);
	/* yet the message is there */
	assert_int_equal(count_new(s), 1);

	/* the retry carries the same key: the stored message's id, no second */
	assert_int_equal(post(s, "tickets-drop", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 200);
	reply_id(&r, id, sizeof id);
	assert_one_message(s, "tickets-drop", id);
}

struct slow_post {
	struct sink *s;
	struct reply r;
	CURLcode rc;
};

static void *slow_post_run(void *arg)
{
	struct slow_post *p = arg;

	p->rc = post(p->s, "tickets-slow", BODY, &p->r);
	return NULL;
}

static void test_in_flight_409(void **state)
{
	struct sink *s = *state;
	const char *extra[] = { "--slow-ms", "1500", NULL };
	struct slow_post first = { .s = s };
	struct reply r;
	pthread_t th;
	char id[100];
	int waited;

	sink_start(s, extra);
	assert_int_equal(pthread_create(&th, NULL, slow_post_run, &first), 0);
	/* once its message is stored, the first request is held for 1.5 s
	 * with its key in flight */
	for (waited = 0; count_new(s) == 0 && waited < 5000; waited += 10)
		tu_sleep_ms(10);
	assert_int_equal(count_new(s), 1);
	assert_int_equal(post(s, "tickets-slow", BODY, &r), CURLE_OK);
	assert_int_equal(r.status, 409);
	pthread_join(th, NULL);
	assert_int_equal(first.rc, CURLE_OK);
	assert_int_equal(first.r.status, 200);
	reply_id(&first.r, id, sizeof id);
	assert_one_message(s, "tickets-slow", id);
}

static void test_body_over_10_mib_413(void **state)
{
	struct sink *s = *state;
	size_t len = 10u * 1024 * 1024 + 1;
	char *big = malloc(len + 1);
	struct reply r;

	assert_non_null(big);
	memset(big, ' ', len);
	big[len] = '\0';
	sink_start(s, NULL);
	/* curl sends "Expect: 100-continue" for a body this big, so the early
	 * 413 arrives before the body is sent */
	assert_int_equal(request(s->port, s->ca, "/v1/messages", "tickets-big", big, len, &r),
			 CURLE_OK);
	assert_int_equal(r.status, 413);
	assert_int_equal(count_new(s), 0);
	free(big);
}

static void test_client_without_the_ca_fails(void **state)
{
	struct sink *s = *state;
	char other[400];
	struct reply r;

	sink_start(s, NULL);
	/* trusting only an unrelated certificate: the chain cannot verify */
	snprintf(other, sizeof other, "%s/unknown.pem", s->certs);
	assert_int_equal(request(s->port, other, "/v1/messages", "tickets-x", BODY, strlen(BODY),
				 &r), CURLE_PEER_FAILED_VERIFICATION);
	assert_int_equal(count_new(s), 0);
}

static void test_wrong_host_and_unknown_ca_fail(void **state)
{
	struct sink *s = *state;
	struct reply r;

	/* signed by the test CA, but for wrong.example, not 127.0.0.1 */
	assert_int_equal(sink_run(s, "wrong", "127.0.0.1:0", NULL), 0);
	assert_int_equal(post(s, "tickets-w", BODY, &r), CURLE_PEER_FAILED_VERIFICATION);
	sink_stop(s);
	/* the right names, but self-signed */
	assert_int_equal(sink_run(s, "unknown", "127.0.0.1:0", NULL), 0);
	assert_int_equal(post(s, "tickets-u", BODY, &r), CURLE_PEER_FAILED_VERIFICATION);
	assert_int_equal(count_new(s), 0);
}

/* A whole number from the stats (counts.json, which the provider keeps equal
 * to GET /v1/stats and which has no size limit here): field of the document
 * ("messages"), or of key's entry when key is not NULL. */
static long stats_field(struct sink *s, const char *key, const char *field)
{
	char path[350], want[300];
	unsigned char *doc;
	const char *p;
	size_t size;
	long v;

	snprintf(path, sizeof path, "%s/counts.json", s->env->dir);
	doc = tu_slurp(path, &size);
	p = (const char *)doc;
	if (key) {
		snprintf(want, sizeof want, "\"%s\": {", key);
		p = strstr(p, want);
		if (!p)
			fail_msg("no key %s in %s", key, (char *)doc);
	} else if (strcmp(field, "keys") > 0) {
		/* the document's own fields sort around "keys": those after it
		 * come after the end of the keys object */
		p = strstr(p, "}}");
		assert_non_null(p);
	}
	snprintf(want, sizeof want, "\"%s\": ", field);
	p = strstr(p, want);
	if (!p)
		fail_msg("no %s in %s", field, (char *)doc);
	v = atol(p + strlen(want));
	free(doc);
	return v;
}

/* POST the same key until a 200 comes back; returns the POSTs it took. */
static int post_until_200(struct sink *s, const char *key, int max)
{
	struct reply r;
	int n;

	for (n = 1; n <= max; n++) {
		CURLcode rc = post(s, key, BODY, &r);

		if (rc == CURLE_OK && r.status == 200)
			return n;
		/* an injected 500, or no answer at all after a drop */
		if (rc == CURLE_OK)
			assert_int_equal(r.status, 500);
		else
			assert_int_equal(r.status, 0);
	}
	fail_msg("%s: no 200 in %d POSTs", key, max);
	return -1;
}

/* --fail-500-pct and --drop-pct: about that share of faults, yet every key
 * ends with exactly one message, and the retries a key absorbed are counted
 * as its replays. */
static void test_pct_faults_one_message_per_key(void **state)
{
	struct sink *s = *state;
	const char *extra[] = { "--fail-500-pct", "30", "--drop-pct", "30", "--seed", "7", NULL };
	char key[32];
	long posts = 0, failed, dropped, replays = 0;
	int i;

	sink_start(s, extra);
	for (i = 0; i < 60; i++) {
		snprintf(key, sizeof key, "tickets-%d", i);
		posts += post_until_200(s, key, 40);
		assert_int_equal(stats_field(s, key, "messages"), 1);
		replays += stats_field(s, key, "replays");
	}
	assert_int_equal(count_new(s), 60);
	assert_int_equal(stats_field(s, NULL, "messages"), 60);
	assert_int_equal(stats_field(s, NULL, "requests"), posts);
	failed = stats_field(s, NULL, "failed_500");
	dropped = stats_field(s, NULL, "dropped");
	/* every POST was a 500, a first store, or a replay */
	assert_int_equal(failed + 60 + replays, posts);
	assert_int_equal(stats_field(s, NULL, "replays"), replays);
	/* each drop leaves the client to retry; the retry is a replay (or meets
	 * a 500 first) */
	assert_true(replays >= 1 && replays <= dropped);
	/* 30% of ~90 POSTs: far from none, far from all */
	assert_true(failed >= 5 && failed <= 60);
	assert_true(dropped >= 5 && dropped <= 45);
}

/* The same seed and the same requests: the same faults. */
static void test_pct_faults_seeded(void **state)
{
	struct sink *s = *state;
	const char *extra[] = { "--fail-500-pct", "50", "--seed", "42", NULL };
	char pattern[2][41];
	struct reply r;
	int run, i;

	for (run = 0; run < 2; run++) {
		sink_start(s, extra);
		for (i = 0; i < 40; i++) {
			char key[32];

			snprintf(key, sizeof key, "seeded-%d-%d", run, i);
			assert_int_equal(post(s, key, BODY, &r), CURLE_OK);
			assert_true(r.status == 200 || r.status == 500);
			pattern[run][i] = r.status == 200 ? '.' : 'x';
		}
		pattern[run][40] = '\0';
		sink_stop(s);
	}
	assert_string_equal(pattern[0], pattern[1]);
	assert_non_null(strchr(pattern[0], 'x'));
	assert_non_null(strchr(pattern[0], '.'));
}

static void test_pct_refused_over_100(void **state)
{
	struct sink *s = *state;
	const char *extra[] = { "--drop-pct", "101", NULL };

	assert_int_not_equal(sink_run(s, "server", "127.0.0.1:0", extra), 0);
}

static void test_loopback_only(void **state)
{
	struct sink *s = *state;

	assert_int_not_equal(sink_run(s, "server", "0.0.0.0:0", NULL), 0);
	assert_int_not_equal(sink_run(s, "server", "192.0.2.1:0", NULL), 0);
	assert_int_not_equal(sink_run(s, "server", "[::]:0", NULL), 0);
	assert_int_not_equal(sink_run(s, "server", "localhost:0", NULL), 0);
	/* 127.0.0.0/8 is all loopback */
	assert_int_equal(sink_run(s, "server", "127.0.0.2:0", NULL), 0);
	sink_stop(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_one_message_per_key, sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_fail_500_then_one_message, sink_setup,
						sink_teardown),
		cmocka_unit_test_setup_teardown(test_fail_429_retry_after, sink_setup,
						sink_teardown),
		cmocka_unit_test_setup_teardown(test_drop_after_accept_then_same_id, sink_setup,
						sink_teardown),
		cmocka_unit_test_setup_teardown(test_in_flight_409, sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_body_over_10_mib_413, sink_setup,
						sink_teardown),
		cmocka_unit_test_setup_teardown(test_client_without_the_ca_fails, sink_setup,
						sink_teardown),
		cmocka_unit_test_setup_teardown(test_wrong_host_and_unknown_ca_fail, sink_setup,
						sink_teardown),
		cmocka_unit_test_setup_teardown(test_loopback_only, sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_pct_faults_one_message_per_key, sink_setup,
						sink_teardown),
		cmocka_unit_test_setup_teardown(test_pct_faults_seeded, sink_setup, sink_teardown),
		cmocka_unit_test_setup_teardown(test_pct_refused_over_100, sink_setup,
						sink_teardown),
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
