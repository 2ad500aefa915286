/*
 * bench_line.c: `stagedoor-bench line`, the shop's waiting line (line.h,
 * design.md §3.7) as its buyers' pages keep it: what a place's refresh
 * costs the box while hundreds wait, and how places are served when seats
 * come free.
 *
 *   stagedoor-bench line [--waiters N] [--seconds S] [--clients C] [--conns K]
 *                        [--arrive-s A] [--grant-s G] [--paysink PATH] [--json] [--keep]
 *
 * A fresh box (bench_shopbox.h: one priced event, tools/paysink, the shop in
 * this process on 127.0.0.1 behind its trusted proxy 127.0.0.1, the
 * shop's default rules: the unpaid share 25 %).  The event has 40 seats
 * for every 10 waiters, so that its share is a seat a waiter; holds of 10
 * seats made through hold_add (as many clients, none through the shop)
 * take the whole share.  Then:
 *
 *   join     N waiters (--waiters, 500), each a buyer of its own (its own
 *            X-Forwarded-For, 10.x.y.z, so the caps per client and network
 *            never refuse one), check out one seat as a browser does (GET
 *            /e/{id} for the form's token, POST /e/{id}/checkout) and get a
 *            place: 303 to /w/<link>, followed at once (GET /w/<link>).
 *            They come as fast as the clients go, or spread evenly over A
 *            seconds (--arrive-s);
 *   steady   each waiter's page comes back when it asks (its meta refresh,
 *            LINE_REFRESH_S, from the moment the last one arrived), each
 *            answered 200 with the buyers ahead of it; after one refresh
 *            period to settle, S seconds (--seconds, 60) are measured: every
 *            refresh's latency (the request's own time; how late the client
 *            sent it against its due time is reported apart), refreshes a
 *            second, and the shop's CPU: this process's (getrusage) less
 *            the client threads' own clocks, as bench shop and bench sqs
 *            tell the two apart;
 *   grants   the blocking holds end at once (hold_settle to expired in a
 *            transaction each, as the reconcile job ends an unpaid one):
 *            the whole share free.  Each waiter's next refresh may find it
 *            at the head with room, then it gets its hold and the 303 to
 *            paysink's payment page, and stops (it would be paying).  For
 *            up to G seconds (--grant-s, 300): grants a second (from the
 *            seats' freeing to the last grant), each grant's wait from the
 *            freeing, the granting request's own time, the shop's CPU.
 *
 * C client threads (--clients, 8) share K keep-alive connections (--conns,
 * one a waiter up to 800, under the server's 1024 connections at once), each
 * connection on one thread, each thread sending its waiters' requests when
 * due; a connection the server closed is dialled again, as a browser would.
 *
 * Verified, else no figure: every answer the expected one (a place, its
 * page with a refresh and the buyers ahead, a grant to paysink); no grant
 * before the seats came free; afterwards in the database, places granted in
 * the order they joined (shop_line.id against the order of their holds),
 * no present place passed by a later one, no place lost its lease.
 */
#define _GNU_SOURCE
#include "cli.h"
#include "bench.h"

#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "bench_shopbox.h"
#include "clock.h"
#include "db.h"
#include "holds.h"
#include "line.h"
#include "pipeline.h"

#define BL_WAITERS_DEFAULT 500
#define BL_CLIENTS_DEFAULT 8
#define BL_CLIENTS_MAX 64
#define BL_CONNS_DEFAULT_MAX 800	/* the server holds 1024 connections at once */
#define BL_SECONDS_DEFAULT 60
#define BL_GRANT_S_DEFAULT 300
#define BL_BLOCK_SEATS 10		/* a blocking hold's seats */
#define BL_JOIN_WAIT_S 120		/* the longest the joins may take past --arrive-s */
#define BL_LOOK_MS 100			/* a client with nothing due looks again this often */

enum bl_state { BL_ARRIVING, BL_WAITING, BL_GRANTED };

struct bl_waiter {
	int64_t due;			/* mono us: its next request */
	int64_t granted_at;		/* mono us, BL_GRANTED */
	enum bl_state state;
	int conn;			/* its connection */
	char xff[20];
	char link[LINE_LINK_LEN + 1];
};

struct bl_args {
	int64_t waiters, seconds, clients, conns, arrive_s, grant_s;
	const char *paysink;
	char paysink_buf[PATH_MAX];
};

/* What the client threads share with the main one. */
struct bl_run {
	const struct bl_args *a;
	struct bench_shopbox *box;
	struct bl_waiter *w;		/* [waiters] */
	struct bench_http *conn;	/* [conns] */
	int64_t t0;			/* the first arrival, mono us */
	atomic_llong joined, granted, win_start, win_end, free_at;	/* 0: not yet */
	atomic_int stop;
	struct bench_failure fail;
};

