/*
 * buyers.h: what the buyers' two files share: buyers.c (the plan, the
 * checkout and the parent's side) and buyermoney.c (what a buyer, a bank and
 * a cardholder do with the money after the checkout, and the bank that ends
 * the refunds paysink keeps pending).  The rest of the soak sees chaos.h.
 */
#ifndef CHAOS_BUYERS_H
#define CHAOS_BUYERS_H

#include <stddef.h>
#include <stdint.h>

/* one answer to a request on loopback */
struct resp {
	int status;			/* 0: no answer */
	char location[1024];
	char cookie[64];		/* sd_csrf's value, "" none */
	char *body;			/* into a static buffer: the next request reuses it */
};

/* what a page says: the first text that it holds names it */
struct says {
	const char *text, *what;
};

/* buyer_http: one request to 127.0.0.1:port, its answer into r.
 * buyer_url_split: an http://127.0.0.1:PORT/path URL's port and path; 0,
 * or -1.  buyer_paysink_port: paysink's port. */
void buyer_http(int port, const char *method, const char *path, const char *headers,
		const char *body, struct resp *r);
int buyer_url_split(const char *url, int *port, const char **path);
int buyer_paysink_port(void);
/* buyer_says: what of says a page's body holds first, or NULL */
const char *buyer_says(const char *body, const struct says *says, size_t n);

/* The money after the checkout, each in a buyer's step (a process of its
 * own), each writing what it did into later (the log's later= field) and
 * why it could not into why; 0, or -1 when paysink answered what it must
 * not have.
 *   buyer_settle: the delayed payment of session settles at its bank
 *   buyer_money_back: once the buyer's page (success: the return URL paysink
 *     sent it to) shows the order, the money goes back at paysink: in full
 *     in its dashboard (part 0), part of it (part > 0), or disputed
 *     (reason); a page that shows no order by give_up, or that shows the
 *     payment ended another way, is said in later and nothing is done
 *   buyer_refunds_pending: the payment of session will have its refunds
 *     kept pending at paysink (before it is paid) */
int buyer_settle(const char *session, int succeed, char *later, size_t size, char *why,
		 size_t wsize);
int buyer_money_back(const char *session, const char *success, long long part,
		     const char *reason, int64_t give_up, char *later, size_t size, char *why,
		     size_t wsize);
int buyer_refunds_pending(const char *session, char *why, size_t wsize);

/* bank_step: the bank of the buyers whose refunds paysink keeps pending:
 * each pending refund in paysink's record (the file record) ends, a moment
 * after it was first seen, succeeded or failed as fails(its session) says
 * (1: failed).  At most once a second; a line "bank ..." in the soak's log
 * for each.  bank_pending: refunds seen pending and not ended yet. */
void bank_step(const char *record, int (*fails)(const char *session));
long bank_pending(void);
long bank_settled(int failed);

#endif
