/*
 * test_orders.c: the ticket pipeline from the command line: events, orders,
 * showing an order, door scans, the ticket key and the demo.
 *
 * Every test runs the real binary ($STAGEDOOR_BIN) as a child process on a
 * fresh database that `init` made in its own temp directory (init also makes
 * ticket.key beside it), and checks exit status, stdout, stderr and the rows
 * in the file.  Codes for the scan test come out of the stored PDF through
 * pdftotext, as a door scanner would read them off the page.
 *
 * What the commands promise here: success prints the new id on stdout and
 * exits 0; a failure exits non-zero with one line "stagedoor: ..." on stderr,
 * nothing on stdout, and nothing written.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <sqlite3.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "db.h"
#include "event_edit.h"
#include "events.h"
#include "orders.h"
#include "testutil.h"
#include "text.h"
#include "tickets.h"

extern char **environ;

#define OUT_MAX (256 * 1024)
#define CODE_LEN 52		/* a ticket code: 52 base32 characters */

static char out[OUT_MAX], err[OUT_MAX];

/* RUN("order", "add", ...): run the binary, stdout in out, stderr in err. */
#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

/* ========================= helpers ======================================== */

/* jf: SQL for the integer member `name` of an outbox payload, in the engine
 * under test's dialect (a static buffer per call site: four in turn) */
static const char *jf(const char *name)
{
	static char buf[4][96];
	static int i;
	char *b = buf[i++ % 4];

	if (tu_pg())
		snprintf(b, sizeof buf[0], "CAST(CAST(payload AS jsonb) ->> '%s' AS BIGINT)", name);
	else
		snprintf(b, sizeof buf[0], "json_extract(payload, '$.%s')", name);
	return b;
}

static int n_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		if (*s == '\n')
			n++;
	return n;
}

/* The failure contract: non-zero, one line "stagedoor: ...", no stdout. */
static void assert_one_line_error(int rc, const char *what)
{
	if (rc == 0 || strncmp(err, "stagedoor: ", 11) != 0 || n_lines(err) != 1 || out[0])
		fail_msg("%s: want non-zero exit and one line 'stagedoor: ...' on stderr, "
			 "nothing on stdout; got rc=%d stdout='%s' stderr='%s'", what, rc, out, err);
}

/* The failure contract without the line count (for the input that breaks it;
 * the line count is checked on its own in test_errors_echo_input_on_one_line). */
static void assert_refused(int rc, const char *what)
{
	if (rc == 0 || strncmp(err, "stagedoor: ", 11) != 0 || out[0])
		fail_msg("%s: want non-zero exit, 'stagedoor: ...' on stderr, nothing on stdout; "
			 "got rc=%d stdout='%s' stderr='%s'", what, rc, out, err);
}

static json_t *parse_json(const char *s)
{
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);

	if (!j)
		fail_msg("not JSON (%s): %s", je.text, s);
	return j;
}

static const char *jstr(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_string(v))
		fail_msg("no string at '%s'", key);
	return json_string_value(v);
}

static int64_t jint(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_integer(v))
		fail_msg("no integer at '%s'", key);
	return (int64_t)json_integer_value(v);
}

static int jbool(json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);

	if (!json_is_boolean(v))
		fail_msg("no boolean at '%s'", key);
	return json_is_true(v);
}

/* The first line of out without its newline, into buf. */
static void first_line(char *buf, size_t size)
{
	size_t n = strcspn(out, "\n");

	assert_true(n > 0 && n < size);
	memcpy(buf, out, n);
	buf[n] = '\0';
}

/* A public order id: "T" and 9 characters of 2-9 and A-Z without O I L. */
static void assert_public_id(const char *id)
{
	size_t i;

	if (strlen(id) != 10 || id[0] != 'T')
		fail_msg("'%s' is not a public order id", id);
	for (i = 1; i < 10; i++)
		if (!strchr("23456789ABCDEFGHJKMNPQRSTUVWXYZ", id[i]))
			fail_msg("'%s' is not a public order id", id);
}

/* What a refused command must leave as it was: every table an order touches. */
struct rows {
	int64_t events, orders, tickets, outbox, stream, email_sends, counters;
};

static struct rows rows_now(const struct tu_env *e)
{
	struct rows r;

	r.events = tu_countf(e->db_path, "SELECT count(*) FROM events");
	r.orders = tu_countf(e->db_path, "SELECT count(*) FROM orders");
	r.tickets = tu_countf(e->db_path, "SELECT count(*) FROM tickets");
	r.outbox = tu_countf(e->db_path, "SELECT count(*) FROM outbox");
	r.stream = tu_countf(e->db_path, "SELECT count(*) FROM stream");
	r.email_sends = tu_countf(e->db_path, "SELECT count(*) FROM email_sends");
	r.counters = tu_countf(e->db_path, "SELECT count(*) FROM sales_counters");
	return r;
}

static void assert_rows_same(const struct rows *a, const struct rows *b, const char *what)
{
	if (memcmp(a, b, sizeof *a) != 0)
		fail_msg("%s wrote rows: events %lld->%lld orders %lld->%lld tickets %lld->%lld "
			 "outbox %lld->%lld stream %lld->%lld", what, (long long)a->events,
			 (long long)b->events, (long long)a->orders, (long long)b->orders,
			 (long long)a->tickets, (long long)b->tickets, (long long)a->outbox,
			 (long long)b->outbox, (long long)a->stream, (long long)b->stream);
}

/* init: the database and ticket.key beside it. */
static void init_db(const struct tu_env *e)
{
	int rc = RUN("init", "--db", e->db_path);

	if (rc != 0)
		fail_msg("init: rc=%d stderr='%s'", rc, err);
}

/* event add with the usual venue and time; returns the printed id. */
static int64_t run_event_add(const struct tu_env *e, const char *name, const char *capacity)
{
	char *end;
	long long id;
	int rc = RUN("event", "add", "--name", name, "--venue", "Hall", "--starts-at",
		     "2036-12-31T20:00Z", "--capacity", capacity, "--db", e->db_path);

	if (rc != 0)
		fail_msg("event add %s: rc=%d stderr='%s'", name, rc, err);
	id = strtoll(out, &end, 10);
	assert_true(id > 0);
	assert_string_equal(end, "\n");
	return id;
}

/* order add; on success the public id is in id (ORDER_ID_MAX bytes).
 * Returns the exit status. */
static int run_order_add(const struct tu_env *e, int64_t event, const char *name,
			 const char *email, const char *seats, const char *key, char *id)
{
	char ev[32];
	int rc;

	snprintf(ev, sizeof ev, "%lld", (long long)event);
	if (key)
		rc = RUN("order", "add", "--event", ev, "--name", name, "--email", email, "--seats",
			 seats, "--idempotency-key", key, "--db", e->db_path);
	else
		rc = RUN("order", "add", "--event", ev, "--name", name, "--email", email, "--seats",
			 seats, "--db", e->db_path);
	if (rc == 0 && id) {
		first_line(id, 16);
		assert_public_id(id);
		assert_int_equal(n_lines(out), 1);
	}
	return rc;
}

static void run_order_add_ok(const struct tu_env *e, int64_t event, const char *name,
			     const char *seats, char *id)
{
	int rc = run_order_add(e, event, name, "buyer@example.com", seats, NULL, id);

	if (rc != 0)
		fail_msg("order add %s seats: rc=%d stderr='%s'", seats, rc, err);
}

/* order show ID --json, parsed. */
static json_t *show_json(const struct tu_env *e, const char *id)
{
	int rc = RUN("order", "show", id, "--json", "--db", e->db_path);

	if (rc != 0)
		fail_msg("order show %s --json: rc=%d stderr='%s'", id, rc, err);
	return parse_json(out);
}

static void relay_drain(const struct tu_env *e)
{
	pid_t pid = tu_spawn((const char *const[]){ "relay", "--drain", "--db", e->db_path, NULL },
			     NULL);

	assert_int_equal(tu_reap(pid, 20000, "relay --drain"), 0);
}

static void worker_drain(const struct tu_env *e)
{
	char log[400];
	pid_t pid;

	snprintf(log, sizeof log, "%s/worker.log", e->dir);
	pid = tu_spawn((const char *const[]){ "worker", "--drain", "--db", e->db_path, NULL }, log);
	assert_int_equal(tu_reap(pid, 30000, "worker --drain"), 0);
}

/* relay and worker rounds until the order's email is sent (render_tickets
 * queues send_tickets through the outbox, so it takes two rounds). */
static void run_pipeline(const struct tu_env *e, const char *id)
{
	int round, sent = 0;
	json_t *j;

	for (round = 0; round < 5 && !sent; round++) {
		relay_drain(e);
		worker_drain(e);
		j = show_json(e, id);
		sent = jbool(j, "email_sent");
		json_decref(j);
	}
	if (!sent)
		fail_msg("order %s: the email was not sent after %d relay and worker rounds", id,
			 round);
}

static int is_base32(int c)
{
	return (c >= 'A' && c <= 'Z') || (c >= '2' && c <= '7');
}

/* c with the lowest bit of its 5-bit value flipped: in the last character of
 * a code that bit is padding only, which must still make the code invalid. */
static char base32_flip(char c)
{
	static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	const char *at = strchr(alphabet, c);

	assert_non_null(at);
	return alphabet[(at - alphabet) ^ 1];
}

/* The ticket codes in the order's stored PDF, in page order; returns how many. */
static int codes_from_pdf(const struct tu_env *e, const char *id, char codes[][CODE_LEN + 1],
			  int max)
{
	char pdf[400], txt[400], *text, *line, *save = NULL;
	size_t size;
	int n = 0, rc;

	/* the box's own way out of its store (files, or the database) */
	snprintf(pdf, sizeof pdf, "%s/%s.out.pdf", e->dir, id);
	snprintf(txt, sizeof txt, "%s/%s.txt", e->dir, id);
	if ((rc = RUN("order", "pdf", id, "--out", pdf, "--db", e->db_path)) != 0)
		fail_msg("order pdf %s: rc=%d stderr='%s'", id, rc, err);
	rc = tu_exec((const char *const[]){ "pdftotext", "-enc", "UTF-8", pdf, txt, NULL }, NULL,
			NULL, 20000);
	if (rc != 0)
		fail_msg("pdftotext %s: exit %d", pdf, rc);
	text = (char *)tu_slurp(txt, &size);
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		size_t len = strlen(line), i;

		while (len && (line[len - 1] == '\r' || line[len - 1] == ' '))
			line[--len] = '\0';
		if (len != CODE_LEN)
			continue;
		for (i = 0; i < len && is_base32((unsigned char)line[i]); i++)
			;
		if (i == len && n < max)
			memcpy(codes[n++], line, CODE_LEN + 1);
	}
	free(text);
	return n;
}


