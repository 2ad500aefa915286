/*
 * order.c: order add, show, find, pdf, resend, set-email and cancel:
 * the box office's command line.  Parsing and printing only; the work is in
 * orders (intake and changes) and blob (the PDF).  `order show` prints the
 * struct orders.c fills, as text or as the API's JSON.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "args.h"
#include "blob.h"
#include "cli.h"
#include "cmd/commands.h"
#include "config.h"
#include "db.h"
#include "fsio.h"
#include "money.h"
#include "orders.h"
#include "statedir.h"
#include "tickets.h"
#include "timefmt.h"

/* ---- add --------------------------------------------------------------- */

static int order_add_cmd(const char *dbp, int argc, char **argv)
{
	const char *name = NULL, *email = NULL, *key = NULL, *dbflag = NULL, *payment = NULL;
	int64_t event = 0, seats = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbflag),
		{ "event", ARG_INT, &event, 1, INT64_MAX, 0, "ID",
		  "the event's id (event add printed it)", 0 },
		{ "name", ARG_STR, &name, 0, 0, 0, "NAME",
		  "the buyer's name", 0 },
		{ "email", ARG_STR, &email, 0, 0, 0, "ADDR",
		  "the buyer's address (none: a walk-up buyer, tickets printed at the window)", 0 },
		{ "seats", ARG_INT, &seats, 1, TICKETS_SEATS_MAX, 0, NULL,
		  "seats in the order", 0 },
		{ "idempotency-key", ARG_STR, &key, 0, 0, 0, "KEY",
		  "the same key again returns the first order and writes nothing", 0 },
		{ "payment", ARG_STR, &payment, 0, 0, 0, "cash|card",
		  "the money taken at the box office, and how", 0 },
		ARG_END,
	};
	static const char usage[] = "order add --event ID --name NAME [--email ADDR] --seats N "
				    "[--payment cash|card] [--idempotency-key KEY]";
	char *pos[ARGS_MAX_POS], public_id[ORDER_ID_MAX];
	struct order_new o = { 0 };
	struct db *db;
	enum sd_result r;
	int npos, rc, replayed = 0;

	(void)dbp;
	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, usage)) != 0)
		return rc;
	if (!opts[1].seen || !name || !opts[4].seen) {
		fprintf(stderr, "stagedoor: usage: stagedoor %s\n", usage);
		return 2;
	}
	o.event_id = event;
	o.name = name;
	o.email = email;
	o.seats = seats;
	o.idempotency_key = key;
	o.payment = payment;
	/* the order is money taken: FULL durability for its transaction */
	if ((rc = cli_open_db(dbflag, 0, DB_SYNC_FULL, &db)) != 0)
		return rc;
	r = order_add(db, &o, public_id, &replayed);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s\n", public_id);
	if (replayed)
		fprintf(stderr, "stagedoor: idempotency key seen before: this is the first order, "
				"nothing new was written\n");
	return 0;
}

/* ---- show -------------------------------------------------------------- */

/* what it was paid and how, and what is owed back */

/* money that went back outside the box: refunds made at the provider, a
 * dispute */
static void show_money_back(const struct order_detail *d)
{
	const struct order_view *v = &d->v;
	char amount[MONEY_TEXT_MAX], when[64];

	if (d->back.refunded_minor >= 0) {
		money_plain(d->back.refunded_minor, v->currency, amount, sizeof amount);
		printf("back     %s %s refunded at the payment provider\n", amount, v->currency);
	}
	if (d->back.disputed_at) {
		timefmt_format(d->back.disputed_at, when, sizeof when);
		printf("dispute  %s, opened %s: the buyer's bank took the payment back\n",
		       d->back.dispute, when);
	}
}

