/*
 * test_schedule.c: periodic jobs (schedule.h) under the fake clock, on
 * SQLite and (the pg suite) PostgreSQL: each period made once whatever the
 * boxes (two racing for every period) and the restarts (a box down across
 * a period, down over many), a missed period made once or skipped as the
 * schedule says, a simulated week of ticks with restarts, cron times in a
 * zone across its daylight-saving nights, and what the command line
 * refuses.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "db.h"
#include "log.h"
#include "queue.h"
#include "schedule.h"
#include "sqs_store.h"
#include "testutil.h"
#include "tz.h"

#define MIN_MS 60000LL

static struct db *db_of(void **state)
{
	return ((struct tu_env *)*state)->db;
}

static int setup(void **state)
{
	log_set_level(LOG_WARN);	/* a line per job made: thousands in a week */
	return tu_setup(state);
}

static void add(struct db *db, const char *name, int64_t every_ms, int skip)
{
	struct schedule s;

	memset(&s, 0, sizeof s);
	snprintf(s.name, sizeof s.name, "%s", name);
	snprintf(s.kind, sizeof s.kind, "noop");
	s.payload = "{\"from\":\"schedule\"}";
	s.every_ms = every_ms;
	s.skip_missed = skip;
	assert_int_equal(schedule_add(db, &s), SD_OK);
	assert_true(s.next_at > clock_now_ms() && s.next_at % every_ms == 0);
}

static int64_t tick(struct db *db)
{
	int64_t made = 0, next = 0;

	assert_int_equal(schedule_tick(db, clock_now_ms(), &made, &next), SD_OK);
	return made;
}

static int64_t jobs(void **state, const char *where)
{
	struct tu_env *e = *state;

	return tu_countf(e->db_path, "SELECT count(*) FROM stream WHERE kind = 'noop' %s", where);
}

/* the clock to period start + off */
static void to_period(int64_t every_ms, int64_t k, int64_t off)
{
	clock_fake_set((clock_now_ms() / every_ms + k) * every_ms + off);
}

/* ======================== by cron ======================================= */

static void add_cron(struct db *db, const char *name, const char *cron, const char *zone)
{
	struct schedule s;

	memset(&s, 0, sizeof s);
	snprintf(s.name, sizeof s.name, "%s", name);
	snprintf(s.kind, sizeof s.kind, "noop");
	snprintf(s.cron, sizeof s.cron, "%s", cron);
	snprintf(s.timezone, sizeof s.timezone, "%s", zone);
	assert_int_equal(schedule_add(db, &s), SD_OK);
	assert_true(s.next_at > clock_now_ms());
}

/* ms of a UTC date and time */
static int64_t utc_ms(int y, int mo, int d, int h, int mi)
{
	return ((tz_days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * MIN_MS;
}

static int64_t job_at(void **state, const char *name, int64_t period)
{
	char where[160];

	snprintf(where, sizeof where, "AND job_id = 'schedule:%s:%lld'", name, (long long)period);
	return jobs(state, where);
}

static void test_each_period_once(void **state)
{
	struct db *db = db_of(state);
	char where[160];
	int64_t p;

	add(db, "five", 5 * MIN_MS, 0);
	assert_int_equal(tick(db), 0);		/* not yet */
	to_period(5 * MIN_MS, 1, 0);
	p = clock_now_ms();
	assert_int_equal(tick(db), 1);
	assert_int_equal(tick(db), 0);		/* the same period again: nothing */
	clock_fake_advance(299999);
	assert_int_equal(tick(db), 0);
	clock_fake_advance(1);
	assert_int_equal(tick(db), 1);
	snprintf(where, sizeof where, "AND job_id = 'schedule:five:%lld' AND payload LIKE "
		 "'%%schedule%%'", (long long)p);
	assert_int_equal(jobs(state, where), 1);
	assert_int_equal(jobs(state, ""), 2);
}

/* a box down across one period makes it when it is back; down over
 * twelve, one job for the latest of them (missed once) or none (skip) */
static void test_restarts_and_missed_periods(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state), *again;
	struct schedule *v;
	int n;

	add(db, "once", 5 * MIN_MS, 0);
	add(db, "skip", 5 * MIN_MS, 1);
	to_period(5 * MIN_MS, 1, -1000);
	assert_int_equal(tick(db), 0);
	/* down from 1 s before the period to 30 s after: both make it */
	db_close(db);
	e->db = NULL;
	clock_fake_advance(31000);
	assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &again), SD_OK);
	e->db = again;
	assert_int_equal(tick(again), 2);
	/* down an hour, back 2 min into a period: "once" makes one job (the
	 * latest period), "skip" none (the period began more than a minute ago) */
	clock_fake_advance(3600000 + 90000);
	assert_int_equal(tick(again), 1);
	assert_int_equal(jobs(state, "AND job_id LIKE 'schedule:once:%'"), 2);
	assert_int_equal(jobs(state, "AND job_id LIKE 'schedule:skip:%'"), 1);
	assert_int_equal(tick(again), 0);
	/* both due again at the next period */
	to_period(5 * MIN_MS, 1, 10);
	assert_int_equal(tick(again), 2);
	assert_int_equal(schedule_list(again, &v, &n), SD_OK);
	assert_int_equal(n, 2);
	assert_int_equal(v[0].made, 3);
	assert_int_equal(v[1].made, 2);
	assert_true(v[0].next_at > clock_now_ms());
	schedule_free_all(v, n);
}