/* One client thread: its waiters, and what it saw in the window. */
struct bl_client {
	pthread_t th;
	int started;			/* th runs, until joined */
	struct bl_run *run;
	int idx;
	int64_t *mine, n_mine;		/* its waiters' numbers */
	int64_t *lat, *late, n_lat, cap;	/* refreshes in the window: time, lateness (us) */
	int64_t *grant_us, n_grant;	/* the granting requests' own time */
	int64_t refreshes;		/* in the grant phase */
	int64_t redials;
	atomic_llong cpu_us;		/* its thread's CPU so far */
};

/* What a run measured. */
struct bl_result {
	int64_t refreshes, grants, redials, inversions, skipped, gone, grant_refreshes;
	double per_s, p50, p99, max, late_p99, cpu_shop_ms, cpu_shop_cores, cpu_clients_ms;
	double grants_per_s, wait_p50, wait_p99, wait_last, grant_p50, grant_p99;
	double grant_cpu_shop_ms, grant_cpu_paysink_ms, grant_cores;
};

/* one request on c, dialled again once when the server had closed the
 * kept-alive connection (its idle timeout): 0, or -1 with c->err */
static int bl_call(struct bl_client *cl, struct bench_http *c, const char *req, int *status,
		   const char **body)
{
	size_t len;

	if (bench_http_call(c, req, strlen(req), status, body, &len) == 0)
		return 0;
	cl->redials++;
	bench_http_close(c);
	return bench_http_call(c, req, strlen(req), status, body, &len);
}

/* ======================== a waiter ======================================= */

/* waiter k's arrival: a checkout of one seat that gets a place (303 to
 * /w/<link>); [out] its link */
static int bl_join(struct bl_client *cl, int64_t k)
{
	struct bl_run *run = cl->run;
	struct bl_waiter *w = &run->w[k];
	struct bench_http *c = &run->conn[w->conn];
	char tok[BENCH_SHOP_TOKEN_LEN + 1], fields[160], loc[HOLD_URL_MAX], want[64];
	int status, port = run->box->shop_port;
	int64_t ev = run->box->event_id;

	snprintf(fields, sizeof fields, "seats=1&name=Waiter+%lld&email=waiter%lld%%40example.com",
		 (long long)k, (long long)k);
	snprintf(want, sizeof want, "http://127.0.0.1:%d/w/", port);
	if (bench_buyer_token(c, port, ev, w->xff, tok) != 0 ||
	    bench_buyer_checkout(c, port, ev, w->xff, tok, fields, &status, loc, sizeof loc) != 0) {
		bench_fail(&run->fail, "waiter %lld: %s", (long long)k, c->err);
		return -1;
	}
	if (status != 303 || strncmp(loc, want, strlen(want)) != 0 ||
	    strlen(loc + strlen(want)) != LINE_LINK_LEN) {
		bench_fail(&run->fail,
			   "waiter %lld: its checkout answered %d (%s), not 303 to a place in line",
			   (long long)k, status, loc);
		return -1;
	}
	snprintf(w->link, sizeof w->link, "%s", loc + strlen(want));
	return 0;
}

/* the answer to waiter k's look at its place: still waiting (its page's
 * refresh into *refresh_s), or granted (303 to paysink's page) */
static int bl_answer(struct bl_run *run, int64_t k, int status, const char *body,
		     const struct bench_http *c, int *refresh_s, int *granted)
{
	char loc[HOLD_URL_MAX], pay[64];
	static const char ahead[] = "data-ahead=\"", meta[] = "http-equiv=\"refresh\" content=\"";
	const char *a, *m;

	*granted = 0;
	if (status == 303) {
		snprintf(pay, sizeof pay, "http://127.0.0.1:%d/pay/", run->box->ps_port);
		if (!bench_http_header(c, "Location", loc, sizeof loc) ||
		    strncmp(loc, pay, strlen(pay)) != 0) {
			bench_fail(&run->fail,
				   "waiter %lld: its place answered 303 to %s, not paysink",
				   (long long)k, loc);
			return -1;
		}
		if (!atomic_load(&run->free_at)) {
			bench_fail(&run->fail, "waiter %lld got a hold before any seat came free",
				   (long long)k);
			return -1;
		}
		*granted = 1;
		return 0;
	}
	a = strstr(body, ahead);
	m = strstr(body, meta);
	if (status != 200 || !a || !m || (*refresh_s = atoi(m + strlen(meta))) < 1) {
		bench_fail(&run->fail,
			   "waiter %lld: its place answered %d, not the waiting page: %.200s",
			   (long long)k, status, body);
		return -1;
	}
	if (atoll(a + strlen(ahead)) >= run->a->waiters) {
		bench_fail(&run->fail, "waiter %lld: %lld ahead of it in a line of %lld",
			   (long long)k, atoll(a + strlen(ahead)), (long long)run->a->waiters);
		return -1;
	}
	return 0;
}

