/*
 * test_mailapi.c: the HTTPS mail API transport (mail_open_opts with an
 * https:// URL) against the local provider tools/mailsink, over real TLS
 * with verification on, and the real send_tickets handler (ticket_job_send)
 * on top of it.
 *
 * Each test makes throwaway certificates with tools/certs.sh in its temp
 * directory, starts build/mailsink ($MAILSINK_BIN) on a free loopback port
 * with the faults it needs, places and renders one order, and runs
 * ticket_job_send through a standalone handler context on the fake clock.  What
 * is checked is the promise of the idempotency key: whatever the provider's
 * faults and our retries, exactly one message per order at the provider
 * (its own count, GET /v1/stats), and the attachment byte for byte the
 * stored PDF.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "clock.h"
#include "code.h"
#include "event_edit.h"
#include "events.h"
#include "idem.h"
#include "mail.h"
#include "orders.h"
#include "queue.h"
#include "testutil.h"

#include "statedir.h"
#include "ticket_jobs.h"
#include "tickets.h"
#include "worker.h"

/* the first ticket email of an order: kind "tickets", key "tickets-<id>" */
static const struct tickets_intent FIRST_TICKETS = { TICKETS_MAIL_TICKETS, 0 };

extern char **environ;

/* ======================== the fixture ==================================== */

struct fx {
	struct tu_env *env;
	char certs[300];		/* env->dir/certs */
	char maildir[300];		/* env->dir/mail: the provider's */
	char ca[350];			/* the test CA */
	pid_t pid;			/* the provider, 0 when not running */
	int port;
	struct tickets_env *tenv;	/* the handlers' environment */
	struct handler_ctx *ctx;
	int64_t order_id;
	char public_id[ORDER_ID_MAX];
	char key[64];			/* "tickets-<order id>" */
};

static struct fx F;

static const char *sink_bin(void)
{
	const char *b = getenv("MAILSINK_BIN");

	return b && *b ? b : "build/mailsink";
}

/* Start the provider with cert ("server", "wrong", "unknown") and extra
 * arguments (NULL-terminated); waits for its port file. */