/* Two boxes tick every period at the same time, each on its own
 * connection and thread: one job per period. */
struct racer {
	const char *path;
	pthread_barrier_t *go;
	int periods;
	int64_t made;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	struct db *db;
	int64_t made, next;
	int i;

	if (db_open(r->path, 0, DB_SYNC_NORMAL, &db) != SD_OK)
		return NULL;
	for (i = 0; i < r->periods; i++) {
		pthread_barrier_wait(r->go);	/* the clock moved */
		if (schedule_tick(db, clock_now_ms(), &made, &next) == SD_OK)
			r->made += made;
		pthread_barrier_wait(r->go);	/* both ticked */
	}
	db_close(db);
	return NULL;
}

/* two boxes tick at each of 100 minutes from now, a schedule due each */
static void race_minutes(void **state)
{
	struct tu_env *e = *state;
	pthread_barrier_t go;
	struct racer a = { e->db_path, &go, 100, 0 }, b = a;
	pthread_t ta, tb;
	int i;

	assert_int_equal(pthread_barrier_init(&go, NULL, 3), 0);
	assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
	for (i = 0; i < 100; i++) {
		to_period(MIN_MS, 1, 0);
		pthread_barrier_wait(&go);
		pthread_barrier_wait(&go);
	}
	assert_int_equal(pthread_join(ta, NULL), 0);
	assert_int_equal(pthread_join(tb, NULL), 0);
	pthread_barrier_destroy(&go);
	print_message("    100 periods, two boxes: %lld and %lld jobs made\n", (long long)a.made,
		      (long long)b.made);
	assert_int_equal(a.made + b.made, 100);
	assert_int_equal(jobs(state, ""), 100);
	assert_int_equal(tu_count(e->db_path, "SELECT count(DISTINCT job_id) FROM stream"), 100);
}

static void test_two_boxes_race_for_each_period(void **state)
{
	add(db_of(state), "race", MIN_MS, 0);
	race_minutes(state);
}

/* every minute in Berlin through the spring night's jump, two boxes */
static void test_two_boxes_race_for_each_cron_minute(void **state)
{
	clock_fake_set(utc_ms(2027, 3, 28, 0, 10));
	add_cron(db_of(state), "race", "* * * * *", "Europe/Berlin");
	race_minutes(state);
	assert_int_equal(job_at(state, "race", utc_ms(2027, 3, 28, 1, 0)), 1);
}

/* A week of a 5-minute schedule: ticks 1 s to 4 min 59 s apart (as a box
 * that loops, sleeps, is busy), the box restarted every 50 ticks: every
 * period of the week made exactly once. */