/* waiter k's page, as its browser loads it: GET /w/<link> */
static int bl_look(struct bl_client *cl, int64_t k, int64_t due)
{
	struct bl_run *run = cl->run;
	struct bl_waiter *w = &run->w[k];
	struct bench_http *c = &run->conn[w->conn];
	char req[256];
	const char *body;
	int status, refresh_s = LINE_REFRESH_S, granted;
	int64_t t0, t1, ws, we;

	snprintf(req, sizeof req, "GET /w/%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Forwarded-For: "
		 "%s\r\nAccept: text/html\r\n\r\n", w->link, run->box->shop_port, w->xff);
	t0 = clock_mono_us();
	if (bl_call(cl, c, req, &status, &body) != 0) {
		bench_fail(&run->fail, "waiter %lld: GET /w/: %s", (long long)k, c->err);
		return -1;
	}
	t1 = clock_mono_us();
	if (bl_answer(run, k, status, body, c, &refresh_s, &granted) != 0)
		return -1;
	ws = atomic_load(&run->win_start);
	we = atomic_load(&run->win_end);
	if (granted) {
		w->state = BL_GRANTED;
		w->granted_at = t1;
		cl->grant_us[cl->n_grant++] = t1 - t0;
		atomic_fetch_add(&run->granted, 1);
		return 0;
	}
	if (ws && t0 >= ws && !we && due && cl->n_lat < cl->cap) {
		cl->lat[cl->n_lat] = t1 - t0;
		cl->late[cl->n_lat++] = t0 > due ? t0 - due : 0;
	} else if (atomic_load(&run->free_at)) {
		cl->refreshes++;
	}
	/* the page's meta refresh: counted from its load */
	w->due = t1 + (int64_t)refresh_s * 1000000;
	return 0;
}

/* ======================== the client threads ============================= */

/* the client's waiter due first (-1: none left) */
static int64_t bl_next(const struct bl_client *cl)
{
	int64_t i, k, best = -1;

	for (i = 0; i < cl->n_mine; i++) {
		k = cl->mine[i];
		if (cl->run->w[k].state != BL_GRANTED &&
		    (best < 0 || cl->run->w[k].due < cl->run->w[best].due))
			best = k;
	}
	return best;
}

static void *bl_client_main(void *arg)
{
	struct bl_client *cl = arg;
	struct bl_run *run = cl->run;
	int64_t k, now, due;
	struct timespec ts;

	while (!atomic_load(&run->stop) && !atomic_load(&run->fail.failed) &&
	       (k = bl_next(cl)) >= 0) {
		now = clock_mono_us();
		due = run->w[k].due;
		if (due > now) {
			due = due - now < BL_LOOK_MS * 1000 ? due - now : BL_LOOK_MS * 1000;
			ts.tv_sec = due / 1000000;
			ts.tv_nsec = (long)(due % 1000000) * 1000;
			nanosleep(&ts, NULL);
			continue;
		}
		if (run->w[k].state == BL_ARRIVING) {
			if (bl_join(cl, k) != 0 || bl_look(cl, k, 0) != 0)
				break;
			run->w[k].state = run->w[k].state == BL_GRANTED ? BL_GRANTED : BL_WAITING;
			atomic_fetch_add(&run->joined, 1);
		} else if (bl_look(cl, k, due) != 0) {
			break;
		}
		atomic_store(&cl->cpu_us, pipeline_thread_cpu_us());
	}
	atomic_store(&cl->cpu_us, pipeline_thread_cpu_us());
	return NULL;
}

/* the client threads' CPU so far, in ms */
static double bl_clients_cpu_ms(struct bl_client *cl, int n)
{
	int64_t us = 0;
	int i;

	for (i = 0; i < n; i++)
		us += atomic_load(&cl[i].cpu_us);
	return (double)us / 1000.0;
}

/* ======================== the box's side ================================= */

/* the holds that take the whole unpaid share; [out] ids[0..n) */
static enum sd_result bl_block(struct bench_shopbox *b, const struct bl_args *a, int64_t *ids,
			       int64_t n)
{
	char name[64], email[64], client[32];
	struct hold_rules ru = { .renewals = -1 };
	struct hold_view h;
	enum sd_result r;
	int64_t i;

	/* they must outlast the run: only the bench ends them */
	ru.ttl_ms = (a->seconds + a->grant_s + a->arrive_s + 3600) * 1000;
	for (i = 0; i < n; i++) {
		struct hold_new hn = { b->event_id, BL_BLOCK_SEATS, name, email, client, NULL };

		snprintf(name, sizeof name, "Blocker %lld", (long long)i);
		snprintf(email, sizeof email, "blocker%lld@example.com", (long long)i);
		snprintf(client, sizeof client, "198.18.%d.%d", (int)(i >> 8) & 255, (int)i & 255);
		if ((r = hold_add(b->db, &hn, &ru, &h)) != SD_OK)
			return r;
		ids[i] = h.id;
	}
	return SD_OK;
}