static void sink_start(const char *cert, const char *const *extra)
{
	char cert_path[400], key_path[400], port_file[350], log_path[350];
	const char *args[32];
	posix_spawn_file_actions_t fa;
	int n = 0, i, waited;

	snprintf(cert_path, sizeof cert_path, "%s/%s.pem", F.certs, cert);
	snprintf(key_path, sizeof key_path, "%s/%s.key", F.certs, cert);
	snprintf(port_file, sizeof port_file, "%s/port", F.env->dir);
	snprintf(log_path, sizeof log_path, "%s/mailsink.log", F.env->dir);
	unlink(port_file);
	args[n++] = sink_bin();
	args[n++] = "--listen";
	args[n++] = "127.0.0.1:0";
	args[n++] = "--cert";
	args[n++] = cert_path;
	args[n++] = "--key";
	args[n++] = key_path;
	args[n++] = "--maildir";
	args[n++] = F.maildir;
	args[n++] = "--port-file";
	args[n++] = port_file;
	for (i = 0; extra && extra[i] && n < 31; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, log_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
	posix_spawn_file_actions_adddup2(&fa, 1, 2);
	if (posix_spawn(&F.pid, args[0], &fa, NULL, (char *const *)args, environ) != 0)
		fail_msg("cannot run %s (make build/mailsink)", args[0]);
	posix_spawn_file_actions_destroy(&fa);
	for (waited = 0; waited < 5000; waited += 10) {
		FILE *f = fopen(port_file, "r");

		if (f) {
			int ok = fscanf(f, "%d", &F.port) == 1;

			fclose(f);
			if (ok && F.port > 0)
				return;
		}
		if (tu_wait(F.pid, 0) != -2) {
			F.pid = 0;
			fail_msg("mailsink ended at start (see %s)", log_path);
		}
		tu_sleep_ms(10);
	}
	fail_msg("mailsink wrote no port file within 5 s");
}

static void sink_stop(void)
{
	if (F.pid <= 0)
		return;
	kill(F.pid, SIGTERM);
	if (tu_wait(F.pid, 5000) == -2) {
		kill(F.pid, SIGKILL);
		tu_wait(F.pid, 5000);
	}
	F.pid = 0;
}

/* The handlers' mailer: the provider's API at its current port, trusting the
 * test CA only, with a total timeout of timeout_ms (0: the default). */
static void mailer_use(long timeout_ms)
{
	struct mail_config cfg = { 0 };
	struct mailer *m = NULL;
	char url[200];

	cfg.ca_file = F.ca;
	cfg.connect_timeout_ms = 5000;
	cfg.timeout_ms = timeout_ms;
	snprintf(url, sizeof url, "https://127.0.0.1:%d/v1/messages", F.port);
	if (mail_open_opts(url, &cfg, &m) != SD_OK)
		fail_msg("mail_open_opts %s: %s", url, err_msg());
	mail_close(F.tenv->mail);
	F.tenv->mail = m;
}

static const char SQL_ORDER_ID[] = "SELECT id FROM orders WHERE public_id = '%s'";

/* The environment is built here rather than by tickets_env_open, so that
 * its mailer can be swapped for each provider this test starts. */
static void env_open(void)
{
	char path[600];
	struct tickets_env *t = calloc(1, sizeof *t);

	assert_non_null(t);
	snprintf(t->db_path, sizeof t->db_path, "%s", F.env->db_path);
	snprintf(t->mail_from, sizeof t->mail_from, "box@venue.example");
	snprintf(path, sizeof path, "%s/blobs", F.env->dir);
	if (blob_open(path, &t->blobs) != SD_OK ||
	    code_key_path(F.env->db_path, NULL, path, sizeof path) != SD_OK ||
	    code_key_load(path, t->key) != SD_OK)
		fail_msg("tickets env: %s", err_msg());
	F.tenv = t;
}

static int setup(void **state)
{
	struct event_new e = { "Die Zauberflöte", "Salle Zoë", 1900000000000LL, 100 };
	struct order_new o = { 0, "José Müller", "jose@example.org", 2, NULL };
	struct job_result res;
	struct job job;
	char cmd[400], payload[64], job_id[] = "render-1", kind[] = "render_tickets";
	int64_t event_id;
	int replayed = -1;

	tu_setup(state);
	memset(&F, 0, sizeof F);
	F.env = *state;
	snprintf(F.certs, sizeof F.certs, "%s/certs", F.env->dir);
	snprintf(F.maildir, sizeof F.maildir, "%s/mail", F.env->dir);
	snprintf(F.ca, sizeof F.ca, "%s/ca.pem", F.certs);
	snprintf(cmd, sizeof cmd, "sh tools/certs.sh '%s'", F.certs);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(statedir_init(F.env->db_path, NULL), SD_OK);
	env_open();
	assert_int_equal(event_add(F.env->db, &e, &event_id), SD_OK);
	o.event_id = event_id;
	assert_int_equal(order_add(F.env->db, &o, F.public_id, &replayed), SD_OK);
	F.order_id = tu_countf(F.env->db_path, SQL_ORDER_ID, F.public_id);
	assert_true(F.order_id > 0);
	idem_provider_key(F.key, sizeof F.key, "tickets", F.public_id);
	F.ctx = handler_ctx_new(F.env->db_path, F.tenv);
	assert_non_null(F.ctx);

	/* render and store the PDF, as render_tickets does before a send */
	snprintf(payload, sizeof payload, "{\"order_id\":%lld}", (long long)F.order_id);
	memset(&job, 0, sizeof job);
	job.id = 1;
	job.lease_token = 1;
	job.deliveries = 1;
	job.job_id = job_id;
	job.kind = kind;
	job.payload = payload;
	memset(&res, 0, sizeof res);
	if (ticket_job_render(F.ctx, &job, &res) != JOB_DONE)
		fail_msg("render: %s", res.error);
	return 0;
}

static int teardown(void **state)
{
	if (F.pid > 0) {
		kill(F.pid, SIGKILL);
		tu_wait(F.pid, 5000);
	}
	handler_ctx_free(F.ctx);
	tickets_env_close(F.tenv);
	memset(&F, 0, sizeof F);
	return tu_teardown(state);
}

/* ======================== asking the provider ============================ */

struct reply {
	char body[8192];
	size_t len;
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

/* GET /v1/stats: the provider's count of messages for key ([out] *requests
 * may be NULL: the requests it saw with the key). */
static int stats_messages(const char *key, int *requests)
{
	CURL *h = curl_easy_init();
	struct reply r = { .len = 0 };
	char url[200], want[200];
	const char *p;
	long status = 0;

	assert_non_null(h);
	snprintf(url, sizeof url, "https://127.0.0.1:%d/v1/stats", F.port);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CAINFO, F.ca);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 8000L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
	assert_int_equal(curl_easy_perform(h), CURLE_OK);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(h);
	assert_int_equal(status, 200);
	snprintf(want, sizeof want, "\"%s\": {\"messages\": ", key);
	p = strstr(r.body, want);
	if (requests)
		*requests = p ? atoi(strstr(p, "\"requests\": ") + 12) : 0;
	return p ? atoi(p + strlen(want)) : 0;
}

/* Files in the provider's maildir/new. */
static int count_new(void)
{
	char path[400];
	struct dirent *d;
	DIR *dir;
	int n = 0;

	snprintf(path, sizeof path, "%s/new", F.maildir);
	if (!(dir = opendir(path)))
		return 0;
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.')
			n++;
	closedir(dir);
	return n;
}

/* Base64 (line breaks skipped) decoded into a new buffer; [out] *len. */
static unsigned char *b64_decode(const char *s, const char *end, size_t *len)
{
	unsigned char *out = malloc((size_t)(end - s) / 4 * 3 + 3);
	uint32_t acc = 0;
	int bits = 0;
	size_t n = 0;

	assert_non_null(out);
	for (; s < end && *s != '='; s++) {
		const char *al = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
		const char *at;

		if (*s == '\r' || *s == '\n')
			continue;
		at = strchr(al, *s);
		if (!at || !*s)
			fail_msg("not base64: 0x%02x", (unsigned char)*s);
		acc = (acc << 6) | (uint32_t)(at - al);
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[n++] = (unsigned char)(acc >> bits);
		}
	}
	*len = n;
	return out;
}

