/*
 * line.c: the shop's waiting line (line.h).  This module owns shop_line.
 *
 * Invariants:
 *  - a place is present while present_until is ahead and it has not left;
 *    every count of the line reads present places only, so a closed page
 *    costs the line nothing once its lease ran out;
 *  - a hold is granted to a place only in a transaction that holds the
 *    event's row lock, finds no present place before it and finds room
 *    (the share and the seats), and the place leaves in that transaction
 *    (left_at, hold_id): one place, one hold;
 *  - a checkout meets the same lock, so a place and a checkout are put in
 *    line, and a checkout that finds a present place waits behind it.
 */
#define _GNU_SOURCE
#include "line.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "event_edit.h"
#include "events.h"
#include "log.h"

static const char *const LEFT_WHY[] = { NULL, "hold", "sold_out", "closed", "gone", "limited" };

static enum line_state state_of(const char *why)
{
	int i;

	for (i = 1; i < (int)(sizeof LEFT_WHY / sizeof LEFT_WHY[0]); i++)
		if (why && strcmp(why, LEFT_WHY[i]) == 0)
			return (enum line_state)i;
	return LINE_WAITING;
}

/* ======================== counting ======================================= */

static const char SQL_WAITING[] =
	"SELECT count(*) FROM shop_line WHERE event_id = ?1 AND left_at IS NULL "
	"AND present_until > ?2 AND id < ?3";
/* the present places before id that the room would fit */
static const char SQL_FITTING[] =
	"SELECT count(*) FROM shop_line WHERE event_id = ?1 AND left_at IS NULL "
	"AND present_until > ?2 AND id < ?3 AND seats <= ?4";
static const char SQL_PLACES_CLIENT[] =
	"SELECT count(*) FROM shop_line WHERE client = ?1 AND left_at IS NULL "
	"AND present_until > ?2 AND id <> ?3";
static const char SQL_PLACES_NET[] =
	"SELECT count(*) FROM shop_line WHERE client_net = ?1 AND left_at IS NULL "
	"AND present_until > ?2 AND id <> ?3";

/* one count of present places: sql with (text or event id, now, id) */
static enum sd_result count_of(struct db *db, const char *sql, const char *text, int64_t ev,
			       int64_t now, int64_t id, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;

	*n = 0;
	if (!st)
		return SD_DB;
	if (text)
		db_bind_text(st, 1, text);
	else
		db_bind_int(st, 1, ev);
	db_bind_int(st, 2, now);
	db_bind_int(st, 3, id);
	if (db_next(st, &r))
		*n = db_col_int(st, 0);
	db_reset(st);
	return r;
}

enum sd_result line_waiting(struct db *db, int64_t event_id, int64_t now, int64_t *n)
{
	return count_of(db, SQL_WAITING, NULL, event_id, now, INT64_MAX, n);
}

/* the places of n's client and network, but place `except` */
static enum sd_result places_of(struct db *db, const struct hold_new *n, int64_t now,
				int64_t except, int64_t others[2])
{
	enum sd_result r;

	if ((r = count_of(db, SQL_PLACES_CLIENT, n->client, 0, now, except, &others[0])) != SD_OK)
		return r;
	return count_of(db, SQL_PLACES_NET, n->client_net && *n->client_net ? n->client_net
									  : n->client,
			0, now, except, &others[1]);
}

/* the seats a hold may take now: those free of tickets and holds, and,
 * while any unpaid hold is live, no more than the unpaid share has left */
static enum sd_result room_of(struct db *db, const struct event_view *e,
			      const struct hold_rules *ru, int64_t now, int64_t *room)
{
	int64_t unpaid = 0, held = 0, free_seats, share;
	enum sd_result r;

	if ((r = holds_unpaid(db, e->id, now, &unpaid)) != SD_OK ||
	    (r = holds_held(db, e->id, 0, now, &held)) != SD_OK)
		return r;
	free_seats = e->capacity - e->seats_sold - held;
	share = unpaid ? holds_share_cap(e, ru) - unpaid : free_seats;
	*room = share < free_seats ? share : free_seats;
	if (*room < 0)
		*room = 0;
	return SD_OK;
}

/* a hold for seats may go to the place id (INT64_MAX: a new checkout)
 * now: they fit the room, and no present place before it would fit it
 * (places are served in arrival order, the first that fits first: one
 * that wants more seats than are free holds up nobody) */
