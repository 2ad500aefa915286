/*
 * api_status.c: how the box is: /v1/stats, /healthz, /metrics (Prometheus
 * text format 0.0.4) and the box CA at /ca.pem.  None of them carries buyer
 * data: a monitor token may read them all.
 */
#define _GNU_SOURCE
#include "api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backup_sched.h"
#include "clock.h"
#include "controls.h"
#include "maint.h"
#include "metrics.h"
#include "events.h"
#include "queue.h"
#include "queue_history.h"

static json_t *counts_json(const struct queue_counts *q)
{
	return json_pack("{s:I, s:I, s:I, s:I, s:I}", "ready", (json_int_t)q->ready,
			 "scheduled", (json_int_t)q->scheduled, "leased", (json_int_t)q->leased,
			 "dead", (json_int_t)q->dead, "done", (json_int_t)q->done);
}

/* The workers' shared counters: duplicate runs absorbed by technique, and
 * [out] *stale, the stale acks of every kind. */
static json_t *absorbed_json(const struct metrics *m, int64_t *stale)
{
	struct metrics_snapshot *s = malloc(sizeof *s);
	json_t *o = json_object();
	int i;

	*stale = 0;
	if (!s || !o) {
		free(s);
		json_decref(o);
		return NULL;
	}
	metrics_read(m, s);
	for (i = 0; i < METRICS_TECHNIQUES && o; i++)
		if (json_object_set_new(o, metrics_technique_names[i],
					json_integer((json_int_t)s->duplicates[i])) != 0) {
			json_decref(o);
			o = NULL;
		}
	for (i = 0; i < s->n_kinds; i++)
		*stale += (int64_t)s->kinds[i].stale;
	free(s);
	return o;
}

/* disk_json: the free space where the box writes, for /healthz and /v1/stats. */
static json_t *disk_json(const struct maint_disk *d)
{
	return json_pack("{s:o, s:o, s:I, s:b}", "db_free_bytes",
			 d->db_free < 0 ? json_null() : json_integer(d->db_free), "state_free_bytes",
			 d->state_free < 0 ? json_null() : json_integer(d->state_free), "warn_bytes",
			 (json_int_t)d->warn_bytes, "low", d->low);
}

/* backup_json: run's periodic backups, for /healthz and /v1/stats (null
 * when backup_dir is not set).  [out] *ok: they are fine (1 when not set). */
static json_t *backup_json(const struct api *a, int *ok)
{
	struct backup_status st;
	char when[32];
	json_t *o;

	*ok = 1;
	if (!a->backup_dir[0])
		return json_null();
	backup_sched_status(a->db_path, a->backup_dir, a->backup_interval_ms, clock_now_ms(), &st);
	*ok = st.ok;
	o = json_pack("{s:s, s:I, s:b, s:i, s:I}", "dir", a->backup_dir, "interval_ms",
		      (json_int_t)a->backup_interval_ms, "ok", st.ok, "count", st.good,
		      "failures_total", (json_int_t)st.failures_total);
	if (!o)
		return NULL;
	api_utc_text(st.last_ok_ms, when, sizeof when);
	json_object_set_new(o, "last_ok", st.good ? json_string(st.last_ok_name) : json_null());
	json_object_set_new(o, "last_ok_at", st.good ? json_string(when) : json_null());
	json_object_set_new(o, "last_ok_at_ms", st.good ? json_integer(st.last_ok_ms) : json_null());
	json_object_set_new(o, "age_ms", st.good ? json_integer(st.age_ms) : json_null());
	json_object_set_new(o, "last_failed", json_boolean(st.failed));
	json_object_set_new(o, "error", st.failed ? json_string(st.error) : json_null());
	return o;
}

/* GET /v1/stats/history: the queue's last hour, a row a minute */
void api_get_history(struct call *c)
{
	struct queue_minute m[QUEUE_HISTORY_MINUTES];
	json_t *minutes;
	enum sd_result r;
	int n = 0, i;

	if ((r = queue_history_read(c->db, clock_now_ms(), m, &n)) != SD_OK) {
		api_res_internal(c->res, c->req, r);
		return;
	}
	minutes = json_array();
	for (i = 0; i < n; i++)
		json_array_append_new(minutes, json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I}",
				"minute", (json_int_t)m[i].minute, "ready", (json_int_t)m[i].ready,
				"scheduled", (json_int_t)m[i].scheduled, "leased",
				(json_int_t)m[i].leased, "dead", (json_int_t)m[i].dead, "done",
				(json_int_t)m[i].done, "failed", (json_int_t)m[i].failed));
	api_res_json(c->res, 200, json_pack("{s:o}", "minutes", minutes));
}