/* tick from now to end, 1 to max_s seconds apart, the box restarted every
 * 50 ticks.  [out] *ticks (may be NULL): the ticks; the restarts are a
 * fiftieth of them */
static int64_t tick_until(void **state, int64_t end, int max_s, int64_t *ticks_out)
{
	struct tu_env *e = *state;
	unsigned seed = 20261206;
	int64_t made = 0, ticks = 0;

	while (clock_now_ms() < end) {
		clock_fake_advance(1000 + (int64_t)(rand_r(&seed) % (unsigned)max_s) * 1000);
		made += tick(e->db);
		if (++ticks % 50 == 0) {
			db_close(e->db);
			e->db = NULL;
			assert_int_equal(db_open(e->db_path, 0, DB_SYNC_NORMAL, &e->db), SD_OK);
		}
	}
	if (ticks_out)
		*ticks_out = ticks;
	return made;
}

static void test_a_simulated_week(void **state)
{
	struct tu_env *e = *state;
	int64_t start, made, ticks = 0, periods;

	add(e->db, "week", 5 * MIN_MS, 0);
	start = clock_now_ms();
	made = tick_until(state, start + 7 * 24 * 60 * MIN_MS, 299, &ticks);
	periods = clock_now_ms() / (5 * MIN_MS) - start / (5 * MIN_MS);
	print_message("    a week every 5 min: %lld periods, %lld jobs made, %lld ticks, %lld "
		      "restarts\n", (long long)periods, (long long)made, (long long)ticks,
		      (long long)(ticks / 50));
	assert_int_equal(made, periods);
	assert_int_equal(tu_count(e->db_path, "SELECT count(DISTINCT job_id) FROM stream"),
			 periods);
	assert_int_equal(jobs(state, ""), periods);
}

/* 02:30 and Mondays 09:00 in Berlin over two weeks and the spring night,
 * then 02:30 over the autumn night: each day once, the skipped 02:30 at
 * the jump, the repeated one at its first pass */
static void test_cron_across_daylight_saving(void **state)
{
	struct db *db = db_of(state);
	int64_t ticks = 0, made;

	clock_fake_set(utc_ms(2027, 3, 20, 0, 0));
	add_cron(db, "night", "30 2 * * *", "Europe/Berlin");
	add_cron(db, "monday", "0 9 * * MON", "Europe/Berlin");
	made = tick_until(state, utc_ms(2027, 4, 5, 0, 0), 299, &ticks);
	print_message("    two weeks over the spring night: %lld jobs made, %lld restarts\n",
		      (long long)made, (long long)(ticks / 50));
	assert_int_equal(jobs(state, "AND job_id LIKE 'schedule:night:%'"), 16);
	assert_int_equal(job_at(state, "night", utc_ms(2027, 3, 27, 1, 30)), 1);
	assert_int_equal(job_at(state, "night", utc_ms(2027, 3, 28, 1, 0)), 1);	/* the jump */
	assert_int_equal(job_at(state, "night", utc_ms(2027, 3, 29, 0, 30)), 1);
	assert_int_equal(jobs(state, "AND job_id LIKE 'schedule:monday:%'"), 2);
	assert_int_equal(job_at(state, "monday", utc_ms(2027, 3, 22, 8, 0)), 1);
	assert_int_equal(job_at(state, "monday", utc_ms(2027, 3, 29, 7, 0)), 1);
	assert_int_equal(made, 18);
	assert_int_equal(schedule_rm(db_of(state), "monday"), SD_OK);
	clock_fake_set(utc_ms(2027, 10, 30, 0, 0));
	made = tick_until(state, utc_ms(2027, 11, 2, 0, 0), 299, NULL);
	/* the months between: one job, for the latest missed (Oct 29), then three */
	assert_int_equal(made, 4);
	assert_int_equal(job_at(state, "night", utc_ms(2027, 10, 29, 0, 30)), 1);
	assert_int_equal(job_at(state, "night", utc_ms(2027, 10, 30, 0, 30)), 1);
	assert_int_equal(job_at(state, "night", utc_ms(2027, 10, 31, 0, 30)), 1);
	assert_int_equal(job_at(state, "night", utc_ms(2027, 11, 1, 1, 30)), 1);
}

