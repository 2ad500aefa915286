/*
 * tickets.c: the ground the ticket work stands on (tickets.h): the
 * handlers' environment, an order as the handlers read it, its PDF and its
 * emails.
 *
 * Invariants:
 *  - an email's provider key and its email_sends kind come from its intent
 *    and its order's public id alone (tickets_intent_key,
 *    tickets_intent_kind), never from an attempt or a row id;
 *  - nothing here holds a transaction across rendering, file or mail I/O.
 */
#define _GNU_SOURCE
#include "tickets.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "event_mail.h"
#include "idem.h"
#include "pdf.h"
#include "statedir.h"
#include "stripe.h"
#include "text.h"
#include "timefmt.h"

/* ======================== the environment ================================ */

enum sd_result tickets_env_open(const char *db_path, const char *state_dir, const char *mail_url,
				const char *mail_from,
				const struct mail_config *mail_cfg, struct tickets_env **out)
{
	struct tickets_env *env;
	char path[PATH_MAX + 16], url[PATH_MAX + 16];
	enum sd_result r;

	*out = NULL;
	if (!(env = calloc(1, sizeof *env)))
		return err_set(SD_NOMEM, "out of memory");
	snprintf(env->db_path, sizeof env->db_path, "%s", db_path);
	snprintf(env->mail_from, sizeof env->mail_from, "%s",
		 mail_from ? mail_from : TICKETS_MAIL_FROM_DEFAULT);
	if ((r = mail_address_valid(env->mail_from)) != SD_OK)
		goto fail;
	if ((r = statedir_blobs_open(db_path, state_dir, &env->blobs)) != SD_OK)
		goto fail;
	if ((r = code_key_path(db_path, state_dir, path, sizeof path)) != SD_OK ||
	    (r = code_key_load(path, env->key)) != SD_OK)
		goto fail;
	if (!mail_url) {
		statedir_mail_url(db_path, state_dir, url, sizeof url);
		mail_url = url;
	}
	if ((r = mail_open_opts(mail_url, mail_cfg, &env->mail)) != SD_OK)
		goto fail;
	*out = env;
	return SD_OK;
fail:
	tickets_env_close(env);
	return r;
}

void tickets_env_close(struct tickets_env *env)
{
	if (!env)
		return;
	blob_close(env->blobs);
	mail_close(env->mail);
	stripe_close(env->stripe);
	/* the key does not outlive its use in memory */
	memset(env->key, 0, sizeof env->key);
	free(env);
}

/* ======================== loading an order =============================== */

static const char SQL_ORDER_LOAD[] =
	"SELECT o.id, o.event_id, o.seats, o.public_id, o.buyer_name, coalesce(o.buyer_email, ''), "
	"e.name, e.venue, e.starts_at, coalesce(o.cancelled_at, 0), o.resends, "
	"coalesce(o.payment, ''), coalesce(o.amount_minor, 0), coalesce(o.currency, ''), "
	"coalesce(o.payment_ref, ''), e.change_no, e.cancelled_at IS NOT NULL, e.reminders "
	"FROM orders o JOIN events e ON e.id = o.event_id WHERE o.id = ?1";
static const char SQL_ORDER_TICKETS[] =
	"SELECT id, seat_label, pdf_key IS NOT NULL, code_id, coalesce(pdf_key, '') FROM tickets "
	"WHERE order_id = ?1 ORDER BY seat_no";

enum sd_result tickets_load_order(struct db *db, int64_t order_id, struct order_view *v)
{
	struct db_stmt *st = db_stmt(db, SQL_ORDER_LOAD);
	enum sd_result r;
	int row = 0, stored = 0;