static void show_money(const struct order_detail *d)
{
	const struct order_view *v = &d->v;
	char amount[MONEY_TEXT_MAX] = "", when[64];

	if (v->currency[0]) {
		money_plain(v->amount_minor, v->currency, amount, sizeof amount);
		snprintf(amount + strlen(amount), sizeof amount - strlen(amount), " %s",
			 v->currency);
	}
	if (strcmp(v->payment, "online") == 0)
		printf("payment  %s online (%s)\n", amount, v->payment_ref);
	else if (v->payment[0])
		printf("payment  %s%s%s at the box office\n", amount, amount[0] ? ", " : "",
		       v->payment);
	else if (amount[0])
		printf("price    %s\n", amount);
	show_money_back(d);
	if (!d->refund.owed)
		return;
	money_plain(d->refund.amount_minor, v->currency, amount, sizeof amount);
	if (d->refund.failed_at) {
		timefmt_format(d->refund.failed_at, when, sizeof when);
		printf("refund   %s %s, FAILED at the provider %s (%s): owed at the window, pay "
		       "it out there\n", amount, v->currency, when,
		       d->refund.failure[0] ? d->refund.failure : "no reason given");
	} else if (d->refund.done_at) {
		timefmt_format(d->refund.done_at, when, sizeof when);
		printf("refund   %s %s, refunded %s (%s)\n", amount, v->currency, when,
		       d->refund.provider_id[0] ? d->refund.provider_id : "the provider's");
	} else if (d->refund.status[0]) {
		printf("refund   %s %s, %s at the provider (%s)\n", amount, v->currency,
		       d->refund.status, d->refund.provider_id);
	} else {
		printf("refund   %s %s, owed %s\n", amount, v->currency,
		       d->refund.window ? "at the window: pay it out there" : "through the provider");
	}
}

static void show_when(int64_t ms, char *buf, size_t size)
{
	if (ms)
		timefmt_format(ms, buf, size);
	else
		snprintf(buf, size, "-");
}

/* "email" for the tickets' email, "resend r<n>" and "cancel" for the rest */
static void show_emails(const struct order_detail *d)
{
	char when[64], label[TICKETS_KIND_MAX + 8];
	int i;

	if (!d->n_emails)
		printf("email    not sent yet\n");
	for (i = 0; i < d->n_emails; i++) {
		const struct order_email *e = &d->emails[i];

		if (strcmp(e->kind, "tickets") == 0)
			snprintf(label, sizeof label, "email   ");
		else if (strncmp(e->kind, "tickets-", 8) == 0)
			snprintf(label, sizeof label, "resend %s", e->kind + 8);
		else
			snprintf(label, sizeof label, "%-8s", e->kind);
		show_when(e->sent_at, when, sizeof when);
		if (e->sent_at)
			printf("%s sent %s%s%s%s%s%s\n", label, when, e->to[0] ? " to " : "", e->to,
			       e->message_id[0] ? " (" : "", e->message_id,
			       e->message_id[0] ? ")" : "");
		else
			printf("%s %s\n", label, e->claimed_at ?
			       "being sent (claimed, not yet confirmed)" : "not sent yet");
	}
}

static void show_text(const struct order_detail *d)
{
	const struct order_view *v = &d->v;
	char when[64];
	int i, k;

	printf("order    %s%s\n", v->public_id, v->cancelled_at ? " (cancelled)" : "");
	timefmt_format(v->starts_at, when, sizeof when);
	printf("event    %s, %s, %s\n", v->event_name, v->venue, when);
	if (v->buyer_email[0])
		printf("buyer    %s <%s>\n", v->buyer_name, v->buyer_email);
	else
		printf("buyer    %s (no email: tickets printed at the window)\n", v->buyer_name);
	show_money(d);
	printf("seats    %lld\n", (long long)v->seats);
	printf("pdf      %s\n", v->pdf_stored ? d->pdf_key : "not stored yet");
	show_emails(d);
	if (v->resends)
		printf("resends  %lld\n", (long long)v->resends);
	printf("tickets\n");
	for (i = 0; i < v->n_tickets; i++) {
		show_when(d->tickets[i].scanned_at, when, sizeof when);
		if (d->tickets[i].state == TICKET_ADMITTED)
			printf("  %-8s admitted %s%s%s\n", v->tickets[i].seat_label, when,
			       d->tickets[i].scanned_by[0] ? " at " : "", d->tickets[i].scanned_by);
		else
			printf("  %-8s %s\n", v->tickets[i].seat_label,
			       d->tickets[i].state == TICKET_CANCELLED ? "cancelled" : "not scanned");
	}
	if (d->n_changes)
		printf("changes\n");
	for (i = 0; i < d->n_changes; i++) {
		timefmt_format(d->changes[i].at, when, sizeof when);
		printf("  %s  %-6s by %s%s%s\n", when, d->changes[i].kind, d->changes[i].actor,
		       d->changes[i].detail[0] ? ": " : "", d->changes[i].detail);
	}
	printf("jobs\n");
	for (i = 0; i < d->n_jobs; i++) {
		const struct order_job *j = &d->jobs[i];
		printf("  %-22s %-14s", j->kind, j->job_id);
		if (!j->published)
			printf(" waiting for the relay");
		for (k = 0; k < j->n_entries; k++)
			printf(" %s%s (deliveries %lld, attempts %lld)", k ? "; " : "",
			       j->entries[k].state, (long long)j->entries[k].deliveries,
			       (long long)j->entries[k].attempts);
		putchar('\n');
	}
}