/* the blocking holds ended, each as the reconcile job ends an unpaid one */
static enum sd_result bl_unblock(struct bench_shopbox *b, const int64_t *ids, int64_t n)
{
	enum sd_result r;
	int64_t i;
	int won;

	for (i = 0; i < n; i++) {
		if ((r = db_begin(b->db)) != SD_OK ||
		    (r = db_end(b->db, hold_settle(b->db, ids[i], HOLD_EXPIRED, NULL, NULL, &won))) !=
		    SD_OK)
			return r;
	}
	return SD_OK;
}

static enum sd_result bl_count(struct db *db, const char *sql, int64_t arg, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r = SD_OK;

	*n = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, arg);
	if (db_next(st, &r))
		*n = db_col_int(st, 0);
	db_reset(st);
	return r;
}

/* the line's order, from the database: granted places in the order they
 * joined (a place's id against its hold's), none present passed over, none
 * gone */
static enum sd_result bl_order(struct db *db, int64_t granted, struct bl_result *res)
{
	struct db_stmt *st = db_stmt(db, "SELECT id FROM shop_line WHERE left_why = 'hold' "
				     "ORDER BY hold_id");
	enum sd_result r = SD_OK;
	int64_t prev = 0, id, n = 0;

	if (!st)
		return SD_DB;
	while (db_next(st, &r)) {
		id = db_col_int(st, 0);
		res->inversions += id < prev;
		prev = id > prev ? id : prev;
		n++;
	}
	db_reset(st);
	if (r != SD_OK)
		return r;
	if (n != granted)
		return err_set(SD_DB, "%lld places granted in the database, %lld seen by the waiters",
			       (long long)n, (long long)granted);
	if ((r = bl_count(db, "SELECT count(*) FROM shop_line WHERE left_at IS NULL AND id < ?1",
			  prev, &res->skipped)) != SD_OK)
		return r;
	return bl_count(db, "SELECT count(*) FROM shop_line WHERE left_why = 'gone' AND id > ?1", 0,
			&res->gone);
}

/* ======================== the run ======================================== */

/* sleep until mono us until, or the clients failed: 0, or -1 */
static int bl_sleep_until(struct bl_run *run, int64_t until)
{
	int64_t now;

	while ((now = clock_mono_us()) < until) {
		if (atomic_load(&run->fail.failed))
			return -1;
		usleep((useconds_t)(until - now < 50000 ? until - now : 50000));
	}
	return atomic_load(&run->fail.failed) ? -1 : 0;
}

/* the client threads: each its connections' waiters, its arrays */
static enum sd_result bl_clients_start(struct bl_run *run, struct bl_client *cl, int n)
{
	const struct bl_args *a = run->a;
	int64_t k;
	int i;

	for (i = 0; i < n; i++) {
		cl[i].run = run;
		cl[i].idx = i;
		if (!(cl[i].mine = calloc((size_t)a->waiters, sizeof *cl[i].mine)))
			return err_set(SD_NOMEM, "out of memory");
		for (k = 0; k < a->waiters; k++)
			if (run->w[k].conn % n == i)
				cl[i].mine[cl[i].n_mine++] = k;
		/* a refresh a second at the most, per waiter */
		cl[i].cap = cl[i].n_mine * (a->seconds + 2);
		if (!(cl[i].lat = calloc((size_t)cl[i].cap + 1, sizeof *cl[i].lat)) ||
		    !(cl[i].late = calloc((size_t)cl[i].cap + 1, sizeof *cl[i].late)) ||
		    !(cl[i].grant_us = calloc((size_t)cl[i].n_mine + 1, sizeof *cl[i].grant_us)))
			return err_set(SD_NOMEM, "out of memory");
	}
	for (i = 0; i < n; i++) {
		if (pthread_create(&cl[i].th, NULL, bl_client_main, &cl[i]) != 0) {
			atomic_store(&run->stop, 1);
			return err_set(SD_IO, "cannot start a client thread");
		}
		cl[i].started = 1;
	}
	return SD_OK;
}

/* merged: the n values of each client's field at off (counts at noff) */
static int64_t *bl_merge(struct bl_client *cl, int n, size_t off, size_t noff, int64_t *total)
{
	int64_t *all, k = 0, i;
	int c;

	*total = 0;
	for (c = 0; c < n; c++)
		*total += *(int64_t *)((char *)&cl[c] + noff);
	if (!(all = calloc((size_t)*total + 1, sizeof *all)))
		return NULL;
	for (c = 0; c < n; c++) {
		int64_t *v = *(int64_t **)((char *)&cl[c] + off);

		for (i = 0; i < *(int64_t *)((char *)&cl[c] + noff); i++)
			all[k++] = v[i];
	}
	bench_sort_i64(all, k);
	return all;
}

