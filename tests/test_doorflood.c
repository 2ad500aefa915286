/*
 * test_doorflood.c: a stolen door phone floods POST /v1/scan, and the box
 * holds (issue: one door token filled the disk at 418 bytes a scan).
 *
 * The box runs as a venue runs it (`stagedoor run`, its workers, its HTTP
 * listener on loopback, the shipped scan_rate and scan_burst).  One door
 * token sends forged codes, each with a fresh 100-byte nonce, as fast as
 * one keep-alive connection carries them, for FLOOD_S seconds; beside it
 * the real door scans a real ticket a second.  Asserted: the database
 * (its pages, and its file with the WAL) grows by less than 1 MiB; every
 * real scan is answered 200 "admitted", within three times its p99 before
 * the flood (and 50 ms); the flood is mostly refused with 429 and a
 * Retry-After, and /metrics counts exactly the refusals it got.  The
 * figures are printed.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <curl/curl.h>

#include "clock.h"
#include "code.h"
#include "event_edit.h"
#include "events.h"
#include "orders.h"
#include "statedir.h"
#include "testutil.h"
#include "tickets.h"
#include "token.h"

#if defined(__SANITIZE_ADDRESS__)
#define FLOOD_S 20		/* the same flood, shorter under the sanitizers */
#else
#define FLOOD_S 30
#endif
#define BEFORE_SCANS 20		/* the real door's scans before the flood, 2 a second */
#define TICKETS (BEFORE_SCANS + FLOOD_S + 10)
#define MIB (1024 * 1024)

static struct {
	struct tu_env *env;
	int port;
	char flood_auth[128], door_auth[128], op_auth[128];
	char codes[TICKETS][CODE_TEXT_MAX];
	volatile int stop;
	/* the flood's answers */
	long n200, n429, nother, bad_retry;
} F;

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

/* ---- a client --------------------------------------------------------- */

struct buf {
	char data[65536];
	size_t len;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	size_t len = size * n, room = sizeof b->data - 1 - b->len;

	memcpy(b->data + b->len, p, len < room ? len : room);
	b->len += len < room ? len : room;
	b->data[b->len] = '\0';
	return len;
}

/* post: POST /v1/scan with body on h (a keep-alive handle); [out] the
 * status, the body in *b, the Retry-After in *retry (0: none) */
static long post(CURL *h, const char *auth, const char *body, struct buf *b, long *retry)
{
	struct curl_slist *hdr = NULL;
	struct curl_header *ra = NULL;
	char url[64], authh[160];
	long status = 0;

	snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/scan", F.port);
	snprintf(authh, sizeof authh, "Authorization: %s", auth);
	hdr = curl_slist_append(hdr, authh);
	hdr = curl_slist_append(hdr, "Content-Type: application/json");
	b->len = 0;
	b->data[0] = '\0';
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 20L);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	if (retry)
		*retry = curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1, &ra) == CURLHE_OK
				 ? atol(ra->value) : 0;
	curl_slist_free_all(hdr);
	return status;
}