/* ========================= event add ====================================== */

static void test_event_add_prints_id_and_refuses_bad_input(void **state)
{
	struct tu_env *e = *state;
	const char *p = e->db_path;
	struct rows before, after;
	int64_t id;
	size_t i;
	static const char *const bad_times[] = { "tomorrow", "2026-02-30T10:00Z", "2026-12-31",
						 "2026-13-01T10:00Z", "2036-12-31T24:00Z", "" };

	init_db(e);
	before = rows_now(e);
	for (i = 0; i < sizeof bad_times / sizeof bad_times[0]; i++) {
		char what[80];

		snprintf(what, sizeof what, "--starts-at '%s'", bad_times[i]);
		assert_one_line_error(RUN("event", "add", "--name", "Gig", "--venue", "Hall",
					  "--starts-at", bad_times[i], "--capacity", "10", "--db", p),
				      what);
	}
	assert_one_line_error(RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--starts-at",
				  "2036-12-31T20:00Z", "--capacity", "0", "--db", p), "capacity 0");
	assert_one_line_error(RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--starts-at",
				  "2036-12-31T20:00Z", "--capacity", "-3", "--db", p), "capacity -3");
	assert_one_line_error(RUN("event", "add", "--name", "", "--venue", "Hall", "--starts-at",
				  "2036-12-31T20:00Z", "--capacity", "10", "--db", p), "empty name");
	assert_one_line_error(RUN("event", "add", "--name", "Gig", "--venue", "", "--starts-at",
				  "2036-12-31T20:00Z", "--capacity", "10", "--db", p), "empty venue");
	assert_one_line_error(RUN("event", "add", "--name", "Gig\nNight", "--venue", "Hall",
				  "--starts-at", "2036-12-31T20:00Z", "--capacity", "10", "--db", p),
			      "name with a newline");
	/* malformed UTF-8 and bidi overrides, in the name and in the venue */
	{
		static const char *const bad[] = { "Gig \xed\xa0\x80", "Gig \xe0\x80\xaf",
						   "Gig \xf4\x90\x80\x80", "Gig \xe2\x80\xae" };
		for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
			char what[80];

			snprintf(what, sizeof what, "event text #%zu", i);
			assert_one_line_error(RUN("event", "add", "--name", bad[i], "--venue", "Hall",
						  "--starts-at", "2036-12-31T20:00Z", "--capacity",
						  "10", "--db", p), what);
			assert_one_line_error(RUN("event", "add", "--name", "Gig", "--venue", bad[i],
						  "--starts-at", "2036-12-31T20:00Z", "--capacity",
						  "10", "--db", p), what);
		}
	}
	/* each required flag missing in turn */
	assert_one_line_error(RUN("event", "add", "--venue", "Hall", "--starts-at",
				  "2036-12-31T20:00Z", "--capacity", "10", "--db", p), "no --name");
	assert_one_line_error(RUN("event", "add", "--name", "Gig", "--starts-at",
				  "2036-12-31T20:00Z", "--capacity", "10", "--db", p), "no --venue");
	assert_one_line_error(RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--capacity",
				  "10", "--db", p), "no --starts-at");
	assert_one_line_error(RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--starts-at",
				  "2036-12-31T20:00Z", "--db", p), "no --capacity");
	assert_one_line_error(RUN("event", "--name", "Gig", "--venue", "Hall", "--starts-at",
				  "2036-12-31T20:00Z", "--capacity", "10", "--db", p), "no 'add'");
	after = rows_now(e);
	assert_rows_same(&before, &after, "refused event add");
	assert_int_equal(after.events, 0);

	/* the good one: the id printed is the row written, time in UTC ms */
	id = run_event_add(e, "New Year's Gig", "250");
	assert_int_equal(n_lines(out), 1);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM events WHERE id = %lld AND "
				   "name = 'New Year''s Gig' AND venue = 'Hall' AND "
				   "starts_at = 2114366400000 AND capacity = 250", (long long)id), 1);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM events"), 1);
	/* a zone offset is the same instant */
	assert_int_equal(RUN("event", "add", "--name", "Gig 2", "--venue", "Hall", "--starts-at",
			     "2036-12-31T21:00+01:00", "--capacity", "5", "--db", p), 0);
	id = strtoll(out, NULL, 10);
	assert_int_equal(tu_countf(p, "SELECT starts_at FROM events WHERE id = %lld", (long long)id),
			 2114366400000LL);
}

/* ========================= order add ====================================== */

static void test_order_add_writes_order_tickets_and_outbox(void **state)
{
	struct tu_env *e = *state;
	const char *p = e->db_path;
	char id[16];
	int64_t ev, oid;

	init_db(e);
	ev = run_event_add(e, "Gig", "100");
	assert_int_equal(run_order_add(e, ev, "Ana Lima", "ana@example.com", "4", NULL, id), 0);

	assert_int_equal(tu_countf(p, "SELECT count(*) FROM orders"), 1);
	oid = tu_countf(p, "SELECT id FROM orders WHERE public_id = '%s'", id);
	assert_true(oid > 0);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM orders WHERE id = %lld AND event_id = %lld "
				   "AND buyer_name = 'Ana Lima' AND buyer_email = 'ana@example.com' "
				   "AND seats = 4 AND idempotency_key IS NULL", (long long)oid,
				   (long long)ev), 1);
	/* one ticket per seat, seats 1..4, distinct labels */
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM tickets"), 4);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM tickets WHERE order_id = %lld AND "
				   "event_id = %lld AND pdf_key IS NULL AND scanned_at IS NULL",
				   (long long)oid, (long long)ev), 4);
	assert_int_equal(tu_countf(p, "SELECT count(DISTINCT seat_label) FROM tickets WHERE "
				   "order_id = %lld", (long long)oid), 4);
	assert_int_equal(tu_countf(p, "SELECT count(DISTINCT seat_no) FROM tickets WHERE "
				   "seat_no BETWEEN 1 AND 4"), 4);
	/* two outbox rows naming the order, nothing in the stream yet */
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM outbox"), 2);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM outbox WHERE kind = 'render_tickets' AND "
				   "%s = %lld AND published_at IS NULL", jf("order_id"),
				   (long long)oid), 1);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM outbox WHERE kind = 'update_sales_counter' "
				   "AND %s = %lld AND %s = %lld AND %s = 4 AND published_at IS NULL",
				   jf("order_id"), (long long)oid, jf("event_id"), (long long)ev,
				   jf("seats")), 1);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM stream"), 0);

	/* a second order takes the next seats */
	run_order_add_ok(e, ev, "Mia Chen", "2", id);
	oid = tu_countf(p, "SELECT id FROM orders WHERE public_id = '%s'", id);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM tickets WHERE order_id = %lld AND "
				   "seat_no IN (5, 6)", (long long)oid), 2);
	assert_int_equal(tu_countf(p, "SELECT count(DISTINCT seat_label) FROM tickets"), 6);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM outbox"), 4);
}

static void test_order_idempotency_key(void **state)
{
	struct tu_env *e = *state;
	const char *p = e->db_path;
	char id[16], again[16];
	struct rows before, after;
	int64_t ev, ev2;
	char ev2s[32];

	init_db(e);
	ev = run_event_add(e, "Gig", "100");
	ev2 = run_event_add(e, "Other Gig", "100");
	snprintf(ev2s, sizeof ev2s, "%lld", (long long)ev2);
	assert_int_equal(run_order_add(e, ev, "Ana Lima", "ana@example.com", "2", "cart-7f3a", id), 0);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM orders WHERE public_id = '%s' AND "
				   "idempotency_key = 'cart-7f3a'", id), 1);

	/* the same request again: the same id, nothing written */
	before = rows_now(e);
	assert_int_equal(run_order_add(e, ev, "Ana Lima", "ana@example.com", "2", "cart-7f3a", again), 0);
	assert_string_equal(again, id);
	after = rows_now(e);
	assert_rows_same(&before, &after, "replayed order add");
	assert_int_equal(after.orders, 1);
	assert_int_equal(after.tickets, 2);
	assert_int_equal(after.outbox, 2);

	/* the same key for another order: refused, nothing written */
	assert_one_line_error(run_order_add(e, ev, "Ana Lima", "ana@example.com", "3", "cart-7f3a", NULL),
			      "same key, other seats");
	assert_one_line_error(run_order_add(e, ev, "Ana Lima", "other@example.com", "2", "cart-7f3a",
					NULL), "same key, other email");
	assert_one_line_error(run_order_add(e, ev, "Ana Lim", "ana@example.com", "2", "cart-7f3a", NULL),
			      "same key, other name");
	assert_one_line_error(run_order_add(e, ev2, "Ana Lima", "ana@example.com", "2", "cart-7f3a",
					NULL), "same key, other event");
	assert_non_null(strstr(err, "cart-7f3a"));
	after = rows_now(e);
	assert_rows_same(&before, &after, "order add reusing a key");

	/* once the relay has run, a replay still writes nothing */
	relay_drain(e);
	before = rows_now(e);
	assert_int_equal(before.stream, 2);
	assert_int_equal(run_order_add(e, ev, "Ana Lima", "ana@example.com", "2", "cart-7f3a", again), 0);
	assert_string_equal(again, id);
	after = rows_now(e);
	assert_rows_same(&before, &after, "replay after the relay");
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM outbox WHERE published_at IS NULL"), 0);

	/* another key is another order */
	assert_int_equal(run_order_add(e, ev, "Ana Lima", "ana@example.com", "2", "cart-8000", again), 0);
	assert_string_not_equal(again, id);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM orders"), 2);
}