/* the steady window's figures from the clients' samples */
static enum sd_result bl_window(struct bl_client *cl, int n, double wall_ms, double shop_ms,
				double cli_ms, struct bl_result *res)
{
	int64_t *lat = bl_merge(cl, n, offsetof(struct bl_client, lat),
				offsetof(struct bl_client, n_lat), &res->refreshes);
	int64_t *late = bl_merge(cl, n, offsetof(struct bl_client, late),
				 offsetof(struct bl_client, n_lat), &res->refreshes);

	if (!lat || !late) {
		free(lat);
		free(late);
		return err_set(SD_NOMEM, "out of memory");
	}
	if (!res->refreshes) {
		free(lat);
		free(late);
		return err_set(SD_IO, "no refresh in the window");
	}
	res->per_s = (double)res->refreshes / (wall_ms / 1000.0);
	res->p50 = bench_pct_ms(lat, res->refreshes, 0.5);
	res->p99 = bench_pct_ms(lat, res->refreshes, 0.99);
	res->max = bench_pct_ms(lat, res->refreshes, 1.0);
	res->late_p99 = bench_pct_ms(late, res->refreshes, 0.99);
	res->cpu_shop_ms = shop_ms / (double)res->refreshes;
	res->cpu_shop_cores = shop_ms / wall_ms;
	res->cpu_clients_ms = cli_ms / (double)res->refreshes;
	free(lat);
	free(late);
	return SD_OK;
}

/* the grants' figures: each waiter's wait from the freeing, the requests */
static enum sd_result bl_grants(struct bl_run *run, struct bl_client *cl, int n,
				struct bl_result *res)
{
	int64_t free_at = atomic_load(&run->free_at), *wait, *req, k, g = 0, r;

	if (!(wait = calloc((size_t)run->a->waiters + 1, sizeof *wait)))
		return err_set(SD_NOMEM, "out of memory");
	for (k = 0; k < run->a->waiters; k++)
		if (run->w[k].state == BL_GRANTED)
			wait[g++] = run->w[k].granted_at - free_at;
	bench_sort_i64(wait, g);
	res->grants = g;
	res->wait_p50 = bench_pct_ms(wait, g, 0.5);
	res->wait_p99 = bench_pct_ms(wait, g, 0.99);
	res->wait_last = bench_pct_ms(wait, g, 1.0);
	res->grants_per_s = g && res->wait_last > 0 ? (double)g / (res->wait_last / 1000.0) : 0;
	free(wait);
	if (!(req = bl_merge(cl, n, offsetof(struct bl_client, grant_us),
			     offsetof(struct bl_client, n_grant), &r)))
		return err_set(SD_NOMEM, "out of memory");
	res->grant_p50 = bench_pct_ms(req, r, 0.5);
	res->grant_p99 = bench_pct_ms(req, r, 0.99);
	free(req);
	for (k = 0; k < n; k++) {
		res->grant_refreshes += cl[k].refreshes;
		res->redials += cl[k].redials;
	}
	return SD_OK;
}

/* steady, then grants: the window measured, the blocks ended, the grants
 * waited for */
