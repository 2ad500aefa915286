/*
 * line.h: the shop's waiting line, in front of its holds (holds.h).
 *
 * Unpaid holds may take at most a share of an event's seats (hold_rules'
 * unpaid_share, 25 %): a stranger with many addresses can keep that share
 * from sale for a hold's lease, never the house.  A buyer whose seats do not
 * fit the room (the seats free of tickets and holds and, while any unpaid
 * hold is live, what the share has left), or who comes while a present
 * place before would fit it, gets a place in line, and the places are
 * served in the order they came, the first that fits first:
 *
 *   - a place is a lease (present_until), renewed by the buyer's page while
 *     it stays open (it refreshes itself every LINE_REFRESH_S); a place
 *     whose lease ran out counts for nothing from that millisecond on, with
 *     no sweeper, as a hold that ran out holds no seat;
 *   - a place gets its hold in a transaction that finds its seats fit the
 *     room and no present place before it that would fit (hold_add_in, the
 *     event's row locked): any place's look serves the places whose turn it
 *     is, up to LINE_SERVE_MAX, so held seats that come free go out in
 *     order at the pace of all the pages' refreshes, each to a buyer whose
 *     page was open in the last LINE_PRESENCE_MS; a place that wants more
 *     seats than the room holds up nobody behind it;
 *   - a checkout meets the same rule: it never passes a place that fits;
 *   - places count against the caps on unpaid holds per client and per
 *     client network, and a line holds at most LINE_PLACES_MAX present
 *     places;
 *   - the same checkout sent again within LINE_AGAIN_MS (a double click)
 *     gets the first's hold or place; a free event's checkouts, each an
 *     order at once, are counted per network against the same cap.
 *
 * The line is a table of its own (shop_line, owned here), not the stream:
 * a stream entry's lease hands the entry to the next claimant when it runs
 * out, where a place's lease takes the place out of line; and the stream's
 * counts, dead letters and drain are the queue's, which a line of buyers
 * has no part in (design.md §3.7).
 */
#ifndef SD_LINE_H
#define SD_LINE_H

#include <stdint.h>

#include "db.h"
#include "holds.h"
#include "result.h"

#define LINE_PRESENCE_MS 30000		/* a place's lease, renewed by its page */
#define LINE_RENEW_BELOW_MS 20000	/* renewed when less than this is left */
#define LINE_REFRESH_S 5		/* the page comes back this often */
#define LINE_PLACES_MAX 5000			/* present places in one event's line */
#define LINE_LINK_LEN HOLD_LINK_LEN	/* /w/<link>: 130 random bits */
#define LINE_RETENTION_MS (24 * 3600000LL)	/* places that left are kept this long */
#define LINE_AGAIN_MS 30000		/* a checkout sent again within this is the same */
#define LINE_SERVE_MAX 16		/* places one look may serve */

enum line_state {
	LINE_WAITING,			/* in line; ahead: the places before it */
	LINE_GRANTED,			/* it got its hold (hold_id) */
	LINE_SOLD_OUT,			/* the seats were sold while it waited */
	LINE_CLOSED,			/* the event's sales closed */
	LINE_GONE,			/* its lease ran out: the page was closed */
	LINE_LIMITED,			/* at its turn, its client (or network) held
					 * as many unpaid holds as the cap allows */
};

struct line_place {
	int64_t id, event_id, seats, joined_at;
	int64_t ahead;			/* present places before it (LINE_WAITING) */
	int64_t hold_id;		/* LINE_GRANTED: its hold */
	enum line_state state;
	char link[LINE_LINK_LEN + 1];
};

/* What a checkout got. */
enum line_got { LINE_GOT_HOLD, LINE_GOT_PLACE };

/*
 * line_checkout: a buyer's checkout for n, in one FULL transaction: the
 * same checkout's hold or place when it was sent a moment ago; a hold
 * (hold_add_in) when its seats fit the room and no present place before
 * would, else a place in line when the seats could still come free (the
 * free seats are held, or the share is taken).  SD_SOLD_OUT: more seats than are left unsold;
 * SD_LIMITED: the client or its network has as many holds and places as
 * the cap allows, or the line is full; SD_CONFLICT: not on sale; bad input:
 * SD_INVALID.  [out] *got, and *h (LINE_GOT_HOLD) or *p (LINE_GOT_PLACE).
 */
enum sd_result line_checkout(struct db *db, const struct hold_new *n,
			     const struct hold_rules *rules, enum line_got *got,
			     struct hold_view *h, struct line_place *p);

/*
 * line_look: the place behind link as its buyer's page sees it now, in one
 * transaction (a link that names no place, or a place that left, costs no
 * write): still waiting (its lease renewed, its place counted), or, its
 * turn come, granted its hold right then ([out] *h); or gone, sold out,
 * closed, limited.  SD_NOT_FOUND: no such place.  [out] *p.
 */
enum sd_result line_look(struct db *db, const char *link, const struct hold_rules *rules,
			 struct line_place *p, struct hold_view *h);

/* line_waiting: present places in event_id's line at now.  [out] *n. */
enum sd_result line_waiting(struct db *db, int64_t event_id, int64_t now, int64_t *n);

/* line_prune: delete up to limit places that left (or whose lease ran out)
 * before before_ms.  [out] *n. */
enum sd_result line_prune(struct db *db, int64_t before_ms, int limit, int64_t *n);

#endif