static enum sd_result turn_of(struct db *db, const struct event_view *e,
			      const struct hold_rules *ru, int64_t now, int64_t id, int64_t seats,
			      int *turn)
{
	struct db_stmt *st;
	int64_t room = 0, fitting = 0;
	enum sd_result r;

	*turn = 0;
	if ((r = room_of(db, e, ru, now, &room)) != SD_OK || seats > room)
		return r;
	if (!(st = db_stmt(db, SQL_FITTING)))
		return SD_DB;
	db_bind_int(st, 1, e->id);
	db_bind_int(st, 2, now);
	db_bind_int(st, 3, id);
	db_bind_int(st, 4, room);
	if (db_next(st, &r))
		fitting = db_col_int(st, 0);
	db_reset(st);
	*turn = r == SD_OK && fitting == 0;
	return r;
}

/* ======================== a place ======================================== */

#define PLACE_SQL \
	"SELECT id, event_id, seats, joined_at, coalesce(hold_id, 0), coalesce(left_why, ''), " \
	"link, buyer_name, buyer_email, client, client_net, present_until, " \
	"left_at IS NOT NULL FROM shop_line "
static const char SQL_PLACE_BY_LINK[] = PLACE_SQL "WHERE link = ?1";
static const char SQL_PLACE_BY_ID[] = PLACE_SQL "WHERE id = ?1";

/* A place with what a hold for it needs. */
struct place_row {
	struct line_place p;
	char name[TEXT_FIELD_MAX + 1], email[256], client[HOLD_CLIENT_MAX], net[HOLD_CLIENT_MAX];
	int64_t present_until;
	int left;
};

static enum sd_result place_read(struct db *db, const char *link, int64_t id,
				 struct place_row *pr)
{
	struct db_stmt *st = db_stmt(db, link ? SQL_PLACE_BY_LINK : SQL_PLACE_BY_ID);
	enum sd_result r;
	int row;

	if (!st)
		return SD_DB;
	if (link)
		db_bind_text(st, 1, link);
	else
		db_bind_int(st, 1, id);
	if ((row = db_next(st, &r))) {
		memset(pr, 0, sizeof *pr);
		pr->p.id = db_col_int(st, 0);
		pr->p.event_id = db_col_int(st, 1);
		pr->p.seats = db_col_int(st, 2);
		pr->p.joined_at = db_col_int(st, 3);
		pr->p.hold_id = db_col_int(st, 4);
		pr->p.state = state_of(db_col_text(st, 5));
		text_copy(pr->p.link, sizeof pr->p.link, db_col_text(st, 6));
		text_copy(pr->name, sizeof pr->name, db_col_text(st, 7));
		text_copy(pr->email, sizeof pr->email, db_col_text(st, 8));
		text_copy(pr->client, sizeof pr->client, db_col_text(st, 9));
		text_copy(pr->net, sizeof pr->net, db_col_text(st, 10));
		pr->present_until = db_col_int(st, 11);
		pr->left = (int)db_col_int(st, 12);
	}
	db_reset(st);
	if (r == SD_OK && !row)
		r = err_set(SD_NOT_FOUND, "no such place in line");
	return r;
}

/* the same checkout sent again a moment later: its place, still in line */
static const char SQL_PLACE_AGAIN[] =
	"SELECT id FROM shop_line WHERE event_id = ?1 AND client = ?2 AND joined_at > ?3 "
	"AND lower(buyer_email) = lower(?4) AND seats = ?5 AND left_at IS NULL "
	"ORDER BY id DESC LIMIT 1";

static enum sd_result place_again(struct db *db, const struct hold_new *n, int64_t since,
				  int64_t now, struct line_place *p)
{
	struct db_stmt *st = db_stmt(db, SQL_PLACE_AGAIN);
	struct place_row pr;
	enum sd_result r;
	int64_t id = 0;

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, n->event_id);
	db_bind_text(st, 2, n->client);
	db_bind_int(st, 3, since);
	db_bind_text(st, 4, n->email);
	db_bind_int(st, 5, n->seats);
	if (db_next(st, &r))
		id = db_col_int(st, 0);
	db_reset(st);
	if (r != SD_OK || !id)
		return r != SD_OK ? r : err_set(SD_NOT_FOUND, "no such place");
	if ((r = place_read(db, NULL, id, &pr)) != SD_OK)
		return r;
	*p = pr.p;
	return count_of(db, SQL_WAITING, NULL, n->event_id, now, id, &p->ahead);
}

static const char SQL_JOIN[] =
	"INSERT INTO shop_line (event_id, link, seats, buyer_name, buyer_email, client, "
	"client_net, joined_at, present_until) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
	"ON CONFLICT DO NOTHING RETURNING id";