/* the flood: forged codes, each with a fresh 100-byte nonce */
static void *flood(void *arg)
{
	CURL *h = curl_easy_init();
	char body[300], nonce[101];
	struct buf b;
	long status, retry, i;

	(void)arg;
	for (i = 0; !F.stop; i++) {
		snprintf(nonce, sizeof nonce, "%0100ld", i);
		snprintf(body, sizeof body, "{\"code\":\"SD1-forged-%ld\",\"nonce\":\"%s\"}", i,
			 nonce);
		status = post(h, F.flood_auth, body, &b, &retry);
		if (status == 200)
			F.n200++;
		else if (status == 429) {
			F.n429++;
			if (retry < 1)
				F.bad_retry++;
		} else
			F.nother++;
	}
	curl_easy_cleanup(h);
	return NULL;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* real_scans: n real tickets from *next, one every gap_ms; [out] their
 * latencies sorted; every one must be admitted */
static void real_scans(CURL *h, int n, int gap_ms, int *next, double *ms)
{
	char body[200];
	struct buf b;
	double t0;
	int i;

	for (i = 0; i < n; i++) {
		snprintf(body, sizeof body, "{\"code\":\"%s\",\"nonce\":\"real-%d\"}",
			 F.codes[*next], *next);
		(*next)++;
		t0 = mono_ms();
		if (post(h, F.door_auth, body, &b, NULL) != 200 ||
		    !strstr(b.data, "\"result\":\"admitted\""))
			fail_msg("the real door's scan %d: %s", *next, b.data);
		ms[i] = mono_ms() - t0;
		tu_sleep_ms(gap_ms);
	}
	qsort(ms, (size_t)n, sizeof *ms, cmp_double);
}

static double p99(const double *sorted, int n)
{
	int i = (int)(0.99 * n + 0.999) - 1;

	return sorted[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* ---- the box ---------------------------------------------------------- */

static int64_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* the database's bytes: its pages (a fresh connection), and its files */
static void db_bytes(int64_t *pages, int64_t *files)
{
	char wal[400];

	*pages = tu_count(F.env->db_path, "SELECT page_count * page_size FROM pragma_page_count, "
					  "pragma_page_size");
	snprintf(wal, sizeof wal, "%s-wal", F.env->db_path);
	*files = file_size(F.env->db_path) + file_size(wal);
}

static void bearer_of(const char *name, int role, int64_t event_id, char *auth)
{
	struct token_new t = { name, role, event_id, 0, 0, 3 * 3600 * 1000LL };
	char tok[TOKEN_HEX + 1];

	assert_int_equal(token_add(F.env->db, &t, clock_now_ms(), tok), SD_OK);
	snprintf(auth, 128, "Bearer %s", tok);
}

/* an event tonight, TICKETS tickets sold (one an order), their codes */
static void box_of_tonight(void)
{
	struct event_new e = { "Flood night", "Hall", clock_now_ms() + 3600 * 1000LL, TICKETS };
	unsigned char key[CODE_KEY_LEN];
	char path[400], id[ORDER_ID_MAX], k[32];
	int64_t ev = 0, code_id;
	int i, replayed;

	assert_int_equal(statedir_init(F.env->db_path, NULL), SD_OK);
	assert_int_equal(event_add(F.env->db, &e, &ev), SD_OK);
	for (i = 0; i < TICKETS; i++) {
		struct order_new o = { ev, "Ada Door", "ada@example.org", 1, k };

		snprintf(k, sizeof k, "flood-%d", i);
		assert_int_equal(order_add(F.env->db, &o, id, &replayed), SD_OK);
	}
	assert_int_equal(code_key_path(F.env->db_path, NULL, path, sizeof path), SD_OK);
	assert_int_equal(code_key_load(path, key), SD_OK);
	for (i = 0; i < TICKETS; i++) {
		code_id = tu_countf(F.env->db_path, "SELECT code_id FROM tickets ORDER BY id "
				    "LIMIT 1 OFFSET %d", i);
		code_make(key, code_id, ev, F.codes[i]);
	}
	bearer_of("stolen phone", TOKEN_DOOR, ev, F.flood_auth);
	bearer_of("north door", TOKEN_DOOR, ev, F.door_auth);
	bearer_of("night manager", TOKEN_OPERATOR, 0, F.op_auth);
}

/* `run` with its workers and listener; [out] F.port */
static pid_t run_box(const char *log)
{
	char line[1024];
	const char *p;
	int i;

	pid_t pid = tu_spawn((const char *const[]){ "run", "--db", F.env->db_path, "--workers",
						    "1", "--http-listen", "127.0.0.1:0", NULL },
			     log);
	tu_wait_log(log, "msg=\"http listening\"", 1, 30000);
	{
		size_t size = 0;
		char *text = (char *)tu_slurp(log, &size);

		p = strstr(text, "msg=\"http listening\"");
		snprintf(line, sizeof line, "%.*s", (int)strcspn(p, "\n"), p);
		free(text);
	}
	if (!(p = strstr(line, " port=")) || (F.port = atoi(p + 6)) <= 0)
		fail_msg("no port in: %s", line);
	/* the pipeline's own writes (PDFs, emails) done before the count; one
	 * statement reads both tables in one snapshot, since the relay moves a
	 * row from the outbox to the stream between two separate reads */
	for (i = 0; i < 600; i++) {
		if (tu_count(F.env->db_path, "SELECT (SELECT count(*) FROM stream) + (SELECT "
					     "count(*) FROM outbox WHERE published_at IS NULL)") == 0)
			break;
		tu_sleep_ms(100);
	}
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM stream"), 0);
	return pid;
}

static long metric(CURL *h, const char *name)
{
	char url[64], authh[160];
	struct curl_slist *hdr = NULL;
	static struct buf b;
	const char *p;
	char needle[128];

	snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", F.port);
	snprintf(authh, sizeof authh, "Authorization: %s", F.op_auth);
	hdr = curl_slist_append(hdr, authh);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	b.len = 0;
	assert_int_equal(curl_easy_perform(h), CURLE_OK);
	curl_slist_free_all(hdr);
	snprintf(needle, sizeof needle, "\n%s ", name);
	if (!(p = strstr(b.data, needle)))
		return -1;
	return atol(p + strlen(needle));
}

static void test_flood_from_one_door(void **state)
{
	double before[BEFORE_SCANS], during[FLOOD_S];
	int64_t pages0, files0, pages1, files1;
	char log[400];
	int next = 0;
	pthread_t th;
	CURL *h;
	pid_t pid;

	F.env = *state;
	box_of_tonight();
	snprintf(log, sizeof log, "%s/run.log", F.env->dir);
	pid = run_box(log);
	h = curl_easy_init();
	real_scans(h, BEFORE_SCANS, 500, &next, before);
	db_bytes(&pages0, &files0);

	assert_int_equal(pthread_create(&th, NULL, flood, NULL), 0);
	real_scans(h, FLOOD_S, 1000, &next, during);
	F.stop = 1;
	assert_int_equal(pthread_join(th, NULL), 0);
	db_bytes(&pages1, &files1);

	printf("flood: %d s from one door token: %ld answered 200, %ld 429, %ld other "
	       "(%.0f requests/s)\n", FLOOD_S, F.n200, F.n429, F.nother,
	       (F.n200 + F.n429 + F.nother) / (double)FLOOD_S);
	printf("flood: database pages %+lld bytes, files (database and WAL) %+lld bytes\n",
	       (long long)(pages1 - pages0), (long long)(files1 - files0));
	printf("flood: the real door's p99 %.1f ms before, %.1f ms during (medians %.1f, %.1f)\n",
	       p99(before, BEFORE_SCANS), p99(during, FLOOD_S), before[BEFORE_SCANS / 2],
	       during[FLOOD_S / 2]);

	assert_true(pages1 - pages0 < MIB);
	assert_true(files1 - files0 < MIB);
	assert_int_equal(F.nother, 0);
	assert_int_equal(F.bad_retry, 0);
	/* the burst and the rate's share, no more */
	assert_true(F.n200 <= 30 + 2 * (FLOOD_S + 1));
	assert_true(F.n429 > 10 * F.n200);
	assert_int_equal(metric(h, "stagedoor_scans_limited_total"), F.n429);
	assert_true(p99(during, FLOOD_S) < 3 * p99(before, BEFORE_SCANS) + 50);
	/* forged codes counted, not logged: the log holds the real door's */
	assert_int_equal(tu_count(F.env->db_path, "SELECT count(*) FROM scans"), next);
	assert_int_equal(tu_count(F.env->db_path, "SELECT sum(refused) FROM scan_minutes"),
			 F.n200);
	curl_easy_cleanup(h);
	kill(pid, SIGTERM);
	assert_int_equal(tu_reap(pid, 30000, "run"), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_flood_from_one_door, tu_setup_real,
						tu_teardown),
	};
	int r;

	curl_global_init(CURL_GLOBAL_DEFAULT);
	r = cmocka_run_group_tests(tests, NULL, NULL);
	curl_global_cleanup();
	return r;
}