/* ========================= capacity ======================================= */

static void test_capacity_sold_out_and_seats_left(void **state)
{
	struct tu_env *e = *state;
	const char *p = e->db_path;
	char id[16], first[16], again[16];
	struct rows before, after;
	int64_t ev, ev2;

	init_db(e);
	ev = run_event_add(e, "Small Room", "3");
	assert_int_equal(run_order_add(e, ev, "Ana Lima", "ana@example.com", "2", "small-1", first), 0);
	run_order_add_ok(e, ev, "Mia Chen", "1", id);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM tickets WHERE event_id = %lld",
				   (long long)ev), 3);

	before = rows_now(e);
	assert_one_line_error(run_order_add(e, ev, "Sam Okafor", "sam@example.com", "1", NULL, NULL),
			      "an order of 1 for a sold-out event");
	if (!strstr(err, "sold out"))
		fail_msg("the refusal should say 'sold out': %s", err);
	after = rows_now(e);
	assert_rows_same(&before, &after, "order add on a sold-out event");

	/* a replay of an order that was taken is still its first answer */
	assert_int_equal(run_order_add(e, ev, "Ana Lima", "ana@example.com", "2", "small-1", again), 0);
	assert_string_equal(again, first);
	after = rows_now(e);
	assert_rows_same(&before, &after, "replay on a sold-out event");

	/* two asked, one left: refused, naming what is left */
	ev2 = run_event_add(e, "Another Small Room", "3");
	run_order_add_ok(e, ev2, "Ana Lima", "2", id);
	before = rows_now(e);
	assert_one_line_error(run_order_add(e, ev2, "Sam Okafor", "sam@example.com", "2", NULL, NULL),
			      "an order of 2 with 1 seat left");
	if (!strstr(err, "1 seat") || !strstr(err, "left"))
		fail_msg("the refusal should name the seats left (1): %s", err);
	after = rows_now(e);
	assert_rows_same(&before, &after, "order add past capacity");
	/* the one seat left is still for sale */
	run_order_add_ok(e, ev2, "Sam Okafor", "1", id);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM tickets WHERE event_id = %lld AND "
				   "seat_no BETWEEN 1 AND 3", (long long)ev2), 3);
}

#define RACERS 10
#define RACE_CAPACITY 5

/* Ten buyers at once for five seats: the check must sit inside the write
 * transaction, or two of them read the same last seat and one oversells. */
static void test_capacity_holds_under_concurrent_orders(void **state)
{
	struct tu_env *e = *state;
	const char *p = e->db_path;
	char evs[32], logs[RACERS][400], emails[RACERS][64];
	pid_t pids[RACERS];
	int64_t ev;
	int i, ok = 0, sold_out = 0;

	init_db(e);
	ev = run_event_add(e, "Tiny Club", "5");
	snprintf(evs, sizeof evs, "%lld", (long long)ev);
	for (i = 0; i < RACERS; i++) {
		snprintf(logs[i], sizeof logs[i], "%s/order-%d.log", e->dir, i);
		snprintf(emails[i], sizeof emails[i], "buyer%d@example.com", i);
	}
	for (i = 0; i < RACERS; i++)
		pids[i] = tu_spawn((const char *const[]){ "order", "add", "--event", evs, "--name",
							  "Racer", "--email", emails[i], "--seats",
							  "1", "--db", p, NULL }, logs[i]);
	for (i = 0; i < RACERS; i++) {
		int rc = tu_reap(pids[i], 30000, "order add");
		size_t size;
		char *log = (char *)tu_slurp(logs[i], &size);

		if (rc == 0) {
			ok++;
			log[strcspn(log, "\n")] = '\0';
			assert_public_id(log);
		} else if (strstr(log, "sold out") && n_lines(log) == 1) {
			sold_out++;
		} else {
			fail_msg("order add %d: exit %d, want 0 or a one-line 'sold out': %s", i, rc,
				 log);
		}
		free(log);
	}
	assert_int_equal(ok, RACE_CAPACITY);
	assert_int_equal(sold_out, RACERS - RACE_CAPACITY);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM orders"), RACE_CAPACITY);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM tickets"), RACE_CAPACITY);
	assert_int_equal(tu_countf(p, "SELECT count(DISTINCT seat_no) FROM tickets"), RACE_CAPACITY);
	assert_int_equal(tu_countf(p, "SELECT min(seat_no) FROM tickets"), 1);
	assert_int_equal(tu_countf(p, "SELECT max(seat_no) FROM tickets"), RACE_CAPACITY);
	assert_int_equal(tu_countf(p, "SELECT count(DISTINCT seat_label) FROM tickets"), RACE_CAPACITY);
	/* every order has its ticket and its two outbox rows, no orphans */
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM orders o WHERE (SELECT count(*) FROM "
				   "tickets t WHERE t.order_id = o.id) = 1"), RACE_CAPACITY);
	assert_int_equal(tu_countf(p, "SELECT count(*) FROM outbox"), 2 * RACE_CAPACITY);
	assert_int_equal(tu_countf(p, "SELECT count(DISTINCT %s) FROM outbox "
				   "WHERE %s IN (SELECT id FROM orders)", jf("order_id"), jf("order_id")),
			 RACE_CAPACITY);
}

/*
 * PostgreSQL: order intake and a render of the same event at once.  The
 * render's transaction sets the PDF key of an order's tickets one row at a
 * time; each row's trigger updates the event's totals row, and the second
 * update of a row this transaction already changed checks its foreign key
 * again (FOR KEY SHARE of the event).  Intake locks that event first, then
 * updates the same totals row.  Intake's lock must let the key check
 * through, or each waits for the other: a deadlock, and one of the two fails.
 * Here the render's two rows are two statements, so that intake can start
 * between them: the render holds the totals row, intake holds the event and
 * waits for the totals, then the render checks the event's key.
 */
struct intake_arg {
	const char *db_path;
	int64_t event_id;
	enum sd_result r;
	char msg[300];
};

static void *intake_thread(void *p)
{
	struct intake_arg *a = p;
	struct order_new o = { .event_id = a->event_id, .name = "Late Buyer",
			       .email = "late@example.com", .seats = 1 };
	char public_id[ORDER_ID_MAX];
	struct db *db = NULL;
	int replayed = 0;

	if ((a->r = db_open(a->db_path, 0, DB_SYNC_FULL, &db)) == SD_OK)
		a->r = order_add(db, &o, public_id, &replayed);
	if (a->r != SD_OK)
		snprintf(a->msg, sizeof a->msg, "%s", err_msg());
	db_close(db);
	return NULL;
}

static void set_pdf_key(struct db *db, int64_t ticket_id)
{
	struct db_stmt *st = db_stmt(db, "UPDATE tickets SET pdf_key = 'tickets/x.pdf' "
					 "WHERE id = ?1");

	assert_non_null(st);
	db_bind_int(st, 1, ticket_id);
	if (db_run(st) != SD_OK)
		fail_msg("the render's update of ticket %lld: %s", (long long)ticket_id,
			 err_msg());
}

static void test_intake_and_render_of_one_event_do_not_deadlock(void **state)
{
	struct tu_env *e = *state;
	struct event_new ev = { "Busy Night", "Hall", 1900000000000LL, 10 };
	struct order_new o = { .name = "Ana Lima", .email = "ana@example.com", .seats = 2 };
	struct intake_arg a = { 0 };
	char public_id[ORDER_ID_MAX];
	struct db *render = NULL;
	int64_t t1, t2;
	pthread_t th;
	int replayed = 0, i;

	if (!tu_pg())
		TU_SKIP("SQLite has one writer at a time: no such interleaving");
	assert_int_equal(event_add(e->db, &ev, &o.event_id), SD_OK);
	assert_int_equal(order_add(e->db, &o, public_id, &replayed), SD_OK);
	t1 = tu_countf(e->db_path, "SELECT min(id) FROM tickets");
	t2 = tu_countf(e->db_path, "SELECT max(id) FROM tickets");
	assert_true(t1 < t2);

	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &render), SD_OK);
	assert_int_equal(db_begin(render), SD_OK);
	set_pdf_key(render, t1);		/* holds the event's totals row */

	a.db_path = e->db_path;
	a.event_id = o.event_id;
	assert_int_equal(pthread_create(&th, NULL, intake_thread, &a), 0);
	/* intake holds the event's row and waits for the totals row */
	for (i = 0; i < 1000 && tu_pg_int("SELECT count(*) FROM pg_stat_activity WHERE "
					  "wait_event_type = 'Lock' AND query LIKE "
					  "'INSERT INTO orders%'") < 1; i++)
		tu_sleep_ms(10);
	assert_true(i < 1000);
	set_pdf_key(render, t2);		/* checks the event's key */
	assert_int_equal(db_commit(render), SD_OK);
	db_close(render);
	assert_int_equal(pthread_join(th, NULL), 0);
	if (a.r != SD_OK)
		fail_msg("intake beside the render: %s", a.msg);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM orders"), 2);
	assert_int_equal(tu_countf(e->db_path, "SELECT tickets_pdf FROM event_totals"), 2);
}

/* What 0010 added, taken away (the tickets table as 0002 made it): with
 * 0006-0009's own, the file is as schema 5 left it. */
/* what 0012 added, taken away again */
#define SCHEMA_BEFORE_0020 "DROP TABLE shop_line; "
#define SCHEMA_BEFORE_0019 SCHEMA_BEFORE_0020 "DROP TABLE payment_backs; "                         \
	"ALTER TABLE orders DROP COLUMN refunded_minor; "                       \
	"ALTER TABLE orders DROP COLUMN disputed_at; ALTER TABLE orders DROP COLUMN dispute; "
#define SCHEMA_BEFORE_0018 SCHEMA_BEFORE_0019 "DROP TABLE schedules; "
#define SCHEMA_BEFORE_0017 SCHEMA_BEFORE_0018                                                 \
	"DROP TRIGGER stream_lane; DROP INDEX stream_leases; DROP TABLE controls; "             \
	"DROP TABLE cancelled_jobs; "