/* The provider's only stored message: its PDF attachment equals the blob. */
static void assert_attachment_is_the_blob(const char *id)
{
	char path[700], key[BLOB_KEY_MAX + 1];
	struct order_view v;
	unsigned char *file, *blob = NULL, *pdf;
	const char *p, *end;
	size_t size, blob_len = 0, pdf_len;

	snprintf(path, sizeof path, "%s/new/%s.eml", F.maildir, id);
	file = tu_slurp(path, &size);
	assert_non_null(file);
	assert_non_null(strstr((char *)file, "To: jose@example.org\r\n"));
	p = strstr((char *)file, "Content-Type: application/pdf\r\n");
	assert_non_null(p);
	p = strstr(p, "\r\n\r\n");
	assert_non_null(p);
	p += 4;
	end = strstr(p, "\r\n--");
	assert_non_null(end);
	pdf = b64_decode(p, end, &pdf_len);

	assert_int_equal(tickets_load_order(F.env->db, F.order_id, &v), SD_OK);
	tickets_pdf_key(&v, key, sizeof key);
	assert_int_equal(blob_get(F.tenv->blobs, key, &blob, &blob_len), SD_OK);
	assert_true(blob_len > 1000);
	assert_int_equal(pdf_len, blob_len);
	assert_memory_equal(pdf, blob, blob_len);
	free(pdf);
	free(blob);
	free(file);
}

/* ======================== running the handler ============================ */

static const char SQL_SENT[] =
	"SELECT count(*) FROM email_sends WHERE order_id = %lld AND sent_at IS NOT NULL";
static const char SQL_CLAIMED[] =
	"SELECT count(*) FROM email_sends WHERE order_id = %lld AND claimed_at > 0 "
	"AND sent_at IS NULL";
static const char SQL_ID_IS[] =
	"SELECT count(*) FROM email_sends WHERE order_id = %lld AND "
	"provider_message_id = '%s'";
static const char SQL_ID_LIKE[] =
	"SELECT count(*) FROM email_sends WHERE order_id = %lld AND "
	"provider_message_id LIKE 'ms-%%'";

/* One run of send_tickets for the order; [out] res (may be NULL). */
static enum job_outcome send_once(struct job_result *out)
{
	static char job_id[] = "outbox:2", kind[] = "send_tickets";
	static int64_t delivery;
	struct job_result res;
	char payload[64];
	struct job job;
	enum job_outcome o;