/* a place for n at the end of the line, in the caller's transaction */
static enum sd_result join(struct db *db, const struct hold_new *n, int64_t now,
			   struct line_place *p)
{
	struct place_row pr;
	struct db_stmt *st;
	enum sd_result r;
	char link[LINE_LINK_LEN + 1];
	int64_t id = 0;
	int tries;

	for (tries = 0; tries < 3 && !id; tries++) {
		if ((r = holds_link_new(link)) != SD_OK || !(st = db_stmt(db, SQL_JOIN)))
			return r != SD_OK ? r : SD_DB;
		db_bind_int(st, 1, n->event_id);
		db_bind_text(st, 2, link);
		db_bind_int(st, 3, n->seats);
		db_bind_text(st, 4, n->name);
		db_bind_text(st, 5, n->email);
		db_bind_text(st, 6, n->client);
		db_bind_text(st, 7, n->client_net && *n->client_net ? n->client_net : n->client);
		db_bind_int(st, 8, now);
		db_bind_int(st, 9, now + LINE_PRESENCE_MS);
		if (db_next(st, &r))
			id = db_col_int(st, 0);
		db_reset(st);
		if (r != SD_OK)
			return r;
	}
	if (!id)
		return err_set(SD_DB, "no free link for a place in line in 3 draws");
	if ((r = place_read(db, NULL, id, &pr)) != SD_OK)
		return r;
	*p = pr.p;
	return count_of(db, SQL_WAITING, NULL, n->event_id, now, id, &p->ahead);
}

/* n may join: its client and network under the cap (holds and places
 * together), the line not full, the seats not all sold */
static enum sd_result join_check(struct db *db, const struct hold_new *n,
				 const struct hold_rules *ru, const struct event_view *e,
				 int64_t now, int64_t waiting, const int64_t places[2])
{
	int64_t k = 0, kn = 0;
	enum sd_result r;

	if (e->capacity - e->seats_sold < n->seats)
		return err_set(SD_SOLD_OUT, "event %lld has only %lld seat%s left, not %lld",
			       (long long)e->id, (long long)(e->capacity - e->seats_sold),
			       e->capacity - e->seats_sold == 1 ? "" : "s", (long long)n->seats);
	if (waiting >= LINE_PLACES_MAX)
		return err_set(SD_LIMITED, "the line for event %lld is full: try again later",
			       (long long)e->id);
	if ((r = holds_of_client(db, n->client, n->client_net, now, &k, &kn)) != SD_OK)
		return r;
	if (k + places[0] >= ru->per_client || kn + places[1] >= ru->per_client)
		return err_set(SD_LIMITED, "your %s holds %lld unpaid checkout%s or places in line "
			       "already: pay or wait for one to end",
			       k + places[0] >= ru->per_client ? "address" : "network",
			       (long long)(k + places[0] >= ru->per_client ? k + places[0]
									    : kn + places[1]),
			       "s");
	return SD_OK;
}

/* what a checkout already got: the same one sent a moment ago (a double
 * click gets its first's hold or place, technique 1 under the event's
 * lock), or, for a free event, its network's tickets taken as often as the
 * cap allows (SD_LIMITED: a free hold is an order at once, and holds
 * nothing that would count).  SD_NOT_FOUND: nothing, go on. */
static enum sd_result again(struct db *db, const struct hold_new *n, const struct hold_rules *ru,
			    const struct event_view *e, int64_t now, enum line_got *got,
			    struct hold_view *h, struct line_place *p)
{
	const char *net = n->client_net && *n->client_net ? n->client_net : n->client;
	int64_t taken = 0;
	enum sd_result r;

	*got = LINE_GOT_HOLD;
	if ((r = hold_again(db, n, now - LINE_AGAIN_MS, h)) != SD_NOT_FOUND)
		return r;
	*got = LINE_GOT_PLACE;
	if ((r = place_again(db, n, now - LINE_AGAIN_MS, now, p)) != SD_NOT_FOUND)
		return r;
	*got = LINE_GOT_HOLD;
	if (e->price_minor != 0)
		return err_set(SD_NOT_FOUND, "a new checkout");
	if ((r = holds_free_taken(db, e->id, net, &taken)) != SD_OK)
		return r;
	if (taken >= ru->per_client)
		return err_set(SD_LIMITED, "your network took free tickets %lld times already for "
			       "this event, as often as it may", (long long)taken);
	return err_set(SD_NOT_FOUND, "a new checkout");
}

enum sd_result line_checkout(struct db *db, const struct hold_new *n,
			     const struct hold_rules *rules, enum line_got *got,
			     struct hold_view *h, struct line_place *p)
{
	struct hold_rules ru = *rules;
	struct event_view e;
	enum sd_result r;
	int64_t now = clock_now_ms(), waiting = 0, places[2] = { 0, 0 };
	int turn = 0;

