/*
 * shopcheck.h: what the shop's verdict's two files share: shopcheck.c
 * (paysink's record and the database loaded; the sessions, payments,
 * holds, buyers, seats, money and webhooks) and backcheck.c (the money
 * after the sale: delayed payments, money given back outside the box, the
 * box's refunds as paysink ended them, the door).
 */
#ifndef CHAOS_SHOPCHECK_H
#define CHAOS_SHOPCHECK_H

#include "chaos.h"

#define ID_MAX 96

struct rsess {			/* a session in paysink's record */
	char id[ID_MAX], hold[32], status[16], pi[ID_MAX], currency[8];
	char pi_status[32], method[32], charge_status[16];
	long long charges, amount, refunded, paid_at;
	int disputed;
	/* its refunds: made by the box (the API), made in the dashboard */
	long n_api, n_api_failed, api;	/* api: the box's last one, -1 none */
	long long api_sum;		/* the box's, pending or succeeded */
	long n_dash;
	long long dash_sum;		/* the dashboard's, pending or succeeded */
	int refund_key_ok;
	long dispute;			/* its dispute, -1 none */
	/* what of it the box answered 2xx (the event was delivered) */
	int heard_ok, heard_failed, heard_dispute;
	long heard_refunded, n_refunded;	/* charge.refunded: 2xx'd, made */
	long order, hold_row;		/* indexes, -1 none */
	int paid_logged;		/* a buyer's payment was acknowledged */
};

struct rref {			/* a refund in the record */
	char id[ID_MAX], pi[ID_MAX], key[160], session[ID_MAX], status[16], source[16];
	long long amount, settled_at;	/* settled_at: a pending one ended then */
};

struct rdisp {			/* a dispute in the record */
	char pi[ID_MAX], reason[48], status[24];
	long long amount;
};

struct revt {			/* an event in the record */
	char id[ID_MAX], type[48], session[ID_MAX];
	long long delivered_ok, attempts, gave_up;
	int dropped, duplicated;
};

struct dhold {
	long long id, order_id, amount, seats, event, expires_at;
	char pub[32], state[16], session[ID_MAX], pi[ID_MAX], currency[8];
	long sess;			/* its session in the record, -1 none */
	int logged;
	int mailed;			/* its payment-failed email marked sent */
};

struct dorder {
	long long id, amount, seats, event;
	long long refunded;		/* refunded_minor, -1 NULL */
	long long disputed_at, cancelled_at;	/* 0: NULL */
	char pub[32], pi[ID_MAX], currency[8], dispute[128];
	int cancelled, mailed;
	long by_stripe;			/* its cancellations by actor stripe */
	long live_unadmitted;		/* tickets neither admitted nor cancelled */
	long admitted_after;		/* admitted at the door after its money went back */
};

struct dref {
	char pi[ID_MAX], reason[16], via[16], currency[8], status[24];
	int done, failed, mailed;
	long long amount, hold_id, order_id;
};

struct devent {
	long long id, capacity, price, live;
};

struct shop {
	struct verdict *v;
	struct rsess *s;
	long ns;
	struct rref *r;
	long nr;
	struct rdisp *dp;
	long ndp;
	struct revt *e;
	long ne;
	struct dhold *h;
	long nh;
	struct dorder *o;
	long no;
	struct dref *d;
	long nd;
	char (*pj)[ID_MAX + 8];
	long npj;
	struct devent *ev;
	long nev;
	char *const *keys;		/* the shop's emails' keys (sorted) */
	long nkeys;
	/* money, for check_money */
	long long nonorder_minor;	/* payments that made no order */
	long long gone_minor;		/* gone back at paysink: refunds, disputes */
	long long kept_minor;		/* kept by the venue with no standing order: a
					 * refund that failed (owed at the window), a
					 * delayed payment whose end the box never heard */
	long long unheard_minor;	/* gone back from standing orders, and the box
					 * never heard */
};

#define broken(v, ...) verify_broken(v, __VA_ARGS__)

/* look-ups: an index, -1 none (shopcheck.c) */
long sess_by_id(const struct shop *S, const char *id);
long sess_by_pi(const struct shop *S, const char *pi);
long order_by_pi(const struct shop *S, const char *pi, long *count);
long dref_by_pi(const struct shop *S, const char *pi);
/* keys_for: how many of the shop's emails have key */
long keys_for(const struct shop *S, const char *key);

/* backcheck.c: a paid session with no order, waiting pending (its delayed
 * payment's end unheard): 1 when allowed (counted), 0 when not a pending
 * one; a paid session's money given back outside the box, against its
 * order (oi); every delayed payment that failed; every order's money
 * back, the door; the box's refunds against paysink's; the figures. */
int back_pending_paid(struct shop *S, long si);
void back_paid_order(struct shop *S, long si, long oi);
void back_failed(struct shop *S);
void back_orders(struct shop *S);
void back_refunds(struct shop *S);

#endif