	snprintf(payload, sizeof payload, "{\"order_id\":%lld}", (long long)F.order_id);
	memset(&job, 0, sizeof job);
	job.id = 2;
	job.lease_token = ++delivery;
	job.deliveries = delivery;
	job.job_id = job_id;
	job.kind = kind;
	job.payload = payload;
	memset(&res, 0, sizeof res);
	o = ticket_job_send(F.ctx, &job, &res);
	if (out)
		*out = res;
	return o;
}

static void expect_send(enum job_outcome want, struct job_result *out)
{
	struct job_result res;
	enum job_outcome got = send_once(&res);

	if (got != want)
		fail_msg("send_tickets: outcome %d, expected %d (%s)", (int)got, (int)want,
			 res.error);
	if (out)
		*out = res;
}

/* Sent once: one message at the provider, email_sends marked with its id. */
static void assert_sent_once(void)
{
	assert_int_equal(stats_messages(F.key, NULL), 1);
	assert_int_equal(count_new(), 1);
	assert_int_equal(tu_countf(F.env->db_path, SQL_SENT, (long long)F.order_id), 1);
	assert_int_equal(tu_countf(F.env->db_path, SQL_ID_LIKE, (long long)F.order_id), 1);
}

/* The one message's id as the provider stored it (its file name). */
static void stored_id(char *id, size_t size)
{
	char path[400];
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof path, "%s/new", F.maildir);
	dir = opendir(path);
	assert_non_null(dir);
	id[0] = '\0';
	while ((d = readdir(dir)))
		if (d->d_name[0] != '.' && strlen(d->d_name) > 4 && strlen(d->d_name) < size + 4) {
			snprintf(id, size, "%.*s", (int)(strlen(d->d_name) - 4), d->d_name);
			break;
		}
	closedir(dir);
	assert_true(id[0] != '\0');
}

/* ======================== tests ========================================== */

/* (1) Delivered: the provider's id in email_sends, the PDF byte-identical. */
static void test_ticket_email_delivered(void **state)
{
	char id[100];

	(void)state;
	sink_start("server", NULL);
	mailer_use(0);
	expect_send(JOB_DONE, NULL);
	assert_sent_once();
	stored_id(id, sizeof id);
	assert_int_equal(tu_countf(F.env->db_path, SQL_ID_IS, (long long)F.order_id, id), 1);
	assert_attachment_is_the_blob(id);
	/* a later delivery of the job finds it sent and sends nothing */
	expect_send(JOB_DONE, NULL);
	assert_int_equal(stats_messages(F.key, NULL), 1);
}

/* (2) 500 twice: two transient failures, each giving the claim back, then
 * one message. */
static void test_500_twice_then_one_message(void **state)
{
	const char *extra[] = { "--fail-500", "2", NULL };
	struct job_result res;
	int requests = 0;

	(void)state;
	sink_start("server", extra);
	mailer_use(0);
	expect_send(JOB_FAIL, &res);
	assert_non_null(strstr(res.error, "500"));
	assert_int_equal(res.delay_ms, 0);	/* no Retry-After: the kind's backoff */
	assert_int_equal(tu_countf(F.env->db_path, SQL_CLAIMED, (long long)F.order_id), 0);
	expect_send(JOB_FAIL, NULL);
	assert_int_equal(count_new(), 0);
	expect_send(JOB_DONE, NULL);
	assert_sent_once();
	assert_int_equal(stats_messages(F.key, &requests), 1);
	assert_int_equal(requests, 1);	/* the 500s came before the key table */
}

/* (3) 429 with Retry-After: 2: the failure carries a 2 s floor, and the
 * queue does not offer the job again sooner, whatever its backoff. */