static enum sd_result bl_measure(struct bl_run *run, struct bl_client *cl, int n,
				 const int64_t *blocks, int64_t n_blocks, struct bl_result *res)
{
	const struct bl_args *a = run->a;
	double s0, c0, s1, c1, p0;
	int64_t t, deadline;
	enum sd_result r;

	deadline = run->t0 + (a->arrive_s + BL_JOIN_WAIT_S) * 1000000;
	while (atomic_load(&run->joined) < a->waiters)
		if (bl_sleep_until(run, clock_mono_us() + 50000) != 0 || clock_mono_us() > deadline)
			return err_set(SD_IO, "%s", atomic_load(&run->fail.failed) ? run->fail.err
				       : "the waiters did not all join in time");
	bench_progress("%lld waiters in line; %d s to settle, then %lld s measured",
		       (long long)a->waiters, LINE_REFRESH_S + 1, (long long)a->seconds);
	if (bl_sleep_until(run, clock_mono_us() + (LINE_REFRESH_S + 1) * 1000000LL) != 0)
		return err_set(SD_IO, "%s", run->fail.err);
	s0 = bench_cpu_ms(0);
	c0 = bl_clients_cpu_ms(cl, n);
	atomic_store(&run->win_start, t = clock_mono_us());
	if (bl_sleep_until(run, t + a->seconds * 1000000) != 0)
		return err_set(SD_IO, "%s", run->fail.err);
	atomic_store(&run->win_end, clock_mono_us());
	s1 = bench_cpu_ms(0);
	c1 = bl_clients_cpu_ms(cl, n);
	if ((r = bl_window(cl, n, (double)(clock_mono_us() - t) / 1000.0, (s1 - c1) - (s0 - c0),
			   c1 - c0, res)) != SD_OK)
		return r;
	bench_progress("%.1f refreshes/s, p50 %.2f ms, p99 %.2f ms; the share freed: grants for up "
		       "to %lld s", res->per_s, res->p50, res->p99, (long long)a->grant_s);
	p0 = bench_cpu_ms(run->box->paysink.pid);
	atomic_store(&run->free_at, t = clock_mono_us());
	if ((r = bl_unblock(run->box, blocks, n_blocks)) != SD_OK)
		return r;
	deadline = t + a->grant_s * 1000000;
	while (atomic_load(&run->granted) < a->waiters && clock_mono_us() < deadline)
		if (bl_sleep_until(run, clock_mono_us() + 20000) != 0)
			return err_set(SD_IO, "%s", run->fail.err);
	t = clock_mono_us() - t;
	s0 = bench_cpu_ms(0) - s1 - (bl_clients_cpu_ms(cl, n) - c1);
	res->grant_cpu_shop_ms = s0;
	res->grant_cpu_paysink_ms = bench_cpu_ms(run->box->paysink.pid) - p0;
	res->grant_cores = s0 / ((double)t / 1000.0);
	return bl_grants(run, cl, n, res);
}

/* ======================== setting up ===================================== */

struct bl_ctx {
	struct bl_args a;
	struct bl_result res;
	int64_t capacity, blocks;
};

/* the waiters: their addresses, connections and arrival times */
static void bl_waiters(struct bl_run *run)
{
	const struct bl_args *a = run->a;
	int64_t k;

	for (k = 0; k < a->waiters; k++) {
		struct bl_waiter *w = &run->w[k];

		w->conn = (int)(k % a->conns);
		w->due = run->t0 + (a->waiters > 1 ? a->arrive_s * 1000000 * k / a->waiters : 0);
		snprintf(w->xff, sizeof w->xff, "10.%d.%d.%d", (int)(k >> 16) & 255,
			 (int)(k >> 8) & 255, (int)k & 255);
	}
}

/* the clients stopped and their connections and arrays freed */
static void bl_clients_stop(struct bl_run *run, struct bl_client *cl, int n)
{
	int64_t i;
	int c;

	atomic_store(&run->stop, 1);
	for (c = 0; c < n; c++) {
		if (cl[c].started)
			pthread_join(cl[c].th, NULL);
		cl[c].started = 0;
	}
	for (i = 0; run->conn && i < run->a->conns; i++)
		bench_http_close(&run->conn[i]);
}

static enum sd_result bl_go(const char *dir, const char *path, void *arg)
{
	struct bl_ctx *x = arg;
	const struct bl_args *a = &x->a;
	struct bench_shopbox_opts o = { a->paysink, NULL, NULL, NULL, { .renewals = -1 }, 0,
					(int)a->conns + (int)a->clients + 16 };
	struct bench_shopbox box;
	struct bl_client cl[BL_CLIENTS_MAX];
	struct bl_run run;
	int64_t *blocks = NULL, i;
	enum sd_result r;
	int n = (int)(a->clients < a->conns ? a->clients : a->conns);

	(void)path;
	memset(cl, 0, sizeof cl);
	memset(&run, 0, sizeof run);
	pthread_mutex_init(&run.fail.mu, NULL);
	run.a = a;
	run.box = &box;
	/* a share of a seat a waiter: 4 seats an unpaid seat at 25 % */
	x->blocks = (a->waiters + BL_BLOCK_SEATS - 1) / BL_BLOCK_SEATS;
	o.capacity = x->capacity = 100 * BL_BLOCK_SEATS * x->blocks / HOLD_UNPAID_SHARE_DEFAULT;
	if ((r = bench_shopbox_start(dir, "line", &o, &box)) != SD_OK)
		goto out;
	if (!(blocks = calloc((size_t)x->blocks, sizeof *blocks)) ||
	    !(run.w = calloc((size_t)a->waiters, sizeof *run.w)) ||
	    !(run.conn = calloc((size_t)a->conns, sizeof *run.conn))) {
		r = err_set(SD_NOMEM, "out of memory");
		goto out;
	}
	bench_progress("the share taken by %lld holds of %d seats; %lld waiters join through "
		       "127.0.0.1:%d", (long long)x->blocks, BL_BLOCK_SEATS, (long long)a->waiters,
		       box.shop_port);
	if ((r = bl_block(&box, a, blocks, x->blocks)) != SD_OK)
		goto out;
	for (i = 0; i < a->conns; i++)
		bench_http_init(&run.conn[i], box.shop_port);
	run.t0 = clock_mono_us() + 50000;
	bl_waiters(&run);
	if ((r = bl_clients_start(&run, cl, n)) != SD_OK ||
	    (r = bl_measure(&run, cl, n, blocks, x->blocks, &x->res)) != SD_OK)
		goto out;
	bl_clients_stop(&run, cl, n);
	r = bl_order(box.db, x->res.grants, &x->res);
out:
	bl_clients_stop(&run, cl, n);
	for (i = 0; i < n; i++) {
		free(cl[i].mine);
		free(cl[i].lat);
		free(cl[i].late);
		free(cl[i].grant_us);
	}
	bench_shopbox_stop(&box);
	free(run.conn);
	run.conn = NULL;
	free(run.w);
	free(blocks);
	pthread_mutex_destroy(&run.fail.mu);
	return r;
}