#define SCHEMA_BEFORE_0016 SCHEMA_BEFORE_0017                                                 \
	"DROP TABLE token_queues; DROP TABLE sqs_dedup; DROP TABLE sqs_queues; "              \
	"DROP INDEX stream_group; DROP INDEX stream_claim; ALTER TABLE stream DROP COLUMN queue; " \
	"ALTER TABLE stream DROP COLUMN grp; ALTER TABLE stream DROP COLUMN first_leased_at; " \
	"ALTER TABLE dead_jobs DROP COLUMN queue; "                                            \
	"CREATE INDEX stream_claim ON stream (priority, visible_at, id); "
#define SCHEMA_BEFORE_0015 SCHEMA_BEFORE_0016                                                 \
	"DROP TABLE event_run_orders; DROP TABLE event_runs; DROP INDEX orders_event_id; "     \
	"ALTER TABLE events DROP COLUMN cancelled_at; ALTER TABLE events DROP COLUMN "         \
	"cancel_reason; ALTER TABLE events DROP COLUMN change_no; ALTER TABLE events DROP "    \
	"COLUMN reminders; "
#define SCHEMA_BEFORE_0014 SCHEMA_BEFORE_0015                                                 \
	"DROP TABLE effects; DROP TABLE refunds; DROP TABLE holds; DROP INDEX orders_payment_ref; " \
	"ALTER TABLE events DROP COLUMN price_minor; ALTER TABLE events DROP COLUMN currency; "  \
	"ALTER TABLE orders DROP COLUMN amount_minor; ALTER TABLE orders DROP COLUMN currency; " \
	"ALTER TABLE orders DROP COLUMN payment_ref; "
#define SCHEMA_BEFORE_0013 SCHEMA_BEFORE_0014                                                 \
	"ALTER TABLE events DROP COLUMN closed_at; ALTER TABLE orders DROP COLUMN payment; "
#define SCHEMA_BEFORE_0012 SCHEMA_BEFORE_0013                                                 \
	"DROP TABLE scan_minutes; DROP INDEX scans_at; DROP INDEX scans_nonce; "              \
	"ALTER TABLE scans DROP COLUMN door_id; ALTER TABLE scans DROP COLUMN code_sha; "     \
	"CREATE UNIQUE INDEX scans_nonce ON scans (device, nonce) WHERE nonce IS NOT NULL; "
/* what 0011 added, taken away again */
#define SCHEMA_BEFORE_0011 SCHEMA_BEFORE_0012                                                 \
	"DROP TABLE identity_marks; DROP INDEX email_sends_key; DROP INDEX outbox_job; "      \
	"ALTER TABLE email_sends DROP COLUMN provider_key; ALTER TABLE outbox DROP COLUMN job_id; "
#define SCHEMA_BEFORE_0010 SCHEMA_BEFORE_0011                                                  \
	"DROP TABLE order_changes; DROP TABLE scans; DROP TABLE queue_history; "             \
	"DROP INDEX orders_event_time; DROP INDEX orders_email; "                            \
	"ALTER TABLE orders DROP COLUMN resends; ALTER TABLE orders DROP COLUMN cancelled_at; " \
	"ALTER TABLE done_totals DROP COLUMN failed; ALTER TABLE email_sends DROP COLUMN target; " \
	"CREATE TABLE tickets_5 (id INTEGER PRIMARY KEY, order_id INTEGER NOT NULL "          \
	" REFERENCES orders (id), event_id INTEGER NOT NULL REFERENCES events (id), "         \
	" seat_no INTEGER NOT NULL CHECK (seat_no >= 1), seat_label TEXT NOT NULL, "           \
	" pdf_key TEXT, scanned_at INTEGER, UNIQUE (event_id, seat_no), "                     \
	" UNIQUE (event_id, seat_label)) STRICT; "                                             \
	"INSERT INTO tickets_5 SELECT id, order_id, event_id, seat_no, seat_label, pdf_key, "  \
	" scanned_at FROM tickets; DROP TABLE tickets; ALTER TABLE tickets_5 RENAME TO tickets; " \
	"CREATE INDEX tickets_order ON tickets (order_id); "                                   \
	"CREATE TRIGGER tickets_within_capacity BEFORE INSERT ON tickets "                     \
	" WHEN NEW.seat_no > (SELECT capacity FROM events WHERE id = NEW.event_id) "           \
	" BEGIN SELECT RAISE(ABORT, 'sold out'); END; "

/* relay and worker until the stream and the outbox are empty */
static void drain_all(const struct tu_env *e)
{
	int round;

	for (round = 0; round < 5; round++) {
		relay_drain(e);
		worker_drain(e);
		if (tu_count(e->db_path, "SELECT count(*) FROM outbox WHERE published_at IS NULL") ==
			    0 &&
		    tu_count(e->db_path, "SELECT count(*) FROM stream") == 0)
			return;
	}
	fail_msg("the pipeline did not drain");
}

/*
 * The box office's commands: order resend, set-email, cancel and find, as a
 * person types them: what each prints, its exit status on bad input and
 * on a state that forbids it, and order show's account of it all.
 */
static void test_order_changes_from_the_cli(void **state)
{
	struct tu_env *e = *state;
	char a[ORDER_ID_MAX], b[ORDER_ID_MAX], c[ORDER_ID_MAX];
	int64_t ev;

	init_db(e);
	ev = run_event_add(e, "Changes Night", "3");
	run_order_add_ok(e, ev, "Ana Lima", "2", a);
	run_order_add_ok(e, ev, "Bo Chen", "1", b);
	assert_int_equal(run_order_add(e, ev, "Cy Diaz", "cy@example.com", "1", NULL, c), 2);
	assert_non_null(strstr(err, "sold out"));
	drain_all(e);

	assert_int_equal(RUN("order", "resend", a, "--db", e->db_path), 0);
	assert_non_null(strstr(out, "resend 1 queued"));
	assert_int_equal(RUN("order", "set-email", a, "ana.new@example.com", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "changed"));
	assert_int_equal(RUN("order", "set-email", a, "ana.new@example.com", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "nothing changed"));
	assert_one_line_error(RUN("order", "set-email", a, "nope", "--db", e->db_path),
			      "set-email to a non-address");
	assert_one_line_error(RUN("order", "resend", "TNOSUCH22", "--db", e->db_path),
			      "resend of an unknown order");
	assert_one_line_error(RUN("order", "resend", "x y", "--db", e->db_path),
			      "resend of a malformed id");
	drain_all(e);

	assert_int_equal(RUN("order", "cancel", b, "--reason", "double booking", "--db",
			     e->db_path), 0);
	assert_non_null(strstr(out, "1 seat back on sale"));
	assert_int_equal(RUN("order", "cancel", b, "--db", e->db_path), 0);
	assert_non_null(strstr(out, "nothing changed"));
	assert_int_equal(RUN("order", "resend", b, "--db", e->db_path), 3);
	assert_non_null(strstr(err, "cancelled"));
	run_order_add_ok(e, ev, "Cy Diaz", "1", c);	/* the seat Bo gave back */
	drain_all(e);

	assert_int_equal(RUN("order", "show", a, "--db", e->db_path), 0);
	assert_non_null(strstr(out, "buyer    Ana Lima <ana.new@example.com>"));
	assert_non_null(strstr(out, "resend r1 sent"));
	assert_non_null(strstr(out, "email  by cli ("));
	assert_non_null(strstr(out, ": buyer@example.com"));
	assert_int_equal(RUN("order", "show", b, "--db", e->db_path), 0);
	assert_non_null(strstr(out, "(cancelled)"));
	assert_non_null(strstr(out, "cancel   sent"));
	assert_non_null(strstr(out, "cancelled\n"));
	assert_non_null(strstr(out, ": double booking"));

	assert_int_equal(RUN("order", "find", "ANA.NEW@EXAMPLE.COM", "--db", e->db_path), 0);
	assert_non_null(strstr(out, a));
	assert_int_equal(RUN("order", "find", "chen", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "cancelled"));
	assert_int_equal(RUN("order", "find", "nobody-at-all", "--db", e->db_path), 1);
	assert_int_equal(RUN("check", "--db", e->db_path), 0);
}

/* ========================= bad input ====================================== */