void api_get_stats(struct call *c)
{
	struct maint_disk disk;
	struct queue_counts *rows = NULL, total;
	json_t *kinds, *absorbed, *o, *events = NULL;
	int64_t orders = 0, emails = 0, per_min = 0, stale = 0;
	enum sd_result r;
	int n = 0, i, short_of = 0, backup_ok;

	if ((r = queue_stats(c->db, &rows, &n, &total)) != SD_OK ||
	    (r = event_box_totals(c->db, &orders, &emails)) != SD_OK ||
	    (r = queue_done_since(c->db, clock_now_ms() - 60000, &per_min)) != SD_OK) {
		free(rows);
		api_res_internal(c->res, c->req, r);
		return;
	}
	/* the whole answer or a 500: never one with a kind or an event missing */
	kinds = json_object();
	for (i = 0; i < n; i++)
		short_of += !kinds || json_object_set_new(kinds, rows[i].kind,
							  counts_json(&rows[i])) != 0;
	free(rows);
	if ((r = api_events_list(c->db, &events)) != SD_OK) {
		json_decref(kinds);
		api_res_internal(c->res, c->req, r);
		return;
	}
	absorbed = absorbed_json(c->a->metrics, &stale);
	if (short_of || !kinds || !absorbed) {
		json_decref(kinds);
		json_decref(events);
		json_decref(absorbed);
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	maint_disk(c->a->db_path, c->a->state_dir, c->a->disk_warn_bytes, &disk);
	o = json_pack("{s:{s:o, s:o}, s:I, s:I, s:o, s:I, s:o, s:I, s:o, s:o}", "jobs", "total",
		      counts_json(&total), "by_kind", kinds, "orders", (json_int_t)orders,
		      "emails_sent", (json_int_t)emails, "events", events, "done_per_minute",
		      (json_int_t)per_min, "duplicates_absorbed", absorbed,
		      "stale_acks", (json_int_t)stale, "disk", disk_json(&disk), "backup",
		      backup_json(c->a, &backup_ok));
	api_res_json(c->res, 200, o);
}

void api_get_healthz(struct call *c)
{
	int64_t pending = 0, wal = 0;
	int alive = -1, db_ok, ok, backup_ok;
	struct maint_disk disk;
	json_t *o, *backup;

	db_ok = c->db && queue_pending(c->db, &pending) == SD_OK &&
		db_wal_bytes(c->db, &wal) == SD_OK;
	if (c->a->workers_alive)
		alive = c->a->workers_alive(c->a->arg);
	maint_disk(c->a->db_path, c->a->state_dir, c->a->disk_warn_bytes, &disk);
	backup = backup_json(c->a, &backup_ok);
	ok = db_ok && alive != 0 && !disk.low && backup_ok;
	o = json_pack("{s:b, s:s, s:o, s:I, s:o, s:o}", "ok", ok, "db", db_ok ? "ok" : "error",
		      "workers_alive", alive < 0 ? json_null() : json_integer(alive), "wal_bytes",
		      (json_int_t)wal, "disk", disk_json(&disk), "backup", backup);
	api_res_json(c->res, ok ? 200 : 503, o);
}

/* backup_prom: the periodic backups' series (none when backup_dir is not
 * set), as /healthz judges them. */
static void backup_prom(FILE *f, const struct api *a)
{
	struct backup_status st;

	if (!a->backup_dir[0])
		return;
	backup_sched_status(a->db_path, a->backup_dir, a->backup_interval_ms, clock_now_ms(), &st);
	fprintf(f, "# HELP stagedoor_backup_ok 1 while the newest good periodic backup is younger "
		"than two intervals and the last attempt did not fail (as /healthz).\n"
		"# TYPE stagedoor_backup_ok gauge\nstagedoor_backup_ok %d\n"
		"# HELP stagedoor_backup_last_success_timestamp_seconds When the newest good "
		"periodic backup was taken (Unix time); 0: none.\n"
		"# TYPE stagedoor_backup_last_success_timestamp_seconds gauge\n"
		"stagedoor_backup_last_success_timestamp_seconds %lld\n"
		"# HELP stagedoor_backup_age_seconds Age of the newest good periodic backup; "
		"-1: none.\n"
		"# TYPE stagedoor_backup_age_seconds gauge\nstagedoor_backup_age_seconds %.3f\n"
		"# HELP stagedoor_backups Good periodic backups in backup_dir.\n"
		"# TYPE stagedoor_backups gauge\nstagedoor_backups %d\n"
		"# HELP stagedoor_backup_failures_total Periodic backups that failed.\n"
		"# TYPE stagedoor_backup_failures_total counter\n"
		"stagedoor_backup_failures_total %lld\n",
		st.ok, (long long)(st.last_ok_ms / 1000),
		st.age_ms < 0 ? -1.0 : (double)st.age_ms / 1000.0, st.good,
		(long long)st.failures_total);
}

/* the queue's controls: per controlled kind, whether it is paused, how
 * long the oldest ready one has waited for its control, what runs (a
 * failed read leaves them out: the rest of /metrics still answers) */
static void controls_prom(FILE *f, struct db *db)
{
	static const char *const help[3][2] = {
		{ "stagedoor_control_paused", "1 while the kind is paused." },
		{ "stagedoor_control_wait_seconds", "How long the oldest ready job of a paused or "
		  "limited kind has waited for its control." },
		{ "stagedoor_control_running", "Live leases of a paused or limited kind." },
	};
	struct control *v;
	int n, i, m;

	if (controls_list(db, &v, &n) != SD_OK)
		return;
	for (m = 0; m < 3; m++) {
		fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", help[m][0], help[m][1], help[m][0]);
		for (i = 0; i < n; i++) {
			fprintf(f, "%s{kind=\"", help[m][0]);
			metrics_prom_label(f, v[i].kind);
			if (m == 0)
				fprintf(f, "\"} %d\n", v[i].paused_at != 0);
			else if (m == 1)
				fprintf(f, "\"} %.3f\n", v[i].waited_ms / 1000.0);
			else
				fprintf(f, "\"} %lld\n", (long long)v[i].running);
		}
	}
	free(v);
}

void api_get_metrics(struct call *c)
{
	static const char *const names[] = { "ready", "scheduled", "leased", "dead" };
	struct queue_counts *rows = NULL, total;
	int64_t orders = 0, emails = 0, reclaims = 0, wal = 0;
	enum sd_result r;
	char *buf = NULL;
	size_t len = 0;
	int n = 0, i, s;
	struct metrics_snapshot *ms;
	FILE *f;

	if ((r = queue_stats(c->db, &rows, &n, &total)) != SD_OK ||
	    (r = event_box_totals(c->db, &orders, &emails)) != SD_OK ||
	    (r = queue_reclaims(c->db, &reclaims)) != SD_OK ||
	    (r = db_wal_bytes(c->db, &wal)) != SD_OK) {
		free(rows);
		api_res_internal(c->res, c->req, r);
		return;
	}
	if (!(f = open_memstream(&buf, &len))) {
		free(rows);
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	fputs("# HELP stagedoor_jobs Jobs in the stream and the dead letters by state and kind.\n"
	      "# TYPE stagedoor_jobs gauge\n", f);
	for (i = 0; i < n; i++)
		for (s = 0; s < 4; s++) {
			int64_t v = s == 0 ? rows[i].ready : s == 1 ? rows[i].scheduled :
				    s == 2 ? rows[i].leased : rows[i].dead;
			fprintf(f, "stagedoor_jobs{state=\"%s\",kind=\"", names[s]);
			metrics_prom_label(f, rows[i].kind);
			fprintf(f, "\"} %lld\n", (long long)v);
		}
	fputs("# HELP stagedoor_jobs_done_total Jobs finished, by kind.\n"
	      "# TYPE stagedoor_jobs_done_total counter\n", f);
	for (i = 0; i < n; i++) {
		fputs("stagedoor_jobs_done_total{kind=\"", f);
		metrics_prom_label(f, rows[i].kind);
		fprintf(f, "\"} %lld\n", (long long)rows[i].done);
	}
	fprintf(f, "# HELP stagedoor_dead_jobs Jobs in the dead letters.\n"
		"# TYPE stagedoor_dead_jobs gauge\nstagedoor_dead_jobs %lld\n"
		"# HELP stagedoor_emails_sent_total Orders whose ticket email is sent.\n"
		"# TYPE stagedoor_emails_sent_total counter\nstagedoor_emails_sent_total %lld\n"
		"# HELP stagedoor_reclaims_total Deliveries after an expired lease (finished "
		"jobs still kept).\n"
		"# TYPE stagedoor_reclaims_total counter\nstagedoor_reclaims_total %lld\n"
		"# HELP stagedoor_wal_bytes Size of the WAL file.\n"
		"# TYPE stagedoor_wal_bytes gauge\nstagedoor_wal_bytes %lld\n"
		"# HELP stagedoor_orders_total Orders accepted.\n"
		"# TYPE stagedoor_orders_total counter\nstagedoor_orders_total %lld\n",
		(long long)total.dead, (long long)emails, (long long)reclaims, (long long)wal,
		(long long)orders);
	{
		struct maint_disk d;

		maint_disk(c->a->db_path, c->a->state_dir, c->a->disk_warn_bytes, &d);
		fprintf(f, "# HELP stagedoor_disk_free_bytes Free space for the database's folder "
			"(db) and the state folder (state); -1: cannot be read.\n"
			"# TYPE stagedoor_disk_free_bytes gauge\n"
			"stagedoor_disk_free_bytes{folder=\"db\"} %lld\n"
			"stagedoor_disk_free_bytes{folder=\"state\"} %lld\n"
			"# HELP stagedoor_disk_warn_bytes Below this free space /healthz fails.\n"
			"# TYPE stagedoor_disk_warn_bytes gauge\nstagedoor_disk_warn_bytes %lld\n",
			(long long)d.db_free, (long long)d.state_free, (long long)d.warn_bytes);
	}
	backup_prom(f, c->a);
	controls_prom(f, c->db);
	fprintf(f, "# HELP stagedoor_scans_limited_total Scans refused with 429: past a token's "
		"scan_rate (since this listener started).\n"
		"# TYPE stagedoor_scans_limited_total counter\nstagedoor_scans_limited_total %lld\n",
		(long long)__atomic_load_n(&c->a->scans_limited, __ATOMIC_RELAXED));
	free(rows);
	if ((ms = malloc(sizeof *ms))) {
		metrics_read(c->a->metrics, ms);
		metrics_write_prom(f, ms);
		free(ms);
	}
	if (fclose(f) != 0 || !buf || !ms) {
		free(buf);
		api_res_internal(c->res, c->req, err_set(SD_NOMEM, "out of memory"));
		return;
	}
	api_res_set(c->res, 200, "text/plain; version=0.0.4", buf, len);
}


/* GET /ca.pem: the box CA's certificate (public), so that a phone or a
 * laptop can install it and trust the box's HTTPS */
void api_get_ca(struct call *c)
{
	FILE *f;
	char *buf;
	size_t n;

	if (!c->a->ca_path[0] || !(f = fopen(c->a->ca_path, "re"))) {
		api_res_fail(c->res, 404, "this box has no CA (stagedoor tls init makes one)", NULL);
		return;
	}
	buf = malloc(API_CA_MAX + 2);
	n = buf ? fread(buf, 1, API_CA_MAX + 1, f) : 0;
	fclose(f);
	if (buf)
		buf[n] = '\0';	/* before it is searched */
	if (!buf || n == 0 || n > API_CA_MAX || !strstr(buf, "-----BEGIN CERTIFICATE-----")) {
		free(buf);
		api_res_internal(c->res, c->req, err_set(SD_IO, "the box CA %s is unreadable",
							 c->a->ca_path));
		return;
	}
	api_res_set(c->res, 200, "application/x-pem-file", buf, n);
}
