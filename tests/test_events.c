/*
 * test_events.c: an event's life on the command line, as a venue runs it,
 * on either engine (tools/pg_tests.sh): added and shown in the venue's
 * time zone (a Berlin box: winter and summer, with the ticket PDF and the
 * email read by pdftotext and from the maildir), listed, changed, its
 * sales closed; a start in the past, or on a time the clocks skip or pass
 * twice, refused with nothing written; a grace for a show already running;
 * sales stopped sales_close_after its start; a walk-up sale at the window.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define OUT_MAX (64 * 1024)

static char out[OUT_MAX], err[OUT_MAX];

#define RUN(...) \
	tu_run(out, sizeof out, err, sizeof err, (const char *const[]){ __VA_ARGS__, NULL })

static int setup(void **state)
{
	int r = tu_setup_real_nodb(state);
	const struct tu_env *e = *state;

	setenv("STAGEDOOR_TIMEZONE", "Europe/Berlin", 1);
	if (RUN("init", "--db", e->db_path) != 0)
		fail_msg("init: %s", err);
	return r;
}

static int teardown(void **state)
{
	unsetenv("STAGEDOOR_TIMEZONE");
	unsetenv("STAGEDOOR_START_GRACE");
	return tu_teardown(state);
}

static json_t *json_of(const char *s)
{
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);

	if (!j)
		fail_msg("not JSON (%s): %s", je.text, s);
	return j;
}

/* event add; its id */
static long long event_add(const struct tu_env *e, const char *name, const char *starts)
{
	int rc = RUN("event", "add", "--name", name, "--venue", "Hall", "--starts-at", starts,
		     "--capacity", "10", "--db", e->db_path);

	if (rc != 0)
		fail_msg("event add %s %s: rc=%d %s", name, starts, rc, err);
	return atoll(out);
}

/* the command fails with exit rc and one line on stderr holding want */
static void refused(int got, int rc, const char *want)
{
	if (got != rc || !strstr(err, want) || strchr(err, '\n') != err + strlen(err) - 1)
		fail_msg("want exit %d and '%s', got %d: stdout '%s' stderr '%s'", rc, want, got,
			 out, err);
}

static long long events_now(const struct tu_env *e)
{
	return (long long)tu_count(e->db_path, "SELECT count(*) FROM events");
}

/* "YYYY-MM-DDTHH:MM" of now + delta_s, in UTC with its Z */
static void utc_at(long delta_s, char *buf, size_t size)
{
	time_t t = time(NULL) + delta_s;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, size, "%Y-%m-%dT%H:%MZ", &tm);
}

static void test_add_list_show_in_the_venues_zone(void **state)
{
	const struct tu_env *e = *state;
	long long winter, summer;
	json_t *j;

	winter = event_add(e, "Winter Gala", "2036-12-31 20:00");
	summer = event_add(e, "Summer Night", "2036-07-04 20:00");
	assert_int_equal(RUN("event", "show", "1", "--json", "--db", e->db_path), 0);
	j = json_of(out);
	assert_string_equal(json_string_value(json_object_get(j, "starts_at")),
			    "2036-12-31T19:00:00Z");
	assert_string_equal(json_string_value(json_object_get(j, "state")), "on_sale");
	assert_true(json_is_null(json_object_get(j, "closed_at")));
	json_decref(j);
	assert_int_equal(RUN("event", "ls", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "2036-12-31 20:00 CET"));
	assert_non_null(strstr(out, "2036-07-04 20:00 CEST"));
	assert_non_null(strstr(out, "Winter Gala, Hall"));
	assert_int_equal(RUN("event", "show", "2", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "starts    2036-07-04 20:00 CEST"));
	assert_non_null(strstr(out, "sold      0 of 10 seats"));
	assert_int_equal(RUN("event", "ls", "--json", "--db", e->db_path), 0);
	j = json_of(out);
	assert_int_equal(json_array_size(json_object_get(j, "events")), 2);
	json_decref(j);
	assert_int_equal(winter, 1);
	assert_int_equal(summer, 2);
	refused(RUN("event", "show", "7", "--db", e->db_path), 1, "no event 7");
	refused(RUN("event", "show", "x7", "--db", e->db_path), 2, "not an event id");
}