/* ======================== the report ===================================== */

static void bl_print_json(const struct bl_ctx *x)
{
	const struct bl_args *a = &x->a;
	const struct bl_result *r = &x->res;

	printf("{\"program\":\"stagedoor\",\"bench\":\"line\",\"waiters\":%lld,\"conns\":%lld,"
	       "\"clients\":%lld,\"seconds\":%lld,\"arrive_s\":%lld,\"cores\":%ld,"
	       "\"engine\":\"sqlite\",\"sqlite\":\"%s\",\"capacity\":%lld,\"unpaid_share\":%d,"
	       "\"refresh_s\":%d,\"refreshes\":%lld,\"refreshes_per_s\":%.2f,"
	       "\"refresh_p50_ms\":%.3f,\"refresh_p99_ms\":%.3f,\"refresh_max_ms\":%.3f,"
	       "\"client_late_p99_ms\":%.3f,\"cpu_shop_ms_per_refresh\":%.4f,"
	       "\"cpu_shop_cores\":%.4f,\"cpu_clients_ms_per_refresh\":%.4f,\"grants\":%lld,"
	       "\"grants_per_s\":%.2f,\"grant_wait_p50_ms\":%.1f,\"grant_wait_p99_ms\":%.1f,"
	       "\"grant_wait_last_ms\":%.1f,\"grant_request_p50_ms\":%.3f,"
	       "\"grant_request_p99_ms\":%.3f,\"grant_cpu_shop_ms\":%.1f,"
	       "\"grant_cpu_paysink_ms\":%.1f,\"grant_cores\":%.4f,\"grant_refreshes\":%lld,"
	       "\"in_order\":%s,\"inversions\":%lld,\"skipped\":%lld,\"gone\":%lld,"
	       "\"redials\":%lld}\n",
	       (long long)a->waiters, (long long)a->conns, (long long)a->clients,
	       (long long)a->seconds, (long long)a->arrive_s, sysconf(_SC_NPROCESSORS_ONLN),
	       db_sqlite_lib_version(), (long long)x->capacity, HOLD_UNPAID_SHARE_DEFAULT,
	       LINE_REFRESH_S, (long long)r->refreshes, r->per_s, r->p50, r->p99, r->max,
	       r->late_p99, r->cpu_shop_ms, r->cpu_shop_cores, r->cpu_clients_ms,
	       (long long)r->grants, r->grants_per_s, r->wait_p50, r->wait_p99, r->wait_last,
	       r->grant_p50, r->grant_p99, r->grant_cpu_shop_ms, r->grant_cpu_paysink_ms,
	       r->grant_cores, (long long)r->grant_refreshes,
	       !r->inversions && !r->skipped ? "true" : "false", (long long)r->inversions,
	       (long long)r->skipped, (long long)r->gone, (long long)r->redials);
}