/* a daily cron, the box down three days: one job, for the latest day */
static void test_cron_missed_days_made_once(void **state)
{
	struct db *db = db_of(state);
	struct schedule *v;
	int n;

	clock_fake_set(utc_ms(2027, 5, 1, 12, 0));
	add_cron(db, "daily", "0 6 * * *", "UTC");
	clock_fake_set(utc_ms(2027, 5, 4, 7, 0));
	assert_int_equal(tick(db), 1);
	assert_int_equal(tick(db), 0);
	assert_int_equal(job_at(state, "daily", utc_ms(2027, 5, 4, 6, 0)), 1);
	assert_int_equal(schedule_list(db, &v, &n), SD_OK);
	assert_int_equal(v[0].next_at, utc_ms(2027, 5, 5, 6, 0));
	assert_int_equal(v[0].last_at, utc_ms(2027, 5, 4, 6, 0));
	schedule_free_all(v, n);
}

static void add_to(struct db *db, const char *name, const char *kind, const char *payload,
		   enum sd_result want)
{
	struct schedule s;

	memset(&s, 0, sizeof s);
	snprintf(s.name, sizeof s.name, "%s", name);
	snprintf(s.kind, sizeof s.kind, "%s", kind);
	s.payload = (char *)payload;
	s.every_ms = MIN_MS;
	assert_int_equal(schedule_add(db, &s), want);
}

/* the message a receive on q answers, its body and period attribute */
static void receive_one(struct db *db, const char *queue, const char *body, int64_t period,
			const char *name)
{
	struct sqs_receive rq = { 1, -1, NULL, json_pack("[s]", "All"), "test" };
	char want[128];
	struct sqs_queue q;
	json_t *msgs, *m;

	assert_int_equal(sqs_queue_find(db, queue, &q), SD_OK);
	assert_int_equal(sqs_receive(db, &q, &rq, &msgs), SD_OK);
	assert_int_equal(json_array_size(msgs), 1);
	m = json_array_get(msgs, 0);
	assert_string_equal(json_string_value(json_object_get(m, "Body")), body);
	snprintf(want, sizeof want, "schedule:%s:%lld", name, (long long)period);
	assert_string_equal(json_string_value(json_object_get(json_object_get(json_object_get(
		m, "MessageAttributes"), "stagedoor.period"), "StringValue")), want);
	json_decref(msgs);
	json_decref(rq.msg_attr_names);
	sqs_queue_clear(&q);
}

/* a schedule on an SQS queue (standard and FIFO) sends its payload as a
 * message each period, its period in an attribute; on a queue deleted
 * since, the periods pass with nothing sent */
static void test_periodic_messages_on_sqs_queues(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state);
	json_t *fifo = json_pack("{s:s}", "FifoQueue", "true");
	struct sqs_queue q;
	int64_t p;

	add_to(db, "ping", "sqs:jobs", "{\"run\":\"report\"}", SD_NOT_FOUND);
	assert_int_equal(sqs_queue_create(db, "jobs", NULL, &q), SD_OK);
	sqs_queue_clear(&q);
	assert_int_equal(sqs_queue_create(db, "ordered.fifo", fifo, &q), SD_OK);
	sqs_queue_clear(&q);
	json_decref(fifo);
	add_to(db, "ping", "sqs:jobs", "{\"run\":\"report\"}", SD_OK);
	add_to(db, "tick", "sqs:ordered.fifo", "{\"n\":1}", SD_OK);
	to_period(MIN_MS, 1, 0);
	p = clock_now_ms();
	assert_int_equal(tick(db), 2);
	assert_int_equal(tick(db), 0);
	receive_one(db, "jobs", "{\"run\":\"report\"}", p, "ping");
	receive_one(db, "ordered.fifo", "{\"n\":1}", p, "tick");
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream WHERE kind = "
			 "'sqs:ordered.fifo' AND grp = 'schedule.tick'"), 1);
	/* the queue deleted: the next period passes, nothing sent, the schedule stays */
	assert_int_equal(sqs_queue_find(db, "jobs", &q), SD_OK);
	assert_int_equal(sqs_queue_delete(db, &q), SD_OK);
	sqs_queue_clear(&q);
	to_period(MIN_MS, 1, 0);
	assert_int_equal(tick(db), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT made FROM schedules WHERE name = 'ping'"), 1);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM stream WHERE kind = 'sqs:jobs'"),
			 0);
}