static void test_refused_starts_write_nothing(void **state)
{
	const struct tu_env *e = *state;
	char past[32], recent[32], older[32];

	refused(RUN("event", "add", "--name", "Old", "--venue", "Hall", "--starts-at",
		    "2020-01-01T20:00Z", "--capacity", "10", "--db", e->db_path), 2,
		"cannot start in the past");
	refused(RUN("event", "add", "--name", "Skip", "--venue", "Hall", "--starts-at",
		    "2036-03-30 02:30", "--capacity", "10", "--db", e->db_path), 2,
		"2036-03-30T02:30+01:00");
	assert_non_null(strstr(err, "2036-03-30T02:30+02:00"));
	refused(RUN("event", "add", "--name", "Twice", "--venue", "Hall", "--starts-at",
		    "2036-10-26 02:30", "--capacity", "10", "--db", e->db_path), 2, "twice");
	assert_non_null(strstr(err, "2036-10-26 02:30 CEST"));
	assert_non_null(strstr(err, "2036-10-26 02:30 CET"));
	assert_int_equal(events_now(e), 0);
	/* a show already running, with a grace for it */
	utc_at(-3600, recent, sizeof recent);
	utc_at(-3 * 3600, older, sizeof older);
	refused(RUN("event", "add", "--name", "Running", "--venue", "Hall", "--starts-at", recent,
		    "--capacity", "10", "--db", e->db_path), 2, "past");
	setenv("STAGEDOOR_START_GRACE", "2h", 1);
	event_add(e, "Running", recent);
	refused(RUN("event", "add", "--name", "Long ago", "--venue", "Hall", "--starts-at", older,
		    "--capacity", "10", "--db", e->db_path), 2, "start_grace");
	unsetenv("STAGEDOOR_START_GRACE");
	/* moving an event into the past is refused as well */
	utc_at(-60, past, sizeof past);
	refused(RUN("event", "set", "1", "--starts-at", past, "--db", e->db_path), 2, "past");
	refused(RUN("event", "set", "1", "--db", e->db_path), 2, "nothing to change");
	assert_int_equal(events_now(e), 1);
}

static void test_set_and_close(void **state)
{
	const struct tu_env *e = *state;
	assert_int_equal(event_add(e, "Quartet", "2036-12-31 19:00"), 1);
	/* unsold, it moves */
	assert_int_equal(RUN("event", "set", "1", "--starts-at", "2036-12-31 20:00", "--venue",
			     "Hall", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "starts    2036-12-31 20:00 CET"));
	assert_int_equal(RUN("order", "add", "--event", "1", "--name", "Ana", "--email",
			     "ana@example.org", "--seats", "3", "--db", e->db_path), 0);
	refused(RUN("event", "set", "1", "--capacity", "2", "--db", e->db_path), 3,
		"cannot go below 3");
	assert_int_equal(tu_count(e->db_path, "SELECT capacity FROM events"), 10);
	/* sold, it moves too: a run tells its buyers (test_eventruns) */
	assert_int_equal(RUN("event", "set", "1", "--starts-at", "2036-12-31 21:30", "--db",
			     e->db_path), 0);
	assert_non_null(strstr(out, "starts    2036-12-31 21:30 CET"));
	assert_non_null(strstr(out, "move 1,"));
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM outbox WHERE job_id = "
				  "'outbox:event-1:move-1' AND kind = 'event_run'"), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT change_no FROM events"), 1);
	/* a new start equal to the one it has is no move */
	assert_int_equal(RUN("event", "set", "1", "--starts-at", "2036-12-31 21:30", "--db",
			     e->db_path), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM event_runs"), 1);
	assert_int_equal(RUN("event", "set", "1", "--capacity", "3", "--name", "Quartet Live",
			     "--db", e->db_path), 0);
	assert_non_null(strstr(out, "starts    2036-12-31 21:30 CET"));
	assert_non_null(strstr(out, "sold      3 of 3 seats"));
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM events WHERE name = "
				  "'Quartet Live' AND venue = 'Hall' AND capacity = 3"), 1);
	refused(RUN("order", "add", "--event", "1", "--name", "Bo", "--seats", "1", "--db",
		    e->db_path), 2, "sold out");
	assert_int_equal(RUN("event", "set", "1", "--capacity", "5", "--db", e->db_path), 0);
	assert_int_equal(RUN("event", "close", "1", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "closed at"));
	refused(RUN("order", "add", "--event", "1", "--name", "Bo", "--seats", "1", "--db",
		    e->db_path), 3, "sales for event 1 are closed");
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM orders"), 1);
	assert_int_equal(RUN("event", "close", "1", "--db", e->db_path), 0);
	assert_non_null(strstr(err, "closed already"));
	assert_int_equal(RUN("event", "ls", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "sales closed"));
	refused(RUN("event", "close", "9", "--db", e->db_path), 1, "no event 9");
	assert_int_equal(RUN("event", "show", "1", "--json", "--db", e->db_path), 0);
	assert_non_null(strstr(out, "\"state\": \"closed\""));
}

/* sales stop sales_close_after (2 h) after the start: a show an hour in
 * sells at the window, one three hours in does not */