static void bl_print(const struct bl_ctx *x)
{
	const struct bl_args *a = &x->a;
	const struct bl_result *r = &x->res;
	int in_order = !r->inversions && !r->skipped;

	printf("stagedoor-bench line: %lld waiters for a seat each, %lld client threads on %lld "
	       "keep-alive connections, arrivals over %lld s; a fresh box\n", (long long)a->waiters,
	       (long long)a->clients, (long long)a->conns, (long long)a->arrive_s);
	printf("  cores %ld; SQLite %s (WAL, FULL); %lld seats, the unpaid share (%d%%) held by "
	       "%lld holds of %d; each page looks again every %d s (its meta refresh)\n",
	       sysconf(_SC_NPROCESSORS_ONLN), db_sqlite_lib_version(), (long long)x->capacity,
	       HOLD_UNPAID_SHARE_DEFAULT, (long long)x->blocks, BL_BLOCK_SEATS, LINE_REFRESH_S);
	printf("  steady, %lld s: %lld refreshes, %.1f/s; GET /w/<link> p50 %.2f ms, p99 %.2f ms, "
	       "max %.2f ms (the clients sent them late by %.2f ms at p99)\n", (long long)a->seconds,
	       (long long)r->refreshes, r->per_s, r->p50, r->p99, r->max, r->late_p99);
	printf("    shop CPU %.3f ms a refresh, %.3f cores; the clients %.3f ms a refresh\n",
	       r->cpu_shop_ms, r->cpu_shop_cores, r->cpu_clients_ms);
	printf("  grants, the share freed at once: %lld of %lld in %.1f s, %.1f grants/s; wait from "
	       "the freeing p50 %.0f ms, p99 %.0f ms; the granting GET p50 %.2f ms, p99 %.2f ms\n",
	       (long long)r->grants, (long long)a->waiters, r->wait_last / 1000.0, r->grants_per_s,
	       r->wait_p50, r->wait_p99, r->grant_p50, r->grant_p99);
	printf("    shop CPU %.0f ms (%.3f cores), paysink %.0f ms; %lld refreshes meanwhile; "
	       "%lld connections dialled again\n", r->grant_cpu_shop_ms, r->grant_cores,
	       r->grant_cpu_paysink_ms, (long long)r->grant_refreshes, (long long)r->redials);
	printf("  order: %s (%lld out of order, %lld present places passed over, %lld gone)\n",
	       in_order ? "granted in the order they joined" : "NOT in the order they joined",
	       (long long)r->inversions, (long long)r->skipped, (long long)r->gone);
	printf("summary: line %lld waiters: %.1f refreshes/s, p50 %.2f ms, p99 %.2f ms, shop CPU "
	       "%.3f ms/refresh (%.1f%% of a core); %lld grants in %.1f s (%.1f/s), %s\n",
	       (long long)a->waiters, r->per_s, r->p50, r->p99, r->cpu_shop_ms,
	       100.0 * r->cpu_shop_cores, (long long)r->grants, r->wait_last / 1000.0,
	       r->grants_per_s, in_order ? "in arrival order" : "OUT OF ORDER");
}

/* ======================== the command ==================================== */

int bench_line_cmd(int argc, char **argv)
{
	static struct bl_ctx x;
	struct bl_args *a = &x.a;
	int json = 0, keep = 0, rc;
	struct arg_opt opts[] = {
		{ "waiters", ARG_INT, &a->waiters, 1, LINE_PLACES_MAX, 0, NULL,
		  "buyers in line, each a place of one seat (500)", 0 },
		{ "seconds", ARG_INT, &a->seconds, 1, 3600, 0, NULL,
		  "the steady window measured (60)", 0 },
		{ "clients", ARG_INT, &a->clients, 1, BL_CLIENTS_MAX, 0, NULL,
		  "client threads (8)", 0 },
		{ "conns", ARG_INT, &a->conns, 1, BL_CONNS_DEFAULT_MAX, 0, NULL,
		  "keep-alive connections the waiters share (one each, up to 800)", 0 },
		{ "arrive-s", ARG_INT, &a->arrive_s, 0, 3600, 0, NULL,
		  "the waiters come evenly over this many seconds (0: as fast as the clients go)",
		  0 },
		{ "grant-s", ARG_INT, &a->grant_s, 1, 36000, 0, NULL,
		  "the longest wait for the grants once the seats are free (300)", 0 },
		BENCH_ARG_PAYSINK(&a->paysink),
		BENCH_ARG_KEEP(&keep),
		ARG_JSON(&json),
		ARG_END,
	};
	static const char usage[] =
		"line [--waiters N] [--seconds S] [--clients C] [--conns K] [--arrive-s A] "
		"[--grant-s G] [--paysink PATH] [--json] [--keep]";

	a->waiters = BL_WAITERS_DEFAULT;
	a->seconds = BL_SECONDS_DEFAULT;
	a->clients = BL_CLIENTS_DEFAULT;
	a->grant_s = BL_GRANT_S_DEFAULT;
	if ((rc = bench_args(argc, argv, opts, usage)) != 0)
		return rc;
	if (!a->conns)
		a->conns = a->waiters < BL_CONNS_DEFAULT_MAX ? a->waiters : BL_CONNS_DEFAULT_MAX;
	if (a->conns > a->waiters)
		a->conns = a->waiters;
	if (bench_default(&a->paysink, "paysink", a->paysink_buf, sizeof a->paysink_buf) != 0) {
		fprintf(stderr, "stagedoor-bench: line needs %s (make build/paysink)\n", a->paysink);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	if ((rc = bench_in_dir(keep, bl_go, &x)) != 0)
		return rc;
	if (json)
		bl_print_json(&x);
	else
		bl_print(&x);
	return 0;
}