static void test_order_bad_input_refused(void **state)
{
	struct tu_env *e = *state;
	struct rows before, after;
	char long_name[202], ev[32], id[16];
	int64_t evid;
	size_t i;
	json_t *j;
	static const char *const bad_emails[] = { "nope", "a@b", "a b@example.com", "",
						  "@example.com", "a@@example.com" };
	static const char *const bad_names[] = { "", "Ana\nLima", "Ana\rLima", "Ana\tLima",
						 "Ana\x7fLima", "Jos\xe9" /* Latin-1, not UTF-8 */,
						 "Ana \xed\xa0\x80" /* a surrogate, U+D800 */,
						 "Ana \xe0\x80\xaf" /* an overlong '/' */,
						 "Ana \xf4\x90\x80\x80" /* past U+10FFFF */,
						 "Ana \xc2\x85" /* C1 control NEL */,
						 "Ana \xe2\x80\xae" /* U+202E RIGHT-TO-LEFT OVERRIDE */,
						 "Ana \xe2\x81\xa6" /* U+2066 LEFT-TO-RIGHT ISOLATE */,
						 "Ana \xc3" /* cut short */ };
	static const char *const bad_seats[] = { "0", "-1", "101", "two", "" };

	init_db(e);
	evid = run_event_add(e, "Gig", "1000");
	snprintf(ev, sizeof ev, "%lld", (long long)evid);
	memset(long_name, 'a', 201);
	long_name[201] = '\0';
	before = rows_now(e);

	for (i = 0; i < sizeof bad_emails / sizeof bad_emails[0]; i++) {
		char what[80];
		snprintf(what, sizeof what, "email '%s'", bad_emails[i]);
		assert_one_line_error(run_order_add(e, evid, "Ana Lima", bad_emails[i], "1", NULL, NULL),
				      what);
	}
	/* a header injection: refused (its one-line message is checked on its own
	 * in test_errors_echo_input_on_one_line) */
	assert_refused(run_order_add(e, evid, "Ana Lima", "x@example.com\r\nBcc: y@example.com", "1",
				 NULL, NULL), "email with CRLF and a Bcc header");
	for (i = 0; i < sizeof bad_names / sizeof bad_names[0]; i++) {
		char what[80];
		snprintf(what, sizeof what, "name #%zu", i);
		assert_one_line_error(run_order_add(e, evid, bad_names[i], "ana@example.com", "1", NULL,
						NULL), what);
	}
	assert_one_line_error(run_order_add(e, evid, long_name, "ana@example.com", "1", NULL, NULL),
			      "a 201-byte name");
	for (i = 0; i < sizeof bad_seats / sizeof bad_seats[0]; i++) {
		char what[80];
		snprintf(what, sizeof what, "seats '%s'", bad_seats[i]);
		assert_one_line_error(run_order_add(e, evid, "Ana Lima", "ana@example.com", bad_seats[i],
						NULL, NULL), what);
	}
	assert_one_line_error(run_order_add(e, 4242, "Ana Lima", "ana@example.com", "1", NULL, NULL),
			      "an unknown event");
	assert_non_null(strstr(err, "4242"));
	assert_one_line_error(run_order_add(e, 0, "Ana Lima", "ana@example.com", "1", NULL, NULL),
			      "event 0");
	assert_one_line_error(RUN("order", "add", "--event", "x", "--name", "Ana", "--email",
				  "ana@example.com", "--seats", "1", "--db", e->db_path), "event x");
	assert_one_line_error(run_order_add(e, evid, "Ana Lima", "ana@example.com", "1", "has space",
					NULL), "an idempotency key with a space");
	/* each required flag missing in turn */
	assert_one_line_error(RUN("order", "add", "--name", "Ana", "--email", "ana@example.com",
				  "--seats", "1", "--db", e->db_path), "no --event");
	assert_one_line_error(RUN("order", "add", "--event", ev, "--email", "ana@example.com",
				  "--seats", "1", "--db", e->db_path), "no --name");
	assert_one_line_error(RUN("order", "add", "--event", ev, "--name", "Ana", "--seats", "1",
				  "--payment", "cheque", "--db", e->db_path), "--payment cheque");
	assert_one_line_error(RUN("order", "add", "--event", ev, "--name", "Ana", "--email",
				  "ana@example.com", "--db", e->db_path), "no --seats");
	after = rows_now(e);
	assert_rows_same(&before, &after, "refused order add");
	assert_int_equal(after.orders, 0);

	/* at the limits: 200 bytes, 100 seats */
	long_name[200] = '\0';
	assert_int_equal(run_order_add(e, evid, long_name, "ana@example.com", "100", NULL, id), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM tickets"), 100);

	/* accents (UTF-8) are a name like any other, and come back intact */
	assert_int_equal(run_order_add(e, evid, "Jos\xc3\xa9 M\xc3\xbcller", "jose@example.com", "1",
				   NULL, id), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM orders WHERE public_id = '%s' "
				   "AND buyer_name = 'Jos\xc3\xa9 M\xc3\xbcller' AND "
				   "length(buyer_name) = 11", id), 1);
	j = show_json(e, id);
	assert_string_equal(jstr(j, "name"), "Jos\xc3\xa9 M\xc3\xbcller");
	json_decref(j);
	assert_int_equal(RUN("order", "show", id, "--db", e->db_path), 0);
	assert_non_null(strstr(out, "Jos\xc3\xa9 M\xc3\xbcller <jose@example.com>"));
}

/*
 * A message that quotes what it refuses must stay one line: a CR or LF in
 * the input must not break the "stagedoor: ..." line (nor put a forged line
 * in a log that collects stderr).
 */
static void test_errors_echo_input_on_one_line(void **state)
{
	struct tu_env *e = *state;
	struct rows before, after;
	char problems[4096] = "";
	size_t used = 0;
	int64_t ev;
	int rc;

	init_db(e);
	ev = run_event_add(e, "Gig", "10");
	before = rows_now(e);

#define CHECK_ONE_LINE(what)                                                                   \
	do {                                                                                   \
		if (rc == 0 || strncmp(err, "stagedoor: ", 11) != 0 || n_lines(err) != 1 ||    \
		    out[0])                                                                    \
			used += (size_t)snprintf(problems + used, sizeof problems - used,      \
						 "\n  %s: rc=%d stderr has %d lines: '%s'",    \
						 what, rc, n_lines(err), err);                 \
	} while (0)

	rc = run_order_add(e, ev, "Ana Lima", "x@example.com\r\nBcc: y@example.com", "1", NULL, NULL);
	CHECK_ONE_LINE("order add --email 'x@example.com\\r\\nBcc: y@example.com'");
	rc = run_order_add(e, ev, "Ana Lima", "ana@example.com\n", "1", NULL, NULL);
	CHECK_ONE_LINE("order add --email 'ana@example.com\\n'");
	rc = RUN("event", "add", "--name", "Gig", "--venue", "Hall", "--starts-at",
		 "2036-12-31T20:00Z\nstagedoor: ok", "--capacity", "10", "--db", e->db_path);
	CHECK_ONE_LINE("event add --starts-at '2036-12-31T20:00Z\\nstagedoor: ok'");
	rc = RUN("order", "show", "T23456789\nX", "--db", e->db_path);
	CHECK_ONE_LINE("order show 'T23456789\\nX'");
	rc = run_order_add(e, ev, "Ana Lima", "ana@example.com", "1\n2", NULL, NULL);
	CHECK_ONE_LINE("order add --seats '1\\n2'");
#undef CHECK_ONE_LINE

	after = rows_now(e);
	assert_rows_same(&before, &after, "refused commands");
	if (used)
		fail_msg("error messages that quote the input broke the one-line rule:%s", problems);
}

/* ========================= order show ===================================== */

static void test_order_show_before_and_after_the_pipeline(void **state)
{
	struct tu_env *e = *state;
	char id[16];
	json_t *j, *tickets, *t, *jobs, *job, *entries;
	int64_t ev, oid;
	size_t i, k;
	int seen_render = 0, seen_count = 0, seen_send = 0;

	init_db(e);
	ev = run_event_add(e, "Show Night", "50");
	assert_int_equal(run_order_add(e, ev, "Zo\xc3\xab Martin", "zoe@example.com", "3", NULL, id), 0);
	oid = tu_countf(e->db_path, "SELECT id FROM orders WHERE public_id = '%s'", id);

	/* before any worker ran */
	j = show_json(e, id);
	assert_string_equal(jstr(j, "id"), id);
	assert_string_equal(jstr(j, "event"), "Show Night");
	assert_int_equal(jint(j, "event_id"), ev);
	assert_string_equal(jstr(j, "name"), "Zo\xc3\xab Martin");
	assert_string_equal(jstr(j, "email"), "zoe@example.com");
	assert_int_equal(jint(j, "seats"), 3);
	assert_false(jbool(j, "pdf_stored"));
	assert_false(jbool(j, "email_sent"));
	tickets = json_object_get(j, "tickets");
	assert_true(json_is_array(tickets));
	assert_int_equal(json_array_size(tickets), 3);
	json_array_foreach(tickets, i, t) {
		const char *seat = jstr(t, "seat");
		assert_true(seat[0] != '\0');
		assert_false(jbool(t, "pdf_stored"));
		assert_true(json_is_null(json_object_get(t, "scanned_at")));
		for (k = 0; k < i; k++)
			assert_string_not_equal(jstr(json_array_get(tickets, k), "seat"), seat);
		assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM tickets WHERE order_id = "
					   "%lld AND seat_label = '%s'", (long long)oid, seat), 1);
	}
	json_decref(j);

	/* the text form says the same */
	assert_int_equal(RUN("order", "show", id, "--db", e->db_path), 0);
	assert_non_null(strstr(out, id));
	assert_non_null(strstr(out, "Show Night"));
	assert_non_null(strstr(out, "not stored yet"));
	assert_non_null(strstr(out, "not sent yet"));

	/* one round: rendered and counted; send_tickets waits for the relay */
	relay_drain(e);
	worker_drain(e);
	j = show_json(e, id);
	assert_true(jbool(j, "pdf_stored"));
	json_decref(j);

	run_pipeline(e, id);
	j = show_json(e, id);
	assert_true(jbool(j, "pdf_stored"));
	assert_true(jbool(j, "email_sent"));
	json_array_foreach(json_object_get(j, "tickets"), i, t)
		assert_true(jbool(t, "pdf_stored"));
	jobs = json_object_get(j, "jobs");
	assert_true(json_is_array(jobs));
	assert_int_equal(json_array_size(jobs), 3);
	json_array_foreach(jobs, i, job) {
		const char *kind = jstr(job, "kind");
		entries = json_object_get(job, "entries");
		if (!json_is_array(entries) || json_array_size(entries) != 1 ||
		    strcmp(jstr(json_array_get(entries, 0), "state"), "done") != 0)
			fail_msg("job %s (%s) should have one entry in state done", jstr(job, "job_id"),
				 kind);
		seen_render += strcmp(kind, "render_tickets") == 0;
		seen_count += strcmp(kind, "update_sales_counter") == 0;
		seen_send += strcmp(kind, "send_tickets") == 0;
	}
	assert_int_equal(seen_render, 1);
	assert_int_equal(seen_count, 1);
	assert_int_equal(seen_send, 1);
	json_decref(j);
	assert_int_equal(tu_countf(e->db_path, "SELECT orders * 1000 + seats_sold FROM sales_counters "
				   "WHERE event_id = %lld", (long long)ev), 1003);

	assert_int_equal(RUN("order", "show", id, "--db", e->db_path), 0);
	assert_non_null(strstr(out, "email    sent"));
	assert_null(strstr(out, "not stored yet"));

	/* an unknown id */
	assert_one_line_error(RUN("order", "show", "TZZZZZZZZZ", "--db", e->db_path),
			      "order show of an unknown id");
	assert_one_line_error(RUN("order", "show", "TZZZZZZZZZ", "--json", "--db", e->db_path),
			      "order show --json of an unknown id");
	assert_one_line_error(RUN("order", "show", "--db", e->db_path), "order show without an id");
}

