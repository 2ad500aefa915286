/*
 * record.c: the record, the whole state as one JSON document (paysink.c
 * lists its fields), so that a soak can judge the box from it alone: who
 * paid, how, what each payment intent and charge became, every refund with
 * its status and where it came from (the API or the Dashboard), every
 * dispute, every event and what became of its deliveries.
 *
 * The file (--record) is rewritten after every change: a temp file beside
 * it, fsync, rename, fsync of the folder, so a reader (the soak's judge)
 * never sees half of one.  GET /_paysink/record answers the same bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paysink.h"

static json_t *when(int64_t t)
{
	return t ? json_integer(t) : json_null();
}

static json_t *id_or_null(const char *id)
{
	return id[0] ? json_string(id) : json_null();
}

/* a session's payment: its intent, charge, refunds and dispute */
static json_t *record_payment(const struct ps_session *s)
{
	const struct ps_payment *p = &s->pay;

	return json_pack("{s:o,s:o,s:o,s:o,s:o,s:o,s:I,s:I,s:I,s:b,s:o,s:o}", "payment_intent",
			 id_or_null(p->pi), "payment_intent_status",
			 p->pi[0] ? json_string(pi_status_name(p->status)) : json_null(),
			 "payment_method", id_or_null(p->method), "charge", id_or_null(p->charge),
			 "charge_status", p->charge[0] ?
			 json_string(charge_status_name(p->charge_status)) : json_null(),
			 "failure_code", id_or_null(p->failure_code), "charges",
			 (json_int_t)s->charges, "amount_refunded", (json_int_t)p->refunded,
			 "amount_refund_pending", (json_int_t)p->refund_pending, "disputed",
			 p->disputed, "submitted_at", when(p->created), "settled_at",
			 when(p->settled_at));
}

static json_t *record_session(const void *p)
{
	const struct ps_session *s = p;
	json_t *o = json_object(), *pay = record_payment(s);

	json_object_set_new(o, "id", json_string(s->id));
	json_object_set_new(o, "client_reference_id", str_or_null(s->client_reference_id));
	json_object_set_new(o, "metadata", json_deep_copy(s->metadata));
	json_object_set_new(o, "amount_total", json_integer(s->amount_total));
	json_object_set_new(o, "currency", json_string(s->currency));
	json_object_set_new(o, "status", json_string(session_status_name(s)));
	json_object_set_new(o, "payment_status", json_string(session_payment_status(s)));
	json_object_set_new(o, "payment_method_types", json_deep_copy(s->pm_types));
	json_object_update(o, pay);
	json_decref(pay);
	json_object_set_new(o, "customer", id_or_null(s->customer));
	json_object_set_new(o, "created", json_integer(s->created));
	json_object_set_new(o, "expires_at", json_integer(s->expires_at));
	json_object_set_new(o, "completed_at", when(s->completed_at));
	json_object_set_new(o, "paid_at", when(s->paid_at));
	json_object_set_new(o, "expired_at", when(s->expired_at));
	json_object_set_new(o, "customer_email", str_or_null(s->customer_email));
	return o;
}

static json_t *record_refund(const void *p)
{
	const struct ps_refund *r = p;

	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:o,s:o,s:s,s:o,s:I,s:o}", "id", r->id,
			 "payment_intent", r->pi, "charge", r->charge, "session", r->session,
			 "amount", (json_int_t)r->amount, "currency", r->currency, "status",
			 refund_status_name(r->status), "failure_reason",
			 id_or_null(r->failure_reason), "reason", str_or_null(r->reason), "source",
			 r->dashboard ? "dashboard" : "api", "idempotency_key",
			 str_or_null(r->idempotency_key), "created", (json_int_t)r->created,
			 "settled_at", when(r->settled_at));
}

static json_t *record_dispute(const void *p)
{
	const struct ps_dispute *d = p;

	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:I,s:o}", "id", d->id, "charge",
			 d->charge, "payment_intent", d->pi, "session", d->session, "amount",
			 (json_int_t)d->amount, "currency", d->currency, "reason", d->reason,
			 "status", dispute_status_name(d->status), "created", (json_int_t)d->created,
			 "closed_at", when(d->closed_at));
}

static json_t *record_event(const void *p)
{
	const struct ps_event *ev = p;

	return json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:b,s:b,s:I}", "id", ev->id, "type", ev->type,
			 "session", ev->session, "delivered_ok", (json_int_t)ev->delivered_ok,
			 "attempts", (json_int_t)ev->attempts, "gave_up", (json_int_t)ev->gave_up,
			 "dropped", ev->dropped, "duplicated", ev->duplicated, "created",
			 (json_int_t)ev->created);
}

/* every object of kind, each as one says */
static json_t *record_list(enum ps_kind kind, json_t *(*one)(const void *))
{
	json_t *a = json_array();
	size_t i;

	for (i = 0; i < state_count(kind); i++)
		json_array_append_new(a, one(state_at(kind, i)));
	return a;
}

json_t *record_json(void)
{
	return json_pack("{s:o,s:o,s:o,s:o,s:{s:I,s:I,s:I,s:I,s:I},s:I,s:I,s:I,s:b}", "sessions",
			 record_list(PS_SESSIONS, record_session), "refunds",
			 record_list(PS_REFUNDS, record_refund), "disputes",
			 record_list(PS_DISPUTES, record_dispute), "events",
			 record_list(PS_EVENTS, record_event), "idempotency", "keys",
			 (json_int_t)idem_stored(), "replays", (json_int_t)ps_counts.idem_replays,
			 "conflicts", (json_int_t)ps_counts.idem_conflicts, "in_use",
			 (json_int_t)ps_counts.idem_in_use, "pruned",
			 (json_int_t)ps_counts.idem_pruned, "api_requests",
			 (json_int_t)ps_counts.api_requests, "injected_5xx",
			 (json_int_t)ps_counts.injected_5xx, "clock_offset",
			 (json_int_t)ps_clock_offset(), "refund_pending", ps_opts.refund_pending);
}

char *record_text(void)
{
	json_t *doc = record_json();
	char *text = doc ? json_dumps(doc, JSON_INDENT(1) | JSON_PRESERVE_ORDER) : NULL;
	char *line = NULL;

	json_decref(doc);
	if (text && asprintf(&line, "%s\n", text) < 0)
		line = NULL;
	free(text);
	return line;
}

int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

void record_write(void)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	char *text;
	int fd = -1, ok = 0;

	if (ps_opts.record_at_exit && !ps_stopping)
		return;
	if (!(text = record_text()))
		goto out;
	snprintf(tmp, sizeof tmp, "%s.tmp", ps_opts.record);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_all(fd, text, strlen(text)) != 0 ||
	    fsync(fd) != 0)
		goto out;
	close(fd);
	fd = -1;
	if (rename(tmp, ps_opts.record) != 0)
		goto out;
	/* the new name is only as durable as its folder */
	snprintf(dir, sizeof dir, "%s", ps_opts.record);
	fd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0)
		fsync(fd);
	ok = 1;
out:
	if (fd >= 0)
		close(fd);
	if (!ok)
		fprintf(stderr, "paysink: cannot write the record %s: %s\n", ps_opts.record,
			strerror(errno));
	free(text);
}