static int order_show_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	int json = 0;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_JSON(&json),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], *out;
	struct order_detail *d;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "order show ID [--json]")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = order_detail_get(db, pos[0], &d);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	if (json) {
		if (!(out = api_order_json_text(d))) {
			order_detail_free(d);
			return cli_fail(err_set(SD_NOMEM, "out of memory"));
		}
		printf("%s\n", out);
		free(out);
	} else {
		show_text(d);
	}
	order_detail_free(d);
	return 0;
}

/* ---- find -------------------------------------------------------------- */

static void find_row(const struct order_recent *o, void *arg)
{
	char when[64];

	(*(int *)arg)++;
	timefmt_format(o->created_at, when, sizeof when);
	printf("%s  %s  event %lld  %lld seat%s  %s <%s>%s\n", o->id, when, (long long)o->event_id,
	       (long long)o->seats, o->seats == 1 ? "" : "s", o->name, o->email_address,
	       o->cancelled ? "  cancelled" : "");
}

/* order find TEXT: an order id's first characters, an address, or a part of
 * a name; exit 1 when nothing is found */
static int order_find_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS];
	struct db *db;
	enum sd_result r;
	int npos, rc, n = 0;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1, "order find TEXT")) != 0)
		return rc;
	if ((rc = cli_open_db(dbp, 0, DB_SYNC_NORMAL, &db)) != 0)
		return rc;
	r = order_search(db, pos[0], find_row, &n);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	if (n == 0)
		fprintf(stderr, "stagedoor: no order found for '%.80s'\n", pos[0]);
	return n ? 0 : 1;
}

/* ---- pdf --------------------------------------------------------------- */

/* order pdf ID --out FILE: the stored PDF, from files or the database */
static int order_pdf_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL, *outp = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_STATE_DIR(&state),
		{ "out", ARG_STR, &outp, 0, 0, 0, "FILE",
		  "where the PDF goes (made 0600)", 0 },
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], key[64], head[PATH_MAX + 16], id[ORDER_ID_MAX];
	struct blob_store *bs = NULL;
	unsigned char *pdf = NULL;
	size_t len = 0;
	enum sd_result r;
	int npos, rc;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 1, 1,
			    "order pdf ID --out FILE [--state-dir DIR]")) != 0)
		return rc;
	if ((r = order_id_norm(pos[0], id)) != SD_OK)
		return cli_fail(r);
	if (!outp || !*outp)
		return cli_fail(err_set(SD_INVALID, "order pdf: give --out FILE (the PDF holds the "
					"buyer's tickets; it is written mode 0600)"));
	snprintf(key, sizeof key, "tickets/%s.pdf", id);
	if ((r = statedir_blobs_open(cli_db_path(dbp), cli_state_dir(state), &bs)) != SD_OK ||
	    (r = blob_get(bs, key, &pdf, &len)) != SD_OK) {
		blob_close(bs);
		if (r == SD_NOT_FOUND)
			err_set(SD_NOT_FOUND, "order %s has no stored PDF (no such order, or its "
				"tickets are not rendered yet: see order show %s)", id, id);
		return cli_fail(r);
	}
	blob_close(bs);
	snprintf(head, sizeof head, "%s.tmp-", outp);
	r = fsio_put(outp, pdf, len, head, "", 0600, FSIO_RENAME, NULL);
	free(pdf);
	if (r != SD_OK)
		return cli_fail(r);
	printf("%s: %zu bytes\n", outp, len);
	return 0;
}

/* ---- changes ----------------------------------------------------------- */

/* the ID (pos[0]) and the open database a change needs: 0, or the exit
 * code (the message printed) */
static int change_open(int argc, char **argv, struct arg_opt *opts, int npos_min, int npos_max,
		       const char *usage, char **pos, int *npos, struct db **db)
{
	char idn[ORDER_ID_MAX];
	enum sd_result r;
	int rc;

	if ((rc = cli_parse(argc, argv, opts, pos, npos, npos_min, npos_max, usage)) != 0)
		return rc;
	if ((r = order_id_norm(pos[0], idn)) != SD_OK)
		return cli_fail(r);
	memcpy(pos[0], idn, strlen(idn) + 1);	/* what it prints names the order as made */
	/* a change is the staff's word to the buyer: FULL, as the order;
	 * opts[0] is --db */
	return cli_open_db(*(const char **)opts[0].value, 0, DB_SYNC_FULL, db);
}