/* ========================= the kept totals ================================ */

/* Events whose event_totals row is missing or differs from a full count of
 * their orders, tickets, PDF keys and sent ticket emails. */
static const char SQL_TOTALS_WRONG[] =
	"SELECT count(*) FROM events e LEFT JOIN event_totals k ON k.event_id = e.id "
	"WHERE k.event_id IS NULL "
	"OR k.orders <> (SELECT count(*) FROM orders WHERE event_id = e.id) "
	"OR k.tickets <> (SELECT count(*) FROM tickets WHERE event_id = e.id) "
	"OR k.tickets_pdf <> (SELECT count(pdf_key) FROM tickets WHERE event_id = e.id) "
	"OR k.pdfs <> (SELECT count(*) FROM (SELECT DISTINCT order_id, pdf_key FROM tickets "
	" WHERE event_id = e.id AND pdf_key IS NOT NULL) AS d) "
	"OR k.emails_sent <> (SELECT count(*) FROM email_sends s JOIN orders o ON o.id = s.order_id "
	" WHERE o.event_id = e.id AND s.kind = 'tickets' AND s.sent_at IS NOT NULL)";

static void assert_totals_exact(const struct tu_env *e, const char *what)
{
	int64_t n = tu_count(e->db_path, SQL_TOTALS_WRONG);

	if (n != 0)
		fail_msg("%s: %lld event(s) whose kept totals differ from a full count", what,
			 (long long)n);
}

/* orders, tickets, tickets with a PDF key, PDFs, emails sent: one number */
static int64_t totals_of(const struct tu_env *e, int64_t ev)
{
	return tu_countf(e->db_path, "SELECT orders * 10000 + tickets * 1000 + tickets_pdf * 100 + "
			 "pdfs * 10 + emails_sent FROM event_totals WHERE event_id = %lld",
			 (long long)ev);
}

static void test_totals_follow_orders_replays_and_the_pipeline(void **state)
{
	struct tu_env *e = *state;
	char a[16], b[16], c[16], again[16];
	int64_t ev1, ev2;

	init_db(e);
	ev1 = run_event_add(e, "Totals One", "50");
	ev2 = run_event_add(e, "Totals Two", "50");
	assert_totals_exact(e, "two events, no orders");
	assert_int_equal(totals_of(e, ev1), 0);

	run_order_add_ok(e, ev1, "Ana Lima", "2", a);
	assert_int_equal(run_order_add(e, ev1, "Bo Chen", "bo@example.com", "1", "cart-1", b), 0);
	assert_int_equal(run_order_add(e, ev2, "Cy Diaz", "cy@example.com", "3", NULL, c), 0);
	/* a replay and a refused order change nothing */
	assert_int_equal(run_order_add(e, ev1, "Bo Chen", "bo@example.com", "1", "cart-1", again), 0);
	assert_string_equal(again, b);
	assert_refused(run_order_add(e, ev1, "Bo Chen", "bo@example.com", "2", "cart-1", NULL),
		       "the same key for another order");
	assert_refused(run_order_add(e, ev2, "Dee", "dee@example.com", "48", NULL, NULL),
		       "an order past the capacity");
	assert_totals_exact(e, "orders, a replay and refusals");
	assert_int_equal(totals_of(e, ev1), 23000);
	assert_int_equal(totals_of(e, ev2), 13000);

	/* one round renders and counts; send_tickets waits for the next */
	relay_drain(e);
	worker_drain(e);
	assert_totals_exact(e, "rendered and counted");
	assert_int_equal(totals_of(e, ev1), 23320);
	run_pipeline(e, a);
	run_pipeline(e, b);
	run_pipeline(e, c);
	assert_totals_exact(e, "sent");
	assert_int_equal(totals_of(e, ev1), 23322);
	assert_int_equal(totals_of(e, ev2), 13311);
	assert_int_equal(RUN("check", "--db", e->db_path), 0);

	/* a row changed by hand moves the totals too, and check holds them */
	assert_int_equal(tu_countf(e->db_path, "UPDATE tickets SET pdf_key = NULL WHERE id = "
				   "(SELECT min(id) FROM tickets WHERE event_id = %lld) RETURNING 0",
				   (long long)ev2), 0);
	assert_totals_exact(e, "one ticket's PDF key cleared");
	assert_int_equal(totals_of(e, ev2), 13211);
}

/* A database that holds orders from before the totals: the migration seeds
 * them from the rows, and from then on the triggers keep them. */
static void test_totals_seeded_when_migrating(void **state)
{
	struct tu_env *e = *state;
	char a[16], b[16], c[16], *drops = NULL;
	int64_t ev;
	sqlite3 *h;
	sqlite3_stmt *st;

	TU_SQLITE_ONLY();	/* it takes the file back to schema 5 with SQLite itself */
	init_db(e);
	ev = run_event_add(e, "Old Box", "50");
	run_order_add_ok(e, ev, "Ana Lima", "2", a);
	run_order_add_ok(e, ev, "Bo Chen", "1", b);
	run_pipeline(e, a);
	run_pipeline(e, b);

	/* back to the schema before 0006 (and so before 0007's indexes and 0008's tables) */
	assert_int_equal(sqlite3_open(e->db_path, &h), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT group_concat('DROP TRIGGER ' || name, ';') "
					    "FROM sqlite_master WHERE type = 'trigger' AND name "
					    "LIKE 'event_totals_%'", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	drops = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	assert_int_equal(sqlite3_exec(h, drops, NULL, NULL, NULL), SQLITE_OK);
	free(drops);
	assert_int_equal(sqlite3_exec(h, "DROP INDEX stream_job_id; DROP INDEX done_jobs_job_id; "
				      "DROP TABLE event_totals; DROP TABLE blobs; DROP TABLE api_tokens; "
				      SCHEMA_BEFORE_0010 "PRAGMA user_version = 5", NULL,
				      NULL, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, "SELECT count(*) FROM sqlite_master WHERE name "
					    "LIKE 'event_totals%'", -1, &st, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(st), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(st, 0), 0);
	sqlite3_finalize(st);
	sqlite3_close(h);	/* tu_count would migrate it */

	/* the next command migrates */
	assert_int_equal(RUN("check", "--db", e->db_path), 0);
	assert_int_equal(tu_count(e->db_path, "PRAGMA user_version"), db_migration_count);
	assert_totals_exact(e, "seeded by the migration");
	assert_int_equal(totals_of(e, ev), 23322);

	run_order_add_ok(e, ev, "Cy Diaz", "4", c);
	run_pipeline(e, c);
	assert_totals_exact(e, "an order after the migration");
	assert_int_equal(totals_of(e, ev), 37733);
	assert_int_equal(RUN("check", "--db", e->db_path), 0);
}

/* ========================= scan and the key =============================== */

static void test_scan_codes_from_the_pdf(void **state)
{
	struct tu_env *e = *state;
	char id[16], codes[4][CODE_LEN + 1], bad[CODE_LEN + 1], keypath[400], wal[400], pdf[400];
	char txt[400], hex[2 * 32 + 1];
	unsigned char *key, *file, *text;
	struct stat sb;
	size_t key_len, file_len, text_len, i;
	static const int flip_at[] = { 0, 7, 20, 31, 40, CODE_LEN - 1 };
	int64_t ev;
	int n, rc;

	init_db(e);
	ev = run_event_add(e, "Door Night", "20");
	assert_int_equal(run_order_add(e, ev, "Jos\xc3\xa9 M\xc3\xbcller", "jose@example.com", "2", NULL,
				   id), 0);
	run_pipeline(e, id);

	n = codes_from_pdf(e, id, codes, 4);
	if (n != 2)
		fail_msg("want 2 codes of %d base32 characters in the PDF, found %d", CODE_LEN, n);
	assert_string_not_equal(codes[0], codes[1]);
	/* the page shows the buyer's name as it was given */
	snprintf(txt, sizeof txt, "%s/%s.txt", e->dir, id);
	text = tu_slurp(txt, &text_len);
	assert_non_null(strstr((char *)text, "Jos\xc3\xa9 M\xc3\xbcller"));
	assert_non_null(strstr((char *)text, id));
	free(text);

	/* first scan admits, the second says when */
	rc = RUN("scan", codes[0], "--db", e->db_path);
	if (rc != 0 || strncmp(out, "admitted", 8) != 0)
		fail_msg("first scan: rc=%d stdout='%s' stderr='%s'", rc, out, err);
	assert_non_null(strstr(out, id));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM tickets WHERE scanned_at IS NOT "
				   "NULL"), 1);
	rc = RUN("scan", codes[0], "--db", e->db_path);
	if (rc != 3 || strncmp(out, "already scanned at", 18) != 0)
		fail_msg("second scan: rc=%d stdout='%s' stderr='%s'", rc, out, err);
	/* case is forgiven: still the same ticket */
	strcpy(bad, codes[0]);
	for (i = 0; bad[i]; i++)
		if (bad[i] >= 'A' && bad[i] <= 'Z')
			bad[i] = (char)(bad[i] - 'A' + 'a');
	assert_int_equal(RUN("scan", bad, "--db", e->db_path), 3);

	/* one character changed, anywhere (the last one carries padding bits) */
	for (i = 0; i < sizeof flip_at / sizeof flip_at[0]; i++) {
		int at = flip_at[i];
		strcpy(bad, codes[1]);
		bad[at] = base32_flip(bad[at]);
		rc = RUN("scan", bad, "--db", e->db_path);
		if (rc != 4 || strncmp(out, "invalid", 7) != 0)
			fail_msg("code with character %d changed: rc=%d stdout='%s'", at, rc, out);
	}
	/* truncated, extended, garbage */
	strcpy(bad, codes[1]);
	bad[CODE_LEN - 1] = '\0';
	rc = RUN("scan", bad, "--db", e->db_path);
	if (rc != 4 || strncmp(out, "invalid", 7) != 0)
		fail_msg("code without its last character: rc=%d stdout='%s'", rc, out);
	bad[26] = '\0';
	rc = RUN("scan", bad, "--db", e->db_path);
	if (rc != 4 || strncmp(out, "invalid", 7) != 0)
		fail_msg("half a code: rc=%d stdout='%s'", rc, out);
	rc = RUN("scan", "hello", "--db", e->db_path);
	if (rc != 4 || strncmp(out, "invalid", 7) != 0)
		fail_msg("scan hello: rc=%d stdout='%s'", rc, out);
	rc = RUN("scan", "", "--db", e->db_path);
	if (rc != 4 || strncmp(out, "invalid", 7) != 0)
		fail_msg("scan of an empty code: rc=%d stdout='%s'", rc, out);
	/* none of those admitted anybody */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM tickets WHERE scanned_at IS NOT "
				   "NULL"), 1);

	/* the other ticket is its own admission */
	rc = RUN("scan", codes[1], "--db", e->db_path);
	if (rc != 0 || strncmp(out, "admitted", 8) != 0)
		fail_msg("scan of the second ticket: rc=%d stdout='%s' stderr='%s'", rc, out, err);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM tickets WHERE scanned_at IS NOT "
				   "NULL"), 2);

	/* the key: beside the database, 32 bytes, mode 0600 ... */
	snprintf(keypath, sizeof keypath, "%s/ticket.key", e->dir);
	assert_int_equal(stat(keypath, &sb), 0);
	assert_true(S_ISREG(sb.st_mode));
	if ((sb.st_mode & 07777) != 0600)
		fail_msg("ticket.key has mode %04o, want 0600", (unsigned)(sb.st_mode & 07777));
	key = tu_slurp(keypath, &key_len);
	assert_int_equal(key_len, 32);
	for (i = 0; i < key_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", key[i]);
	/* ... and in neither the database, its WAL nor the PDF, raw or in hex */
	snprintf(wal, sizeof wal, "%s-wal", e->db_path);
	snprintf(pdf, sizeof pdf, "%s/blobs/tickets/%s.pdf", e->dir, id);
	{
		const char *files[] = { e->db_path, wal, pdf };
		for (i = 0; i < 3; i++) {
			if (stat(files[i], &sb) != 0)
				continue;
			file = tu_slurp(files[i], &file_len);
			if (memmem(file, file_len, key, key_len))
				fail_msg("the ticket key's bytes are in %s", files[i]);
			if (memmem(file, file_len, hex, 64))
				fail_msg("the ticket key in hex is in %s", files[i]);
			free(file);
		}
	}
	free(key);
}