	hold_rules_fill(&ru);
	*got = LINE_GOT_HOLD;
	if ((r = hold_new_valid(n, &ru)) != SD_OK || (r = db_begin(db)) != SD_OK)
		return r;
	if ((r = hold_event_sells(db, n->event_id, now, &e)) != SD_OK ||
	    (r = again(db, n, &ru, &e, now, got, h, p)) != SD_NOT_FOUND)
		goto out;	/* sent before, or refused */
	if ((r = line_waiting(db, e.id, now, &waiting)) != SD_OK ||
	    (r = places_of(db, n, now, 0, places)) != SD_OK ||
	    (r = turn_of(db, &e, &ru, now, INT64_MAX, n->seats, &turn)) != SD_OK)
		goto out;
	if (turn) {
		r = hold_add_in(db, n, &ru, &e, now, places, h);
		/* the free seats are held by others who may not pay: wait for them */
		if (r != SD_SOLD_OUT || e.capacity - e.seats_sold < n->seats)
			goto out;
	}
	*got = LINE_GOT_PLACE;
	if ((r = join_check(db, n, &ru, &e, now, waiting, places)) == SD_OK)
		r = join(db, n, now, p);
out:
	return db_end(db, r);
}

/* ======================== a place's page ================================= */

static const char SQL_LEAVE[] =
	"UPDATE shop_line SET left_at = ?2, left_why = ?3, hold_id = ?4 WHERE id = ?1 "
	"AND left_at IS NULL";
static const char SQL_RENEW[] =
	"UPDATE shop_line SET present_until = ?2 WHERE id = ?1 AND left_at IS NULL "
	"AND present_until > ?3";

static enum sd_result leave(struct db *db, struct place_row *pr, enum line_state why,
			    int64_t hold_id, int64_t now)
{
	struct db_stmt *st = db_stmt(db, SQL_LEAVE);

	if (!st)
		return SD_DB;
	db_bind_int(st, 1, pr->p.id);
	db_bind_int(st, 2, now);
	db_bind_text(st, 3, LEFT_WHY[why]);
	if (hold_id)
		db_bind_int(st, 4, hold_id);
	else
		db_bind_null(st, 4);
	pr->p.state = why;
	pr->p.hold_id = hold_id;
	return db_run(st);
}

/* pr's hold, made now that it is its turn; a place whose client's holds
 * took its cap leaves instead (the line goes on); seats held meanwhile:
 * nothing (it waits on) */
static enum sd_result grant(struct db *db, struct place_row *pr, const struct hold_rules *ru,
			    const struct event_view *e, int64_t now, struct hold_view *h)
{
	struct hold_new n = { pr->p.event_id, pr->p.seats, pr->name, pr->email, pr->client,
			      pr->net };
	int64_t places[2];
	enum sd_result r;

	if ((r = places_of(db, &n, now, pr->p.id, places)) != SD_OK)
		return r;
	if ((r = db_savepoint(db)) != SD_OK)
		return r;
	r = db_savepoint_end(db, hold_add_in(db, &n, ru, e, now, places, h));
	if (r == SD_SOLD_OUT)
		return SD_OK;
	if (r == SD_LIMITED)
		return leave(db, pr, LINE_LIMITED, 0, now);
	if (r != SD_OK)
		return r;
	log_event(LOG_INFO, "hold granted from the line", "hold=%s event=%lld waited_ms=%lld",
		  h->public_id, (long long)e->id, (long long)(now - pr->p.joined_at));
	return leave(db, pr, LINE_GRANTED, h->id, now);
}

static const char SQL_FIRST_FITTING[] =
	"SELECT id FROM shop_line WHERE event_id = ?1 AND left_at IS NULL "
	"AND present_until > ?2 AND seats <= ?3 ORDER BY id LIMIT 1";

/* the first present place the room fits; 0: none */
static enum sd_result first_fitting(struct db *db, int64_t event_id, int64_t now, int64_t room,
				    int64_t *id)
{
	struct db_stmt *st = db_stmt(db, SQL_FIRST_FITTING);
	enum sd_result r;

	*id = 0;
	if (!st)
		return SD_DB;
	db_bind_int(st, 1, event_id);
	db_bind_int(st, 2, now);
	db_bind_int(st, 3, room);
	if (db_next(st, &r))
		*id = db_col_int(st, 0);
	db_reset(st);
	return r;
}