	memset(v, 0, sizeof *v);
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, order_id);
	if ((r = db_step(st, &row)) != SD_OK)
		return r;
	if (!row) {
		db_reset(st);
		return err_set(SD_NOT_FOUND, "no order %lld", (long long)order_id);
	}
	v->id = db_col_int(st, 0);
	v->event_id = db_col_int(st, 1);
	v->seats = db_col_int(st, 2);
	snprintf(v->public_id, sizeof v->public_id, "%s", db_col_text(st, 3));
	text_copy(v->buyer_name, sizeof v->buyer_name, db_col_text(st, 4));
	text_copy(v->buyer_email, sizeof v->buyer_email, db_col_text(st, 5));
	text_copy(v->event_name, sizeof v->event_name, db_col_text(st, 6));
	text_copy(v->venue, sizeof v->venue, db_col_text(st, 7));
	v->starts_at = db_col_int(st, 8);
	v->cancelled_at = db_col_int(st, 9);
	v->resends = db_col_int(st, 10);
	snprintf(v->payment, sizeof v->payment, "%s", db_col_text(st, 11));
	v->amount_minor = db_col_int(st, 12);
	text_copy(v->currency, sizeof v->currency, db_col_text(st, 13));
	text_copy(v->payment_ref, sizeof v->payment_ref, db_col_text(st, 14));
	v->change_no = db_col_int(st, 15);
	v->event_cancelled = (int)db_col_int(st, 16);
	v->event_reminders = (int)db_col_int(st, 17);
	db_reset(st);
	if (!(st = db_stmt(db, SQL_ORDER_TICKETS)))
		return SD_DB;
	db_bind_int(st, 1, order_id);
	for (;;) {
		if ((r = db_step(st, &row)) != SD_OK)
			return r;
		if (!row || v->n_tickets == TICKETS_SEATS_MAX)
			break;
		v->tickets[v->n_tickets].id = db_col_int(st, 0);
		v->tickets[v->n_tickets].code_id = db_col_int(st, 3);
		snprintf(v->tickets[v->n_tickets].seat_label,
			 sizeof v->tickets[v->n_tickets].seat_label, "%s", db_col_text(st, 1));
		stored += (int)db_col_int(st, 2);
		if (!v->pdf_key[0])
			text_copy(v->pdf_key, sizeof v->pdf_key, db_col_text(st, 4));
		v->n_tickets++;
	}
	db_reset(st);
	v->pdf_stored = v->n_tickets > 0 && stored == v->n_tickets;
	return SD_OK;
}

void tickets_pdf_key(const struct order_view *v, char *buf, size_t size)
{
	if (v->change_no > 0)
		snprintf(buf, size, "tickets/%s-c%lld.pdf", v->public_id, (long long)v->change_no);
	else
		snprintf(buf, size, "tickets/%s.pdf", v->public_id);
}

enum sd_result tickets_render_pdf(const struct tickets_env *env, const struct order_view *v,
				  unsigned char **pdf, size_t *len)
{
	struct pdf_ticket t[TICKETS_SEATS_MAX];
	char codes[TICKETS_SEATS_MAX][CODE_TEXT_MAX], when[64];
	struct pdf_order po;
	int i;

	for (i = 0; i < v->n_tickets; i++) {
		code_make(env->key, v->tickets[i].code_id, v->event_id, codes[i]);
		t[i].seat_label = v->tickets[i].seat_label;
		t[i].code = codes[i];
	}
	timefmt_format(v->starts_at, when, sizeof when);
	po.event_name = v->event_name;
	po.venue = v->venue;
	po.starts_at = when;
	po.buyer_name = v->buyer_name;
	po.order_id = v->public_id;
	po.tickets = t;
	po.n_tickets = v->n_tickets;
	return pdf_render(&po, pdf, len);
}

enum sd_result tickets_render_store(struct tickets_env *env, const struct order_view *v)
{
	char key[BLOB_KEY_MAX + 1];
	unsigned char *pdf = NULL;
	size_t len = 0;
	enum sd_result r;

	if ((r = tickets_render_pdf(env, v, &pdf, &len)) != SD_OK)
		return r;
	tickets_pdf_key(v, key, sizeof key);
	r = blob_put(env->blobs, key, pdf, len);
	free(pdf);
	return r;
}

static const char SQL_PDF_REPLACE[] =
	"UPDATE tickets SET pdf_key = ?2 WHERE order_id = ?1 AND pdf_key IS NOT NULL "
	"AND pdf_key <> ?2";

enum sd_result tickets_pdf_replace(struct db *db, int64_t order_id, const char *key, int *won)
{
	struct db_stmt *st = db_stmt(db, SQL_PDF_REPLACE);
	enum sd_result r;
	int64_t n = 0;

	*won = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, order_id);
	db_bind_text(st, 2, key);
	if ((r = db_run_changes(db, st, &n)) == SD_OK)
		*won = n > 0;
	return r;
}

void tickets_intent_kind(const struct tickets_intent *in, char *buf, size_t size)
{
	switch (in->mail) {
	case TICKETS_MAIL_CANCEL:
		snprintf(buf, size, "cancel");
		break;
	case TICKETS_MAIL_EVENT_CANCEL:
		snprintf(buf, size, "cancel-event");
		break;
	case TICKETS_MAIL_MOVED:
		snprintf(buf, size, "moved-%lld", (long long)in->change_no);
		break;
	case TICKETS_MAIL_REMINDER:
		snprintf(buf, size, "reminder-%lld", (long long)in->starts_at);
		break;
	default:
		if (in->resend > 0)
			snprintf(buf, size, "tickets-r%lld", (long long)in->resend);
		else
			snprintf(buf, size, "tickets");
	}
}