/* init makes the key once; a second init keeps it (codes stay valid). */
static void test_init_makes_the_key_once(void **state)
{
	struct tu_env *e = *state;
	char keypath[400];
	unsigned char *k1, *k2;
	size_t n1, n2;
	struct stat sb;

	snprintf(keypath, sizeof keypath, "%s/ticket.key", e->dir);
	assert_int_not_equal(stat(keypath, &sb), 0);
	init_db(e);
	assert_int_equal(stat(keypath, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 0600);
	assert_int_equal(sb.st_size, 32);
	k1 = tu_slurp(keypath, &n1);
	init_db(e);
	k2 = tu_slurp(keypath, &n2);
	assert_int_equal(n1, n2);
	assert_memory_equal(k1, k2, n1);
	free(k1);
	free(k2);
}

/* ========================= demo =========================================== */

/* The value after a summary line's label, e.g. "orders           20". */
static long long summary_value(const char *text, const char *label)
{
	const char *s = text;
	size_t n = strlen(label);

	while (s && *s) {
		if (strncmp(s, label, n) == 0 && s[n] == ' ') {
			long long v;
			if (sscanf(s + n, " %lld", &v) == 1)
				return v;
		}
		s = strchr(s, '\n');
		if (s)
			s++;
	}
	fail_msg("no '%s' line in the demo's summary:\n%s", label, text);
	return -1;
}

/* stagedoor run, the whole box, on the engine under test: two orders go
 * through it, a second run of the same box is refused while it runs, and a
 * SIGTERM ends it with exit 0 and nothing left to do. */
static void test_run_the_box(void **state)
{
	struct tu_env *e = *state;
	char a[16], b[16], log[400];
	int64_t ev;
	int i, sent = 0, rc;
	pid_t pid;
	json_t *j;

	init_db(e);
	ev = run_event_add(e, "Run Night", "10");
	run_order_add_ok(e, ev, "Ana Lima", "2", a);
	run_order_add_ok(e, ev, "Bo Chen", "1", b);
	snprintf(log, sizeof log, "%s/run.log", e->dir);
	pid = tu_spawn((const char *const[]){ "run", "--db", e->db_path, NULL }, log);
	for (i = 0; i < 300 && sent < 2; i++) {
		tu_sleep_ms(50);
		sent = 0;
		j = show_json(e, a);
		sent += jbool(j, "email_sent");
		json_decref(j);
		j = show_json(e, b);
		sent += jbool(j, "email_sent");
		json_decref(j);
	}
	assert_int_equal(sent, 2);
	rc = RUN("run", "--db", e->db_path);
	assert_int_not_equal(rc, 0);
	assert_non_null(strstr(err, "already running"));
	assert_int_equal(kill(pid, SIGTERM), 0);
	assert_int_equal(tu_reap(pid, 20000, "stagedoor run"), 0);
	assert_int_equal(RUN("check", "--db", e->db_path), 0);
	assert_int_equal(tu_count_in(log, "level=error"), 0);
}

/*
 * Two boxes on one database: each has its own state folder, both are given
 * the same ticket_key_file, and the PDFs live in the database (blob_store =
 * db: the default on PostgreSQL, chosen here on SQLite too).  An order taken
 * by box A is rendered and mailed by box B's worker; A hands out its PDF and
 * admits its tickets; each box's api.token is recorded as a hash.
 */
static void test_two_boxes_share_one_database(void **state)
{
	struct tu_env *e = *state;
	char a_dir[400], b_dir[400], keyfile[400], path[500], id[16], codes[4][CODE_LEN + 1];
	unsigned char *k1, *k2;
	size_t n1, n2;
	struct stat sb;
	int64_t ev;

	snprintf(a_dir, sizeof a_dir, "%s/box-a", e->dir);
	snprintf(b_dir, sizeof b_dir, "%s/box-b", e->dir);
	snprintf(keyfile, sizeof keyfile, "%s/shared-ticket.key", e->dir);
	setenv("STAGEDOOR_TICKET_KEY_FILE", keyfile, 1);
	setenv("STAGEDOOR_BLOB_STORE", "db", 1);

	setenv("STAGEDOOR_STATE_DIR", a_dir, 1);
	init_db(e);
	assert_int_equal(stat(keyfile, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	k1 = tu_slurp(keyfile, &n1);
	snprintf(path, sizeof path, "%s/ticket.key", a_dir);
	assert_int_not_equal(access(path, F_OK), 0);	/* the given file, not a box's own */
	ev = run_event_add(e, "Shared Night", "10");
	run_order_add_ok(e, ev, "Ana Lima", "2", id);

	setenv("STAGEDOOR_STATE_DIR", b_dir, 1);
	init_db(e);
	k2 = tu_slurp(keyfile, &n2);
	assert_int_equal(n1, 32);
	assert_int_equal(n2, 32);
	assert_memory_equal(k1, k2, 32);	/* init keeps the key every box is given */
	free(k1);
	free(k2);
	run_pipeline(e, id);			/* box B renders and mails */
	snprintf(path, sizeof path, "%s/maildir/new", b_dir);
	assert_int_equal(tu_count_files(path), 1);
	snprintf(path, sizeof path, "%s/blobs", b_dir);
	assert_int_not_equal(access(path, F_OK), 0);	/* no PDF in a box's folder */
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM blobs WHERE key = "
				   "'tickets/%s.pdf'", id), 1);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM api_tokens"), 2);

	setenv("STAGEDOOR_STATE_DIR", a_dir, 1);	/* box A: the PDF and the door */
	assert_int_equal(codes_from_pdf(e, id, codes, 4), 2);
	if (RUN("scan", codes[0], "--db", e->db_path) != 0 || strncmp(out, "admitted", 8) != 0)
		fail_msg("box A's scan of box B's ticket: stdout='%s' stderr='%s'", out, err);
	assert_int_equal(RUN("check", "--db", e->db_path), 0);

	unsetenv("STAGEDOOR_TICKET_KEY_FILE");
	unsetenv("STAGEDOOR_BLOB_STORE");
	if (tu_pg())
		setenv("STAGEDOOR_STATE_DIR", e->dir, 1);
	else
		unsetenv("STAGEDOOR_STATE_DIR");
}

/*
 * migrate: a box's SQLite file moved to PostgreSQL with one order done and
 * two in flight (their outbox rows unpublished).  Every table arrives with
 * its ids; the target checks as the source did; a second migrate into the
 * now full target is refused; on PostgreSQL the in-flight orders finish,
 * each with one email, the first order's ticket is admitted with the box's
 * key, and a new order gets an id after the copied ones.
 */
/* migrate's bad input: a clear line, a non-zero exit, nothing written */
static void test_migrate_refuses_bad_input(void **state)
{
	struct tu_env *e = *state;
	char src[400], dst[400];

	snprintf(src, sizeof src, "%s/box.db", e->dir);
	snprintf(dst, sizeof dst, "%s/other.db", e->dir);
	assert_int_equal(RUN("migrate", "--from", src), 2);
	assert_non_null(strstr(err, "--to"));
	assert_int_not_equal(RUN("migrate", "--from", src, "--to", "postgresql://nobody@127.0.0.1:1/x"), 0);
	assert_int_not_equal(access(src, F_OK), 0);	/* a missing source is not made */
	assert_int_equal(RUN("init", "--db", src), 0);
	assert_int_not_equal(RUN("migrate", "--from", src, "--to", dst), 0);
	assert_non_null(strstr(err, "postgresql://"));
	assert_int_not_equal(access(dst, F_OK), 0);
	assert_int_not_equal(RUN("migrate", "--from", "postgresql://a@b/c", "--to",
				 "postgresql://a@b/d"), 0);
	assert_int_not_equal(RUN("migrate", "--from", src, "--to", "postgresql://nobody@127.0.0.1:1/x"),
			     0);
	assert_non_null(strstr(err, "cannot connect"));
}

/* the emails the SQLite box sent before it moved */
static int i_sent_on_sqlite(const char *sdir)
{
	char maildir[450];

	snprintf(maildir, sizeof maildir, "%s/maildir/new", sdir);
	return tu_count_files(maildir);
}

static void test_migrate_a_box_to_postgresql(void **state)
{
	struct tu_env *e = *state;
	struct tu_env src = *e;
	char ids[3][16], d[16], key[450], sdir[200], maildir[450], codes[4][CODE_LEN + 1];
	int64_t ev;
	int i;

	if (!tu_pg())
		TU_SKIP("the target is the pg suite's database");
	assert_true(strlen(e->dir) < 150);
	snprintf(sdir, sizeof sdir, "%.150s/sqlite-box", e->dir);
	snprintf(src.dir, sizeof src.dir, "%s", sdir);
	snprintf(src.db_path, sizeof src.db_path, "%s/stagedoor.db", sdir);
	src.pg_schema[0] = '\0';
	setenv("STAGEDOOR_STATE_DIR", sdir, 1);
	assert_int_equal(RUN("init", "--db", src.db_path), 0);
	ev = run_event_add(&src, "Moving Night", "20");
	/* the first order done on SQLite, the others' outbox rows in flight */
	run_order_add_ok(&src, ev, "Ana Lima", "2", ids[0]);
	run_pipeline(&src, ids[0]);
	run_order_add_ok(&src, ev, "Bo Chen", "2", ids[1]);
	run_order_add_ok(&src, ev, "Cy Diaz", "2", ids[2]);
	run_order_add_ok(&src, ev, "Dee Ford", "1", d);
	assert_int_equal(i_sent_on_sqlite(sdir), 1);

	if (RUN("migrate", "--from", src.db_path, "--to", e->db_path) != 0)
		fail_msg("migrate: stdout='%s' stderr='%s'", out, err);
	assert_non_null(strstr(out, "row counts match"));
	assert_non_null(strstr(out, "check of the source: outbox"));
	assert_non_null(strstr(out, "check of the target: outbox"));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM orders"), 4);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM tickets"), 7);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM outbox"),
			 tu_countf(src.db_path, "SELECT count(*) FROM outbox"));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM blobs"),
			 tu_countf(src.db_path, "SELECT count(DISTINCT pdf_key) FROM tickets"));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM api_tokens"), 1);
	assert_int_not_equal(RUN("migrate", "--from", src.db_path, "--to", e->db_path), 0);
	assert_non_null(strstr(err, "already holds"));
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM orders"), 4);

	/* the box on PostgreSQL: its own state folder, the SQLite box's key */
	snprintf(key, sizeof key, "%s/ticket.key", sdir);
	setenv("STAGEDOOR_TICKET_KEY_FILE", key, 1);
	setenv("STAGEDOOR_STATE_DIR", e->dir, 1);
	for (i = 0; i < 3; i++)
		run_pipeline(e, ids[i]);
	run_pipeline(e, d);
	assert_int_equal(RUN("check", "--db", e->db_path), 0);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM email_sends WHERE sent_at IS "
				   "NOT NULL"), 4);
	snprintf(maildir, sizeof maildir, "%s/maildir/new", e->dir);
	assert_int_equal(tu_count_files(maildir) + i_sent_on_sqlite(sdir), 4);
	assert_int_equal(codes_from_pdf(e, ids[0], codes, 4), 2);
	if (RUN("scan", codes[0], "--db", e->db_path) != 0 || strncmp(out, "admitted", 8) != 0)
		fail_msg("scan of a ticket sold on SQLite: stdout='%s' stderr='%s'", out, err);
	run_order_add_ok(e, ev, "Eve Gray", "1", d);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM orders"), 5);
	assert_true(tu_countf(e->db_path, "SELECT max(id) FROM tickets") > 7);
	unsetenv("STAGEDOOR_TICKET_KEY_FILE");
}