/* the places whose turn it is, served in this transaction: while the room
 * fits the first present place it would fit, that place gets its hold (at
 * most LINE_SERVE_MAX a look).  Any look serves the line, not only the
 * look of the place served: held seats that came free go to the buyers in
 * order at the pace of every page's refreshes, and each buyer finds their
 * hold on their page's next look.  mine: the place whose page asks; [out]
 * *h its hold when it is served. */
static enum sd_result serve(struct db *db, const struct event_view *e, const struct hold_rules *ru,
			    int64_t now, struct place_row *mine, struct hold_view *h)
{
	struct place_row other, *pr;
	struct hold_view got;
	int64_t room = 0, id = 0;
	enum sd_result r;
	int i;

	for (i = 0; i < LINE_SERVE_MAX; i++) {
		if ((r = room_of(db, e, ru, now, &room)) != SD_OK || room <= 0 ||
		    (r = first_fitting(db, e->id, now, room, &id)) != SD_OK || !id)
			return r;
		pr = id == mine->p.id ? mine : &other;
		if (pr == &other && (r = place_read(db, NULL, id, &other)) != SD_OK)
			return r;
		if ((r = grant(db, pr, ru, e, now, pr == mine ? h : &got)) != SD_OK)
			return r;
		if (pr->p.state == LINE_WAITING)
			return SD_OK;	/* its seats are held after all: the line waits */
	}
	return SD_OK;
}

/* a present place: counted, granted at the head, its lease renewed */
static enum sd_result look_present(struct db *db, struct place_row *pr,
				   const struct hold_rules *ru, int64_t now, struct hold_view *h)
{
	struct event_view e;
	struct db_stmt *st;
	enum sd_result r;

	if ((r = event_row_lock(db, pr->p.event_id)) != SD_OK ||
	    (r = event_get(db, pr->p.event_id, &e)) != SD_OK)
		return r;
	if (event_sale_check(e.id, e.starts_at, e.closed_at, e.cancelled_at, now) != SD_OK)
		return leave(db, pr, LINE_CLOSED, 0, now);
	if (e.capacity - e.seats_sold < pr->p.seats)
		return leave(db, pr, LINE_SOLD_OUT, 0, now);
	if ((r = count_of(db, SQL_WAITING, NULL, e.id, now, pr->p.id, &pr->p.ahead)) != SD_OK)
		return r;
	if ((r = serve(db, &e, ru, now, pr, h)) != SD_OK || pr->p.state != LINE_WAITING)
		return r;
	if (pr->present_until - now >= LINE_RENEW_BELOW_MS || !(st = db_stmt(db, SQL_RENEW)))
		return pr->present_until - now >= LINE_RENEW_BELOW_MS ? SD_OK : SD_DB;
	db_bind_int(st, 1, pr->p.id);
	db_bind_int(st, 2, now + LINE_PRESENCE_MS);
	db_bind_int(st, 3, now);
	return db_run(st);
}

enum sd_result line_look(struct db *db, const char *link, const struct hold_rules *rules,
			 struct line_place *p, struct hold_view *h)
{
	struct hold_rules ru = *rules;
	struct place_row pr;
	enum sd_result r;
	int64_t now = clock_now_ms();

	hold_rules_fill(&ru);
	if (!link || strlen(link) != LINE_LINK_LEN)
		return err_set(SD_NOT_FOUND, "no such place in line");
	/* read first, outside a write transaction: a guessed link, or a place
	 * that left, costs the writer nothing */
	if ((r = place_read(db, link, 0, &pr)) != SD_OK)
		return r;
	if (pr.left) {
		*p = pr.p;
		return pr.p.state == LINE_GRANTED ? hold_get_id(db, pr.p.hold_id, h) : SD_OK;
	}
	if ((r = db_begin(db)) != SD_OK)
		return r;
	if ((r = place_read(db, link, 0, &pr)) != SD_OK)
		goto out;
	if (!pr.left && pr.present_until <= now)	/* its page was closed: gone */
		r = leave(db, &pr, LINE_GONE, 0, now);
	else if (!pr.left)
		r = look_present(db, &pr, &ru, now, h);
	if (r == SD_OK && pr.p.state == LINE_GRANTED && pr.left)
		r = hold_get_id(db, pr.p.hold_id, h);
	*p = pr.p;
out:
	return db_end(db, r);
}

static const char SQL_PRUNE[] =
	"DELETE FROM shop_line WHERE id IN (SELECT id FROM shop_line WHERE joined_at < ?1 "
	"AND (left_at IS NOT NULL OR present_until < ?1) ORDER BY id LIMIT ?2)";

enum sd_result line_prune(struct db *db, int64_t before_ms, int limit, int64_t *n)
{
	return db_prune(db, SQL_PRUNE, before_ms, limit, n);
}