static void test_sales_stop_after_the_start(void **state)
{
	const struct tu_env *e = *state;
	char hour_ago[32], three_ago[32];

	utc_at(-3600, hour_ago, sizeof hour_ago);
	utc_at(-3 * 3600, three_ago, sizeof three_ago);
	setenv("STAGEDOOR_START_GRACE", "4h", 1);
	event_add(e, "Running", hour_ago);
	event_add(e, "Long running", three_ago);
	unsetenv("STAGEDOOR_START_GRACE");
	assert_int_equal(RUN("order", "add", "--event", "1", "--name", "Late Lou", "--seats", "1",
			     "--payment", "card", "--db", e->db_path), 0);
	refused(RUN("order", "add", "--event", "2", "--name", "Later Lou", "--seats", "1",
		    "--payment", "card", "--db", e->db_path), 3, "sales_close_after");
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM orders"), 1);
}

/* messages in the maildir holding needle */
static int mails_with(const struct tu_env *e, const char *needle)
{
	char dir[400], path[700];
	struct dirent *d;
	DIR *dp;
	int n = 0;

	snprintf(dir, sizeof dir, "%s/maildir/new", e->dir);
	if (!(dp = opendir(dir)))
		return 0;
	while ((d = readdir(dp))) {
		unsigned char *text;
		size_t size;

		if (d->d_name[0] == '.' || snprintf(path, sizeof path, "%s/%s", dir, d->d_name) < 0)
			continue;
		if ((text = tu_slurp(path, &size))) {
			n += strstr((char *)text, needle) != NULL;
			free(text);
		}
	}
	closedir(dp);
	return n;
}

static void drain(const struct tu_env *e)
{
	int round;

	for (round = 0; round < 3; round++) {
		assert_int_equal(tu_reap(tu_spawn((const char *const[]){ "relay", "--drain", "--db",
						   e->db_path, NULL }, NULL), 20000, "relay"), 0);
		assert_int_equal(tu_reap(tu_spawn((const char *const[]){ "worker", "--drain", "--db",
						   e->db_path, NULL }, NULL), 30000, "worker"), 0);
	}
}

/* the ticket PDF's text (pdftotext) holds want */
static void pdf_holds(const struct tu_env *e, const char *id, const char *want)
{
	char pdf[400], txt[400];
	unsigned char *text;
	size_t size;

	snprintf(pdf, sizeof pdf, "%s/%s.pdf", e->dir, id);
	snprintf(txt, sizeof txt, "%s/%s.txt", e->dir, id);
	if (RUN("order", "pdf", id, "--out", pdf, "--db", e->db_path) != 0)
		fail_msg("order pdf: %s", err);
	assert_int_equal(tu_exec((const char *const[]){ "pdftotext", "-enc", "UTF-8", pdf, txt,
						       NULL }, NULL, NULL, 20000), 0);
	text = tu_slurp(txt, &size);
	if (!text || !strstr((char *)text, want))
		fail_msg("%s not in the PDF's text: %s", want, text ? (char *)text : "");
	free(text);
}

/* A Berlin box: a winter and a summer show, each ticket and email in the
 * venue's time; a walk-up sale at the window renders and mails nothing. */
static void test_berlin_tickets_and_emails(void **state)
{
	const struct tu_env *e = *state;
	char w[32], s[32], walk[32];

	event_add(e, "Winter Gala", "2036-12-31 20:00");
	event_add(e, "Summer Night", "2036-07-04 20:00");
	assert_int_equal(RUN("order", "add", "--event", "1", "--name", "Wim", "--email",
			     "wim@example.org", "--seats", "1", "--db", e->db_path), 0);
	snprintf(w, sizeof w, "%.10s", out);
	assert_int_equal(RUN("order", "add", "--event", "2", "--name", "Sue", "--email",
			     "sue@example.org", "--seats", "1", "--db", e->db_path), 0);
	snprintf(s, sizeof s, "%.10s", out);
	assert_int_equal(RUN("order", "add", "--event", "2", "--name", "Walk Up", "--seats", "2",
			     "--payment", "cash", "--db", e->db_path), 0);
	snprintf(walk, sizeof walk, "%.10s", out);
	drain(e);
	pdf_holds(e, w, "2036-12-31 20:00 CET");
	pdf_holds(e, s, "2036-07-04 20:00 CEST");
	pdf_holds(e, walk, "2036-07-04 20:00 CEST");
	assert_int_equal(mails_with(e, "2036-12-31 20:00 CET"), 1);
	assert_int_equal(mails_with(e, "2036-07-04 20:00 CEST"), 1);
	assert_int_equal(mails_with(e, "Walk Up"), 0);
	assert_int_equal(RUN("order", "show", walk, "--db", e->db_path), 0);
	assert_non_null(strstr(out, "no email: tickets printed at the window"));
	assert_non_null(strstr(out, "payment  cash at the box office"));
	assert_non_null(strstr(out, "2036-07-04 20:00 CEST"));
	assert_int_equal(RUN("check", "--db", e->db_path), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_add_list_show_in_the_venues_zone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_starts_write_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_set_and_close, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sales_stop_after_the_start, setup, teardown),
		cmocka_unit_test_setup_teardown(test_berlin_tickets_and_emails, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