static void test_demo_twenty_orders(void **state)
{
	struct tu_env *e = *state;
	char bin[PATH_MAX], outp[400], errp[400], newdir[400];
	char *text, *errtext;
	size_t size;
	int rc;

	if (!realpath(tu_bin(), bin))
		fail_msg("cannot resolve %s", tu_bin());
	snprintf(outp, sizeof outp, "%s/demo.out", e->dir);
	snprintf(errp, sizeof errp, "%s/demo.err", e->dir);
	rc = tu_exec((const char *const[]){ "/bin/sh", "-c",
					       "cd \"$1\" && exec \"$2\" demo --orders 20", "sh",
					       e->dir, bin, NULL }, outp, errp, 50000);
	text = (char *)tu_slurp(outp, &size);
	errtext = (char *)tu_slurp(errp, &size);
	if (rc != 0)
		tu_fail_free(text, errtext, "demo --orders 20: exit %d\nstdout:\n%s\nstderr:\n%s", rc,
			     text, errtext);
	assert_int_equal(summary_value(text, "orders"), 20);
	assert_int_equal(summary_value(text, "PDFs stored"), 20);
	assert_int_equal(summary_value(text, "emails sent"), 20);
	assert_int_equal(summary_value(text, "maildir messages"), 20);
	assert_int_equal(summary_value(text, "sales counter"), 20);
	assert_non_null(strstr(text, "sales counter    20 orders"));
	assert_int_equal(summary_value(text, "dead jobs"), 0);

	/* the files behind the summary */
	snprintf(newdir, sizeof newdir, "%s/var/demo/maildir/new", e->dir);
	assert_int_equal(tu_count_files(newdir), 20);
	snprintf(newdir, sizeof newdir, "%s/var/demo/blobs/tickets", e->dir);
	assert_int_equal(tu_count_files(newdir), 20);
	snprintf(newdir, sizeof newdir, "%s/var/demo/stagedoor.db", e->dir);
	assert_int_equal(tu_count(newdir, "SELECT count(*) FROM orders"), 20);
	assert_int_equal(tu_count(newdir, "SELECT count(*) FROM email_sends WHERE sent_at IS NOT "
				  "NULL"), 20);

	/* buyers' data is the box user's alone: files 0600, folders 0700 */
	{
		static const char *const files[][2] = {
			{ "var/demo/stagedoor.db", "600" }, { "var/demo/stagedoor.db-wal", "600" },
			{ "var/demo/ticket.key", "600" }, { "var/demo", "700" },
			{ "var/demo/blobs", "700" }, { "var/demo/blobs/tickets", "700" },
			{ "var/demo/maildir", "700" }, { "var/demo/maildir/new", "700" },
		};
		size_t i;
		struct stat sb;
		DIR *d;
		struct dirent *de;

		for (i = 0; i < sizeof files / sizeof files[0]; i++) {
			char p[600], m[8];

			snprintf(p, sizeof p, "%s/%s", e->dir, files[i][0]);
			if (stat(p, &sb) != 0)
				continue;	/* a -wal checkpointed away */
			snprintf(m, sizeof m, "%o", (unsigned)(sb.st_mode & 0777));
			if (strcmp(m, files[i][1]) != 0)
				tu_fail_free(text, errtext, "%s has mode %s, want %s", files[i][0], m,
					     files[i][1]);
		}
		snprintf(newdir, sizeof newdir, "%s/var/demo/blobs/tickets", e->dir);
		assert_non_null(d = opendir(newdir));
		while ((de = readdir(d)))
			if (de->d_name[0] != '.') {
				char p[700];

				snprintf(p, sizeof p, "%s/%s", newdir, de->d_name);
				assert_int_equal(stat(p, &sb), 0);
				assert_int_equal(sb.st_mode & 0777, 0600);
			}
		closedir(d);
	}

	/* the closing hints name the program as it was run, and work as printed */
	{
		char hint[PATH_MAX + 200], want[PATH_MAX + 100], *nl;
		const char *p = strstr(text, "\ntry: "), *d = strstr(text, "\ndashboard: ");

		assert_non_null(p);
		assert_non_null(d);
		snprintf(want, sizeof want, "\ndashboard: %s run --db ", bin);
		if (strncmp(d, want, strlen(want)) != 0)
			tu_fail_free(text, errtext, "dashboard hint does not start with '%s':\n%s",
				     want + 1, d + 1);
		snprintf(hint, sizeof hint, "%s", p + 6);
		if ((nl = strchr(hint, '\n')))
			*nl = '\0';
		snprintf(want, sizeof want, "%s order show ", bin);
		if (strncmp(hint, want, strlen(want)) != 0)
			tu_fail_free(text, errtext, "try hint '%s' does not start with '%s'", hint,
				     want);
		free(text);
		free(errtext);
		rc = tu_exec((const char *const[]){ "/bin/sh", "-c", "cd \"$1\" && eval \"$2\"",
						       "sh", e->dir, hint, NULL },
				outp, errp, 20000);
		text = (char *)tu_slurp(outp, &size);
		errtext = (char *)tu_slurp(errp, &size);
		if (rc != 0)
			tu_fail_free(text, errtext, "the demo's hint '%s': exit %d\n%s", hint, rc,
				     errtext);
		assert_non_null(strstr(text, "tickets"));
	}
	free(text);
	free(errtext);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_event_add_prints_id_and_refuses_bad_input,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_order_add_writes_order_tickets_and_outbox,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_order_idempotency_key, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_capacity_sold_out_and_seats_left,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_capacity_holds_under_concurrent_orders,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_order_changes_from_the_cli, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_intake_and_render_of_one_event_do_not_deadlock,
						tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_order_bad_input_refused, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_errors_echo_input_on_one_line,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_order_show_before_and_after_the_pipeline,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_totals_follow_orders_replays_and_the_pipeline,
						tu_setup_real_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_totals_seeded_when_migrating, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_scan_codes_from_the_pdf, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_init_makes_the_key_once, tu_setup_real_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_run_the_box, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_two_boxes_share_one_database, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_migrate_a_box_to_postgresql, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_migrate_refuses_bad_input, tu_setup_real,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_demo_twenty_orders, tu_setup_real_nodb,
						tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