static void test_429_retry_after_floor(void **state)
{
	const char *extra[] = { "--fail-429", "1", "--retry-after", "2", NULL };
	struct kind_policy pol;
	struct enqueue e = { "send_tickets", "{}", NULL, 0, 0 };
	struct job_result res;
	struct job *jobs[1];
	int n = 0, dead = -1;

	(void)state;
	sink_start("server", extra);
	mailer_use(0);
	expect_send(JOB_FAIL, &res);
	assert_non_null(strstr(res.error, "429"));
	assert_true(res.delay_ms >= 2000);

	/* the worker hands res.delay_ms to queue_fail_after as the floor:
	 * with a 100 ms backoff the job still waits the 2 s */
	queue_policy_default(&pol);
	pol.backoff_base_ms = 100;
	pol.backoff_cap_ms = 100;
	assert_int_equal(queue_policy_set("send_tickets", &pol), SD_OK);
	assert_int_equal(queue_enqueue(F.env->db, &e, NULL), SD_OK);
	assert_int_equal(queue_claim(F.env->db, "t", 1, 0, jobs, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(queue_fail_after(F.env->db, jobs[0], res.error, 0, res.delay_ms, &dead),
			 SD_OK);
	assert_int_equal(dead, 0);
	job_free(jobs[0]);
	clock_fake_advance(res.delay_ms - 1);
	assert_int_equal(queue_claim(F.env->db, "t", 1, 0, jobs, &n), SD_OK);
	assert_int_equal(n, 0);
	clock_fake_advance(1);
	assert_int_equal(queue_claim(F.env->db, "t", 1, 0, jobs, &n), SD_OK);
	assert_int_equal(n, 1);
	job_free(jobs[0]);

	/* and the retry makes the one message */
	expect_send(JOB_DONE, NULL);
	assert_sent_once();
}

/* (4) An answer slower than our timeout: the provider stored the message;
 * the retry with the same key meets 409 while the first is in flight, then
 * the first answer.  One message, and email_sends holds its id. */
static void test_slow_answer_timeout_then_one_message(void **state)
{
	const char *extra[] = { "--slow-ms", "1500", NULL };
	struct job_result res;
	char id[100];
	int i, snoozed = 0, requests = 0;
	enum job_outcome o = JOB_FAIL;

	(void)state;
	sink_start("server", extra);
	mailer_use(400);
	expect_send(JOB_FAIL, &res);
	assert_non_null(strstr(res.error, "timed out"));
	assert_int_equal(tu_countf(F.env->db_path, SQL_CLAIMED, (long long)F.order_id), 0);
	/* the retries may wait for the slow answers */
	mailer_use(10000);
	for (i = 0; i < 5; i++) {
		o = send_once(&res);
		if (o == JOB_DONE)
			break;
		if (o != JOB_RETRY_LATER)
			fail_msg("send_tickets: outcome %d (%s)", (int)o, res.error);
		assert_true(res.delay_ms >= 1000);
		snoozed++;
	}
	assert_int_equal(o, JOB_DONE);
	assert_true(snoozed >= 1);	/* the first request was still in flight */
	assert_sent_once();
	stored_id(id, sizeof id);
	assert_int_equal(tu_countf(F.env->db_path, SQL_ID_IS, (long long)F.order_id, id), 1);
	assert_int_equal(stats_messages(F.key, &requests), 1);
	assert_true(requests >= 3);
}

/* (5) Accepted, then the connection dropped before the answer: the retry
 * gets the stored message's id. */
static void test_drop_after_accept_then_one_message(void **state)
{
	const char *extra[] = { "--drop-after-accept", "1", NULL };
	struct job_result res;
	char id[100];

	(void)state;
	sink_start("server", extra);
	mailer_use(0);
	expect_send(JOB_FAIL, &res);
	assert_int_equal(count_new(), 1);	/* it did arrive */
	assert_int_equal(tu_countf(F.env->db_path, SQL_SENT, (long long)F.order_id), 0);
	expect_send(JOB_DONE, NULL);
	assert_sent_once();
	stored_id(id, sizeof id);
	assert_int_equal(tu_countf(F.env->db_path, SQL_ID_IS, (long long)F.order_id, id), 1);
}

/* (6) A worker killed between the provider's answer and sent_at: the retry,
 * once the claim is stale, carries the same key and gets the first id. */
static void test_killed_after_answer_same_key(void **state)
{
	struct job_result res;
	struct mail_result mr, again;
	struct order_view v;
	enum idem_claim c;
	int requests = 0;

	(void)state;
	sink_start("server", NULL);
	mailer_use(0);
	assert_int_equal(tickets_load_order(F.env->db, F.order_id, &v), SD_OK);
	assert_int_equal(idem_effect_claim(F.env->db, F.order_id, "tickets", IDEM_STALE_MS, &c,
					   NULL), SD_OK);
	assert_int_equal(c, IDEM_CLAIMED);
	assert_int_equal(tickets_send_mail(F.tenv, &v, &FIRST_TICKETS, NULL, &mr), SD_OK);
	assert_int_equal(strncmp(mr.message_id, "ms-", 3), 0);
	assert_int_equal(mr.duplicate, 0);	/* the first send of this key */
	/* ... and the process dies here: no idem_effect_done */
	assert_int_equal(tu_countf(F.env->db_path, SQL_SENT, (long long)F.order_id), 0);
	/* the claim is fresh: held, to look again just past its stale limit,
	 * which comes closer as the claim ages */
	expect_send(JOB_RETRY_LATER, &res);
	assert_int_equal(res.delay_ms, IDEM_STALE_MS + 1);
	clock_fake_advance(IDEM_STALE_MS - 1000);
	expect_send(JOB_RETRY_LATER, &res);
	assert_int_equal(res.delay_ms, 1000 + 1);
	clock_fake_advance(res.delay_ms);
	expect_send(JOB_DONE, NULL);
	assert_sent_once();
	assert_int_equal(tu_countf(F.env->db_path, SQL_ID_IS, (long long)F.order_id,
				   mr.message_id), 1);
	assert_int_equal(stats_messages(F.key, &requests), 1);
	assert_int_equal(requests, 2);

	/* one more send with the key: the provider marks its answer a replay
	 * ("Idempotent-Replayed: true"), which the handler counts as absorbed */
	memset(&again, 0, sizeof again);
	assert_int_equal(tickets_send_mail(F.tenv, &v, &FIRST_TICKETS, NULL, &again), SD_OK);
	assert_int_equal(again.duplicate, 1);
	assert_string_equal(again.message_id, mr.message_id);
	assert_int_equal(stats_messages(F.key, &requests), 1);
	assert_int_equal(requests, 3);
}

/* (7) A certificate for another host, and one from an unknown CA: the send
 * fails (to be retried), nothing is delivered, the claim is given back. */
static void test_wrong_host_and_unknown_ca_fail(void **state)
{
	static const char *const certs[] = { "wrong", "unknown" };
	struct job_result res;
	int i;

	(void)state;
	for (i = 0; i < 2; i++) {
		sink_start(certs[i], NULL);
		mailer_use(0);
		expect_send(JOB_FAIL, &res);
		if (!strstr(res.error, "certificate"))
			fail_msg("%s: %s", certs[i], res.error);
		assert_int_equal(tu_countf(F.env->db_path, SQL_CLAIMED, (long long)F.order_id),
				 0);
		sink_stop();
		assert_int_equal(count_new(), 0);
	}
	assert_int_equal(tu_countf(F.env->db_path, SQL_SENT, (long long)F.order_id), 0);
}

/* Other 4xx: refused for good with the provider's words; a header injection
 * never leaves the box. */
static void test_refusals(void **state)
{
	struct mail_attachment att = { "a.pdf", "application/pdf",
				       (const unsigned char *)"%PDF-1.4", 8 };
	struct mail_message m = { "box@venue.example", NULL, "jose@example.org", NULL,
				  "Your tickets", "See you.", &att, 1, "tickets-x" };
	struct mail_result mr;

	(void)state;
	sink_start("server", NULL);
	mailer_use(0);
	assert_int_equal(mail_send(F.tenv->mail, &m, &mr), SD_OK);
	assert_int_equal(strncmp(mr.message_id, "ms-", 3), 0);
	/* the same key with another body: 422, permanent */
	m.subject = "Other tickets";
	assert_int_equal(mail_send(F.tenv->mail, &m, &mr), SD_INVALID);
	assert_non_null(strstr(err_msg(), "422"));
	assert_non_null(strstr(err_msg(), "different request body"));
	/* CR/LF in the subject: refused before any request */
	m.idempotency_key = "tickets-y";
	m.subject = "Hi\r\nBcc: all@example.org";
	assert_int_equal(mail_send(F.tenv->mail, &m, &mr), SD_INVALID);
	assert_non_null(strstr(err_msg(), "line break"));
	assert_int_equal(stats_messages("tickets-y", NULL), 0);
	assert_int_equal(count_new(), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(test_ticket_email_delivered),
		T(test_500_twice_then_one_message),
		T(test_429_retry_after_floor),
		T(test_slow_answer_timeout_then_one_message),
		T(test_drop_after_accept_then_one_message),
		T(test_killed_after_answer_same_key),
		T(test_wrong_host_and_unknown_ca_fail),
		T(test_refusals),
#undef T
	};
	int rc;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return rc;
}