/* order resend ID: the tickets again, a new intent with its own key */
static int order_resend_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], actor[ORDER_ACTOR_MAX];
	const char *none[CONFIG_N_KEYS] = { 0 };
	struct order_resend_limit lim;
	struct config cfg;
	struct db *db;
	enum sd_result r;
	int64_t n = 0;
	int npos, rc;

	/* the box's limit holds at the counter too (resend_per_hour, _day) */
	if ((r = config_resolve(&cfg, NULL, none)) != SD_OK)
		return cli_fail(r);
	lim.per_hour = config_int(&cfg, CONFIG_RESEND_PER_HOUR);
	lim.per_day = config_int(&cfg, CONFIG_RESEND_PER_DAY);
	config_free(&cfg);
	if ((rc = change_open(argc, argv, opts, 1, 1, "order resend ID", pos, &npos, &db)) != 0)
		return rc;
	cli_actor(actor, sizeof actor);
	r = order_resend(db, pos[0], actor, &lim, &n, NULL);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("order %s: resend %lld queued (its email key is tickets-%s-r%lld)\n", pos[0],
	       (long long)n, pos[0], (long long)n);
	return 0;
}

/* order set-email ID ADDRESS */
static int order_set_email_cmd(int argc, char **argv)
{
	const char *dbp = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], actor[ORDER_ACTOR_MAX];
	struct db *db;
	enum sd_result r;
	int npos, rc, changed = 0;

	if ((rc = change_open(argc, argv, opts, 2, 2, "order set-email ID ADDRESS", pos, &npos,
			      &db)) != 0)
		return rc;
	cli_actor(actor, sizeof actor);
	r = order_set_email(db, pos[0], pos[1], actor, &changed);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	printf("order %s: %s\n", pos[0], changed ? "the email address is changed; emails not yet "
	       "sent go to it (order resend sends the tickets there)" : "the address was already "
	       "this one: nothing changed");
	return 0;
}

/* order cancel ID [--reason TEXT]: exit 3 when a ticket was admitted */
static int order_cancel_cmd(int argc, char **argv)
{
	const char *dbp = NULL, *reason = NULL;
	struct arg_opt opts[] = {
		ARG_DB(&dbp),
		{ "reason", ARG_STR, &reason, 0, 0, 0, "TEXT",
		  "why, kept with the change", 0 },
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], actor[ORDER_ACTOR_MAX];
	struct order_cancel_result res;
	struct db *db;
	enum sd_result r;
	int npos, rc;

	if ((rc = change_open(argc, argv, opts, 1, 1, "order cancel ID [--reason TEXT]", pos, &npos,
			      &db)) != 0)
		return rc;
	cli_actor(actor, sizeof actor);
	r = order_cancel(db, pos[0], actor, reason, &res);
	db_close(db);
	if (r != SD_OK)
		return cli_fail(r);
	if (res.already)
		printf("order %s was cancelled before: nothing changed\n", pos[0]);
	else
		printf("order %s is cancelled: %lld seat%s back on sale, its tickets refused at "
		       "the door; %sthe buyer gets the cancellation email\n", pos[0],
		       (long long)res.seats_freed, res.seats_freed == 1 ? "" : "s",
		       res.refund == ORDER_REFUND_PROVIDER ? "its payment is refunded and "
		       : res.refund == ORDER_REFUND_WINDOW ? "its price is owed back at the window "
			 "(order show says how much); " : "");
	return 0;
}

static int order_add_word(int argc, char **argv)
{
	return order_add_cmd(NULL, argc, argv);
}

static const struct cli_cmd order_subs[] = {
	{ "add", order_add_word, "sell an order: its tickets, its PDF and its email follow "
				 "(prints the order id; exit 2 when sold out)", NULL, 0 },
	{ "show", order_show_cmd, "an order: tickets, emails, changes and its jobs", NULL, 0 },
	{ "find", order_find_cmd, "orders by an id's first characters, an address or a part of "
				  "a name", NULL, 0 },
	{ "pdf", order_pdf_cmd, "write an order's tickets PDF to a file", NULL, 0 },
	{ "resend", order_resend_cmd, "send the tickets again (a new email, sent once)", NULL, 0 },
	{ "set-email", order_set_email_cmd, "the buyer's address from now on", NULL, 0 },
	{ "cancel", order_cancel_cmd, "cancel: seats back on sale, tickets refused at the door, "
				      "one cancellation email (exit 3 if a ticket was admitted)",
	  NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_order = CLI_NODE("order", NULL, order_subs,
		"sell, find and change orders");