static void test_add_rm_and_refusals(void **state)
{
	struct tu_env *e = *state;
	struct db *db = db_of(state);
	struct schedule s;
	char out[2048], err[1024];

	add(db, "a", MIN_MS, 0);
	memset(&s, 0, sizeof s);
	snprintf(s.name, sizeof s.name, "a");
	snprintf(s.kind, sizeof s.kind, "noop");
	s.every_ms = MIN_MS;
	assert_int_equal(schedule_add(db, &s), SD_CONFLICT);
	snprintf(s.name, sizeof s.name, "B");
	assert_int_equal(schedule_add(db, &s), SD_INVALID);
	snprintf(s.name, sizeof s.name, "b");
	s.every_ms = 999;
	assert_int_equal(schedule_add(db, &s), SD_INVALID);
	s.every_ms = MIN_MS;
	s.payload = "[1]";
	assert_int_equal(schedule_add(db, &s), SD_INVALID);
	assert_int_equal(schedule_rm(db, "a"), SD_OK);
	assert_int_equal(schedule_rm(db, "a"), SD_NOT_FOUND);
	/* the command line, a clear error and nothing written */
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "x", "--every", "soon", "noop", "--db", e->db_path, NULL }), 0);
	assert_non_null(strstr(err, "--every"));
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "x", "--every", "5m", "noop", "--missed", "never", "--db",
		e->db_path, NULL }), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM schedules"), 0);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "nightly", "--every", "1d", "noop", "{\"n\":1}", "--db", e->db_path,
		NULL }), 0);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "ls", "--json", "--db", e->db_path, NULL }), 0);
	assert_non_null(strstr(out, "\"name\":\"nightly\",\"kind\":\"noop\",\"payload\":{\"n\":1},"
				    "\"every_ms\":86400000,\"cron\":null,\"timezone\":null,"
				    "\"missed\":\"once\""));
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "x", "--cron", "0 24 * * *", "noop", "--db", e->db_path, NULL }), 0);
	assert_non_null(strstr(err, "hour field"));
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "x", "--cron", "0 9 * * *", "--timezone", "Europe/Nowhere", "noop",
		"--db", e->db_path, NULL }), 0);
	assert_non_null(strstr(err, "Europe/Nowhere"));
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "x", "--cron", "0 9 * * *", "--every", "1d", "noop", "--db",
		e->db_path, NULL }), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM schedules"), 1);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "monday", "--cron", "0 9 * * MON", "--timezone", "Europe/Berlin",
		"noop", "--db", e->db_path, NULL }), 0);
	assert_non_null(strstr(out, "at \"0 9 * * MON\" in Europe/Berlin"));
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "add", "daily", "--cron", "@daily", "noop", "--db", e->db_path, NULL }), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM schedules WHERE name = 'daily' "
			 "AND cron = '0 0 * * *' AND timezone IS NULL"), 1);
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "ls", "--json", "--db", e->db_path, NULL }), 0);
	assert_non_null(strstr(out, "\"every_ms\":null,\"cron\":\"0 9 * * MON\","
				    "\"timezone\":\"Europe/Berlin\""));
	assert_int_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "rm", "nightly", "--db", e->db_path, NULL }), 0);
	assert_int_not_equal(tu_run(out, sizeof out, err, sizeof err, (const char *const[]){
		"schedule", "rm", "nightly", "--db", e->db_path, NULL }), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_each_period_once, setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_restarts_and_missed_periods, setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_two_boxes_race_for_each_period, setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_two_boxes_race_for_each_cron_minute, setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_a_simulated_week, setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_cron_across_daylight_saving, setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_cron_missed_days_made_once, setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_periodic_messages_on_sqs_queues, setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_add_rm_and_refusals, setup, tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