void tickets_intent_key(const struct tickets_intent *in, const struct order_view *v, char *buf,
			size_t size)
{
	char kind[TICKETS_KIND_MAX + 32], subject[ORDER_ID_MAX + 24];

	switch (in->mail) {
	case TICKETS_MAIL_EVENT_CANCEL:
		snprintf(kind, sizeof kind, "cancel-event-%lld", (long long)v->event_id);
		idem_provider_key(buf, size, kind, v->public_id);
		break;
	case TICKETS_MAIL_MOVED:
		snprintf(kind, sizeof kind, "moved-%lld-%lld", (long long)v->event_id,
			 (long long)in->change_no);
		idem_provider_key(buf, size, kind, v->public_id);
		break;
	case TICKETS_MAIL_REMINDER:
		snprintf(subject, sizeof subject, "%s-%lld", v->public_id, (long long)in->starts_at);
		idem_provider_key(buf, size, "reminder", subject);
		break;
	default:
		if (in->mail == TICKETS_MAIL_CANCEL || in->resend <= 0) {
			tickets_intent_kind(in, kind, sizeof kind);
			idem_provider_key(buf, size, kind, v->public_id);
		} else {
			idem_provider_key(buf, size, "tickets", v->public_id);
			snprintf(buf + strlen(buf), size - strlen(buf), "-r%lld",
				 (long long)in->resend);
		}
	}
}

void tickets_job_id(const char *public_id, const char *intent, char *buf, size_t size)
{
	snprintf(buf, size, "outbox:%s:%s", public_id, intent);
}

/* the tickets' email: [out] *subject and *text (free()) */
static enum sd_result tickets_text(const struct order_view *v, const struct tickets_intent *in,
				   const char *when, char **subject, char **text)
{
	int n = v->n_tickets;

	if (in->mail != TICKETS_MAIL_CANCEL && in->mail != TICKETS_MAIL_TICKETS)
		return event_mail_text(v, in, when, subject, text);
	if (in->mail == TICKETS_MAIL_CANCEL) {
		if (asprintf(subject, "Your order for %s is cancelled", v->event_name) < 0)
			*subject = NULL;
		else if (asprintf(text, "Hello %s,\n\nyour order %s for %d seat%s at %s, %s on %s, "
				  "is cancelled.  Its tickets no longer admit anyone at the door.\n",
				  v->buyer_name, v->public_id, (int)v->seats, v->seats == 1 ? "" : "s",
				  v->event_name, v->venue, when) < 0)
			*text = NULL;
	} else {
		if (asprintf(subject, "Your tickets for %s%s", v->event_name,
			     in->resend > 0 ? " (sent again)" : "") < 0)
			*subject = NULL;
		else if (asprintf(text, "Hello %s,\n\nyour %d ticket%s for %s at %s on %s %s "
				  "attached.\nShow the code on each page at the door.\n\nOrder %s\n",
				  v->buyer_name, n, n == 1 ? "" : "s", v->event_name, v->venue, when,
				  n == 1 ? "is" : "are", v->public_id) < 0)
			*text = NULL;
	}
	if (!*subject || !*text) {
		free(*subject);
		*subject = *text = NULL;
		return err_set(SD_NOMEM, "out of memory");
	}
	return SD_OK;
}

enum sd_result tickets_send_mail(struct tickets_env *env, const struct order_view *v,
				 const struct tickets_intent *in, const char *key_in,
				 struct mail_result *res)
{
	char key[BLOB_KEY_MAX + 1], idem[TICKETS_KEY_MAX + 1], when[64], fname[64];
	char *subject = NULL, *text = NULL;
	unsigned char *pdf = NULL;
	size_t len = 0;
	struct mail_attachment att;
	struct mail_message m;
	enum sd_result r;

	/* the tickets, and a moved event's new ones: the PDF its tickets name */
	if (in->mail == TICKETS_MAIL_TICKETS || in->mail == TICKETS_MAIL_MOVED) {
		if (v->pdf_key[0])
			snprintf(key, sizeof key, "%s", v->pdf_key);
		else
			tickets_pdf_key(v, key, sizeof key);
		if ((r = blob_get(env->blobs, key, &pdf, &len)) != SD_OK)
			return r;
	}
	timefmt_format(v->starts_at, when, sizeof when);
	if ((r = tickets_text(v, in, when, &subject, &text)) != SD_OK) {
		free(pdf);
		return r;
	}
	memset(&m, 0, sizeof m);
	if (pdf) {
		snprintf(fname, sizeof fname, "tickets-%s.pdf", v->public_id);
		att.filename = fname;
		att.content_type = "application/pdf";
		att.data = pdf;
		att.len = len;
		m.attachments = &att;
		m.n_attachments = 1;
	}
	m.from = env->mail_from;
	m.from_name = "Box office";
	m.to = v->buyer_email;
	m.to_name = v->buyer_name;
	m.subject = subject;
	m.text = text;
	/* the intent, not the attempt: every retry of this email carries the
	 * same key, so the provider drops the repeats */
	if (!key_in)
		tickets_intent_key(in, v, idem, sizeof idem);
	m.idempotency_key = key_in ? key_in : idem;
	r = mail_send(env->mail, &m, res);
	free(subject);
	free(text);
	free(pdf);
	return r;
}
