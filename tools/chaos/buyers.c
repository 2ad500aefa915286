/*
 * buyers.c: buyers in the box's public shop while the kill soak attacks
 * (--buyers N --paysink PATH), paying at tools/paysink; what they do with
 * their money afterwards is buyermoney.c's.
 *
 * The provider: paysink on loopback, its faults on: a quarter of its
 * webhook events sent twice, one in twenty never sent, each copy delayed
 * up to 3 s and a session's later event sent before its earlier one, its
 * dice seeded from --seed.  Its webhooks go to box A's shop (on
 * PostgreSQL box B's shop gets none: its buyers' payments reach the
 * database through their return, box A's webhooks and either box's
 * reconcile jobs).  Each box's shop listens on a port chosen before the
 * start, so that a box started again after a kill listens where paysink
 * and the buyers expect it.  The shop keeps its own waiting line
 * (shop_unpaid_share at its default, 25%): with this many buyers on one
 * event most of them wait in it.
 *
 * The event: a priced one of its own (25.00 EUR a seat) with seats for
 * half again as many buyers, a seat or four each: it sells out while the
 * buyers come, and from then on a buyer gets seats only when a hold runs
 * out (or an order's money goes back), so that a late payment can find its
 * seats gone.  The box's holds last a minute (shop_hold = 1m), so that
 * they end during the soak; a pending one (a delayed payment) keeps its
 * seats for shop_pending_max (7 days, the default).
 *
 * A buyer, as a browser would, in a process of its own per step (at most
 * BUYER_SLOTS at a time, besides those waiting in line, whose page is
 * open; the buyers start evenly over BUYERS_SPAN_MS):
 *   GET /e/{id} (the form token and its cookie), POST /e/{id}/checkout:
 *   303 to paysink's page (the session), or 303 to /w/{link}, a place in
 *   line, whose page the buyer GETs again every 1-5 s (its place is kept
 *   while it is looked at within 30 s) until it answers 303 to paysink's
 *   page, or says sold out (the buyer tries again as below) or that the
 *   place is gone (likewise); after BUYER_LINE_MS in line it closes the
 *   page and goes ("left").  Then GET paysink's page (its Cancel link is
 *   the buyer's own /h/{link}); the hold's public id is the session's
 *   client_reference_id (paysink's API).  No answer, or 5xx: the box is
 *   being killed or started again, and the buyer starts again from the
 *   event's page (the hold it may have made is left to run out; a page that
 *   did not load is loaded again, a "reload").  A whole-box kill waits (up to
 *   5 s) until a buyer's checkout is being asked of that box (the file
 *   <dir>/buyer-<idx>.posting is there meanwhile), so that one meets it.
 *   409, or an event's page without the form: sold out (a page that says
 *   "sold out for now" has the form: the buyer joins the line); the buyer
 *   tries again every 1-3 s for up to BUYER_SOLDOUT_MS, then goes away.
 *   Then one of these, each buyer's choice drawn from a deck of
 *   BUYER_DECK that the seed shuffles (so that a short soak meets each):
 *     return    (30%)  pays by card at once (the Pay button: POST
 *                      /pay/{id}, 303) and comes back to /h/{link}?paid=1
 *                      until it answers
 *     noreturn  (15%)  pays at once and closes the tab: only a webhook or
 *                      the reconcile job can make the order
 *     late      (15%)  pays after the hold ran out: half 60.5-64.5 s after
 *                      the checkout, before the hold's reconcile job (at its
 *                      end + 5 s) expires the session, so that the payment
 *                      is applied late (an order if seats are free, else a
 *                      refund and one email); half 65-100 s after, when
 *                      paysink mostly refuses it (the session expired); half
 *                      of the late payers come back to the shop.  Two in
 *                      three have paysink keep their refunds pending
 *                      (/_paysink/refund-pending, before paying; not with
 *                      --event-run), for the bank to end: half succeed,
 *                      half fail (then the box owes them at the window)
 *     abandon   (10%)  never pays: the hold must end expired, its session
 *                      expired at paysink
 *     delayed_ok (10%), delayed_failed (5%)
 *                      pay by SEPA Direct Debit (the session completes
 *                      unpaid, the hold waits pending) and come back; 3-90 s
 *                      later its bank answers (/_paysink/settle/{cs}):
 *                      the order, or the hold failed and one email
 *     refund_full, refund_part, dispute (5% each)
 *                      pay by card and come back; 2-22 s later, once their
 *                      page shows the order, the money goes back at paysink:
 *                      all of it in the dashboard (/_paysink/refund/{cs}),
 *                      10-90% of it, or the cardholder's bank disputes it
 *                      (/_paysink/dispute/{cs}, fraudulent,
 *                      product_not_received or duplicate); a page that shows
 *                      the payment ended another way does nothing (skip-)
 * Each buyer's end goes to the soak's log (chaos.h: actions_log) as
 *   buyer idx= box= choice= seats= email= outcome=session|soldout|left
 *         session= hold= paid=1|0|- returned= later= restarts= reloads=
 *         soldout_tries= line= line_ms= t0= t1= tpay=
 * (paid: paysink's 303, its 409, or not tried; later: what it did after
 * paying, "-" nothing: refunds-pending, settled-succeeded|failed,
 * refund=all, refund-part=N, dispute=REASON, skip-STATE; line: its places'
 * page looks), and each refund the bank ends as
 *   bank refund= session= outcome=succeeded|failed|ended-before t=
 * which shopcheck.c judges the database and paysink's record by.
 *
 * buyers_settled is the drain's extra wait: no hold open, no refund owed
 * at the provider (pending there: the bank ends it meanwhile), no late
 * refund paid back whose email is not marked sent, no failed delayed
 * payment whose email is not, none of paysink's webhook events still on
 * its way (neither answered 2xx, nor dropped, nor given up), so that the
 * verdict can tell what the box heard.  buyers_later_only lets the drain
 * end with the shop's looks again at what has ended waiting for their
 * hours (CHAOS_SHOP_LATER).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "buyers.h"
#include "chaos.h"

#define BUYER_SLOTS 4			/* buyers' steps running at a time */
#define BUYERS_SPAN_MS 90000		/* the buyers start evenly over this */
#define BUYER_GAP_MAX_MS 1000		/* ... at most this far apart */
#define BUYER_SOLDOUT_MS 45000		/* sold out: tried again this long */
#define BUYER_GIVE_UP_MS 90000		/* no shop answering this long: the soak fails */
#define BUYER_LINE_MS 180000		/* in line this long: the buyer closes the page */
#define BUYER_LOOK_MS 1000		/* a place's page looked at every 1-5 s */
#define BUYER_BACK_MS 180000		/* money back: its order awaited this long */
#define BUYER_IO_MS 15000		/* one request's socket timeouts */
#define BUYER_PRICE "25.00"
#define BUYER_PRICE_MINOR 2500
#define BUYER_CURRENCY "EUR"
#define BUYER_DELAYED "sepa_debit"	/* paysink's delayed method for EUR */
#define BUYER_RESP_MAX (512 * 1024)
#define BUYER_DECK 20			/* the choices come in decks of this many */

enum choice { C_RETURN, C_NORETURN, C_LATE, C_ABANDON, C_DELAYED_OK, C_DELAYED_FAILED,
	      C_REFUND_FULL, C_REFUND_PART, C_DISPUTE, C_CHOICES };
static const char *const choice_names[] = { "return", "noreturn", "late", "abandon",
					    "delayed_ok", "delayed_failed", "refund_full",
					    "refund_part", "dispute" };
/* how many of each deck of BUYER_DECK buyers make each choice */
static const int choice_deck[C_CHOICES] = { 6, 3, 3, 2, 2, 1, 1, 1, 1 };

/* P_LINE: waiting in line, a step that holds no slot (a buyer's open page) */
enum phase { P_WAIT, P_CHECKOUT, P_SOLDOUT_WAIT, P_LINE_WAIT, P_LINE, P_LATER_WAIT, P_LATER,
	     P_DONE };

struct buyer {
	enum phase phase;
	enum choice choice;
	int box, seats, late_return;
	long late_ms;			/* late: paid this long after the checkout */
	long later_ms;			/* the others': settled, or the money back,
					 * this long after the payment */
	int refunds_pending;		/* late: paysink keeps its refunds pending */
	int refund_fails;		/* ... and the bank fails them */
	long long part;			/* refund_part: what goes back */
	const char *reason;		/* dispute: the bank's reason */
	pid_t pid;			/* the running step, 0: none */
	int64_t due;			/* the next step from then on */
	int64_t t_first;		/* first asked */
	int64_t t_checkout;		/* the 303 to the payment page came */
	int64_t t_paid;			/* paysink's answer to the payment */
	int soldout_tries;
	long restarts, reloads;
	long line_looks;		/* its place's page looked at */
	long long line_ms;		/* in line so long, over its places */
	int paid;			/* -1 not tried, 0 refused (409), 1 paid (303) */
	int returned;
	char session[96], hold[24], success[1024];
	char place[1024];		/* its place in line's page, "" none */
	char later[64];			/* what its later step did, "-" none */
	char email[96];
};

static struct {
	struct buyer *b;
	long n, next;
	int64_t t0, t_end;		/* the first start, the last end */
	long running, lining, done;	/* steps running, of which in line; buyers done */
	/* the provider */
	pid_t paysink;
	int paysink_port;
	int shop_port[2];
	char key[128];
	char key_file[CHAOS_PATH_MAX + 32], secret_file[CHAOS_PATH_MAX + 32];
	char record[CHAOS_PATH_MAX + 32];
	/* figures */
	long restarts, reloads, soldout_tries, soldout, sessions, paid, refused, returned;
	long in_line, line_looks, line_gone, line_left;
	long long line_ms_max;
	long settled_ok, settled_failed, money_back, money_back_skipped;
	long settle_waits;
} B;

static long long rel_ms(int64_t t)
{
	return t ? (long long)(t - soak.t0) : -1;
}

/* ======================== the provider and the shop's settings ========== */

static int secret_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t n = strlen(text);

	if (fd < 0 || write(fd, text, n) != (ssize_t)n || close(fd) != 0) {
		fail("setup: cannot write %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int buyers_start_provider(void)
{
	char port_file[CHAOS_PATH_MAX + 64], log[CHAOS_PATH_MAX + 64], hook[128], seed[32];
	char secret[128];
	int64_t until;
	int rc, i;

	if (!opt.buyers)
		return 0;
	for (i = 0; i < (opt.boxes > 1 ? 2 : 1); i++) {
		int p = 0, tries;

		for (tries = 0; tries < 20 && (p == 0 || (i == 1 && p == B.shop_port[0])); tries++)
			p = proc_free_port();
		if (!p) {
			fail("setup: no free port for the shop");
			return -1;
		}
		B.shop_port[i] = p;
	}
	snprintf(B.key, sizeof B.key, "sk_test_chaos%" PRIu64, opt.seed);
	snprintf(secret, sizeof secret, "whsec_chaos%" PRIu64 "x%d", opt.seed, (int)getpid());
	snprintf(B.key_file, sizeof B.key_file, "%s/stripe.key", soak.dir);
	snprintf(B.secret_file, sizeof B.secret_file, "%s/stripe.whsec", soak.dir);
	snprintf(B.record, sizeof B.record, "%s/" CHAOS_PAYSINK_RECORD, soak.dir);
	if (secret_file(B.key_file, B.key) != 0 || secret_file(B.secret_file, secret) != 0)
		return -1;
	snprintf(port_file, sizeof port_file, "%s/paysink.port", soak.dir);
	snprintf(log, sizeof log, "%s/paysink.log", soak.dir);
	snprintf(hook, sizeof hook, "http://127.0.0.1:%d/stripe/webhook", B.shop_port[0]);
	snprintf(seed, sizeof seed, "%" PRIu64, opt.seed);
	unlink(port_file);
	{
		const char *argv[] = { opt.paysink, "--listen", "127.0.0.1:0", "--api-key-file",
				       B.key_file, "--record", B.record, "--port-file", port_file,
				       "--webhook-url", hook, "--webhook-secret-file", B.secret_file,
				       "--dup-pct", "25", "--drop-pct", "5", "--delay-ms-max", "3000",
				       "--reorder", "--retry-base-ms", "500", "--seed", seed,
				       /* --event-run: refunds fail now and then */
				       opt.event_run ? "--refund-fail-pct" : NULL, "5", NULL };

		B.paysink = proc_spawn(argv, log, log, NULL);
	}
	if (B.paysink < 0) {
		B.paysink = 0;
		fail("setup: cannot start %s", opt.paysink);
		return -1;
	}
	for (until = now_ms() + 10000; now_ms() < until; sleep_ms(10)) {
		FILE *f = fopen(port_file, "r");

		if (f) {
			int ok = fscanf(f, "%d", &B.paysink_port) == 1 && B.paysink_port > 0;

			fclose(f);
			if (ok) {
				say("paysink on port %d (webhooks to box A's shop on port %d)",
				    B.paysink_port, B.shop_port[0]);
				return 0;
			}
		}
		if ((rc = proc_wait(B.paysink, 0)) != -2) {
			B.paysink = 0;
			fail("setup: paysink exited %d at start (see %s)", rc, log);
			return -1;
		}
	}
	fail("setup: paysink wrote no port file within 10 s");
	return -1;
}

void buyers_stop_provider(void)
{
	if (!B.paysink)
		return;
	kill(B.paysink, SIGTERM);	/* it writes its record last */
	if (proc_wait(B.paysink, 15000) == -2) {
		kill(B.paysink, SIGKILL);
		proc_wait(B.paysink, 5000);
		fail("paysink did not stop within 15 s of SIGTERM");
	}
	B.paysink = 0;
}

int buyers_shop_port(int port)
{
	return opt.buyers && port > 0 && (port == B.shop_port[0] || port == B.shop_port[1]);
}

const char *buyers_record_path(void)
{
	return opt.buyers ? B.record : NULL;
}

size_t buyers_config(int box, char *text, size_t size)
{
	if (!opt.buyers)
		return 0;
	return (size_t)snprintf(text, size,
		"shop_listen = 127.0.0.1:%d\n"
		"payment_provider = stripe\n"
		"stripe_api_url = http://127.0.0.1:%d\n"
		"stripe_key_file = %s\n"
		"stripe_webhook_secret_file = %s\n"
		"shop_hold = 1m\n"
		"shop_hold_renewals = 0\n"
		"shop_holds_per_client = 1000\n"
		"shop_holds_per_email = 20\n"
		"shop_seats_max = 10\n"
		"shop_rate = 0\n",
		B.shop_port[box && opt.boxes > 1 ? 1 : 0], B.paysink_port, B.key_file,
		B.secret_file);
}

long buyers_capacity(void)
{
	return opt.buyers * 3 / 2 > 10 ? opt.buyers * 3 / 2 : 10;
}

const char *buyers_price(void)
{
	return BUYER_PRICE;
}

const char *buyers_currency(void)
{
	return BUYER_CURRENCY;
}

/* ======================== the plan ====================================== */

static uint64_t buyer_hash(long idx)
{
	uint64_t h = (opt.seed ^ 0x5DEECE66DULL) * 0xD6E8FEB86659FD93ULL +
		     (uint64_t)(idx + 1) * 0x9E3779B97F4A7C15ULL;

	h ^= h >> 32;
	h *= 0xD6E8FEB86659FD93ULL;
	return h ^ (h >> 29);
}

/* buyer idx's choice: each deck of BUYER_DECK buyers holds choice_deck's
 * numbers of each, in an order the seed shuffles, so that a short soak
 * meets every choice too */
static enum choice choice_of(long idx)
{
	enum choice deck[BUYER_DECK];
	uint64_t h = buyer_hash(-1 - idx / BUYER_DECK);
	int i, j, n = 0;

	for (i = 0; i < C_CHOICES; i++)
		for (j = 0; j < choice_deck[i] && n < BUYER_DECK; j++)
			deck[n++] = (enum choice)i;
	for (i = BUYER_DECK - 1; i > 0; i--) {	/* Fisher-Yates, by the deck's hash */
		enum choice t = deck[i];

		h ^= h << 13;
		h ^= h >> 7;
		h ^= h << 17;
		j = (int)(h % (uint64_t)(i + 1));
		deck[i] = deck[j];
		deck[j] = t;
	}
	return deck[idx % BUYER_DECK];
}

/* what buyer b does after its checkout, from its hash h */
static void plan_later(struct buyer *b, uint64_t h)
{
	static const char *const reasons[] = { "fraudulent", "product_not_received",
					       "duplicate" };

	b->late_return = (int)((h >> 40) & 1);
	b->late_ms = (h >> 16) % 2 == 0 ? 60500 + (long)((h >> 20) % 4001)
					 : 65000 + (long)((h >> 20) % 35001);
	/* a delayed payment settles 3-90 s after it was made, mostly after
	 * the hold's minute, while the hold is pending; the money goes back
	 * 2-22 s after the payment, once the order is there */
	b->later_ms = b->choice == C_DELAYED_OK || b->choice == C_DELAYED_FAILED
		? 3000 + (long)((h >> 20) % 87001) : 2000 + (long)((h >> 20) % 20001);
	/* --event-run refunds every order when it cancels the event, after
	 * the drain, when no bank runs: its refunds are never kept pending */
	b->refunds_pending = b->choice == C_LATE && !opt.event_run && (h >> 44) % 3 != 0;
	b->refund_fails = b->refunds_pending && (h >> 48) % 2;
	b->part = (long long)b->seats * BUYER_PRICE_MINOR * (10 + (long long)((h >> 50) % 81)) /
		  100;
	b->reason = reasons[(h >> 58) % 3];
}

int buyers_init(void)
{
	long i, gap;

	if (!opt.buyers)
		return 0;
	if (!(B.b = calloc((size_t)opt.buyers, sizeof *B.b))) {
		fail("buyers: out of memory");
		return -1;
	}
	B.n = opt.buyers;
	gap = BUYERS_SPAN_MS / B.n < BUYER_GAP_MAX_MS ? BUYERS_SPAN_MS / B.n : BUYER_GAP_MAX_MS;
	for (i = 0; i < B.n; i++) {
		struct buyer *b = &B.b[i];
		uint64_t h = buyer_hash(i);

		b->choice = choice_of(i);
		b->seats = (int)((h >> 8) % 4) + 1;
		b->box = opt.boxes > 1 ? (int)(i % 2) : 0;
		plan_later(b, h);
		b->paid = -1;
		b->due = (int64_t)i * gap;	/* from the buyers' start */
		snprintf(b->later, sizeof b->later, "-");
		snprintf(b->email, sizeof b->email, "shop%ld.s%" PRIu64 "@buyers.example", i + 1,
			 opt.seed);
	}
	return 0;
}

/* ======================== one step, in a process of its own ============= */

int buyer_paysink_port(void)
{
	return B.paysink_port;
}

void buyer_http(int port, const char *method, const char *path, const char *headers,
		    const char *body, struct resp *r)
{
	static char req[8192], buf[BUYER_RESP_MAX];
	struct sockaddr_in a;
	struct timeval tv = { BUYER_IO_MS / 1000, 0 };
	size_t len = 0;
	ssize_t got;
	int n, fd;
	char *p, *end;

	memset(r, 0, sizeof *r);
	r->body = buf;
	buf[0] = '\0';
	n = snprintf(req, sizeof req,
		     "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: chaos-buyer\r\n"
		     "Accept: text/html\r\n%s%s%zu\r\nConnection: close\r\n\r\n%s", method, path,
		     port, headers ? headers : "", "Content-Length: ", body ? strlen(body) : 0,
		     body ? body : "");
	if (n < 0 || (size_t)n >= sizeof req)
		return;
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 && write(fd, req, (size_t)n) == n) {
		while (len < sizeof buf - 1 && (got = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
			len += (size_t)got;
	}
	close(fd);
	buf[len] = '\0';
	if (sscanf(buf, "HTTP/1.%*d %d", &r->status) != 1 || !(end = strstr(buf, "\r\n\r\n"))) {
		r->status = 0;	/* cut off: as good as no answer */
		return;
	}
	*end = '\0';
	r->body = end + 4;
	for (p = buf; (p = strstr(p, "\r\n")) && p < end; p += 2) {
		const char *h = p + 2;
		size_t vl = strcspn(h, "\r\n");

		if (strncasecmp(h, "Location:", 9) == 0) {
			h += 9;
			while (*h == ' ')
				h++;
			snprintf(r->location, sizeof r->location, "%.*s", (int)strcspn(h, "\r\n"), h);
		} else if (strncasecmp(h, "Set-Cookie:", 11) == 0 && (h = strstr(h, "sd_csrf=")) &&
			   h < p + 2 + vl) {
			h += 8;
			snprintf(r->cookie, sizeof r->cookie, "%.*s", (int)strcspn(h, ";\r\n"), h);
		}
	}
}

const char *buyer_says(const char *body, const struct says *says, size_t n)
{
	size_t i;

	for (i = 0; body && i < n; i++)
		if (strstr(body, says[i].text))
			return says[i].what;
	return NULL;
}

int buyer_url_split(const char *url, int *port, const char **path)
{
	const char *p;

	if (strncmp(url, "http://127.0.0.1:", 17) != 0)
		return -1;
	*port = atoi(url + 17);
	p = strchr(url + 17, '/');
	*path = p ? p : "/";
	return *port > 0 ? 0 : -1;
}

/* form encoding of s into out */
static void form_enc(const char *s, char *out, size_t size)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = 0;

	for (; *s && n + 4 < size; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '.' || c == '-' || c == '_')
			out[n++] = (char)c;
		else if (c == ' ')
			out[n++] = '+';
		else {
			out[n++] = '%';
			out[n++] = hex[c >> 4];
			out[n++] = hex[c & 15];
		}
	}
	out[n] = '\0';
}

/* what a step found, for the parent (key=value lines) */
struct step_out {
	const char *status;		/* session, soldout, gone, left, paid, later, error */
	char why[300];
	char session[96], hold[24], success[1024], later[64], place[1024];
	int paid, returned;
	long restarts, reloads, line_looks;
	int64_t t_checkout, t_paid, line_ms;
};

static void __attribute__((noreturn)) step_exit(const char *path, const struct step_out *o)
{
	FILE *f = fopen(path, "w");

	if (f) {
		fprintf(f, "status=%s\nsession=%s\nhold=%s\nsuccess=%s\npaid=%d\nreturned=%d\n"
			"restarts=%ld\nreloads=%ld\nt_checkout=%lld\nt_paid=%lld\nlater=%s\n"
			"line_looks=%ld\nline_ms=%lld\nplace=%s\nwhy=%s\n",
			o->status, o->session, o->hold, o->success, o->paid, o->returned,
			o->restarts, o->reloads, (long long)o->t_checkout, (long long)o->t_paid,
			o->later, o->line_looks, (long long)o->line_ms, o->place, o->why);
		fclose(f);
	}
	_exit(0);
}

/* <dir>/buyer-<idx>.posting: there while the buyer's checkout is asked */
static void posting_path(long idx, char *buf, size_t size)
{
	snprintf(buf, size, "%s/buyer-%ld.posting", soak.dir, idx);
}

static void posting(long idx, int on)
{
	char path[CHAOS_PATH_MAX + 64];
	int fd;

	posting_path(idx, path, sizeof path);
	if (!on)
		unlink(path);
	else if ((fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644)) >= 0)
		close(fd);
}

/* the buyer comes back to the shop after paying, until it answers */
static int come_back(const char *success, int64_t give_up, struct step_out *o)
{
	struct resp r;
	const char *path;
	int port;

	if (buyer_url_split(success, &port, &path) != 0) {
		snprintf(o->why, sizeof o->why, "paysink sent the buyer to '%.200s'", success);
		return -1;
	}
	while (now_ms() < give_up) {
		buyer_http(port, "GET", path, NULL, NULL, &r);
		if (r.status == 200) {
			o->returned = 1;
			return 0;
		}
		if (r.status != 0 && r.status < 500) {
			snprintf(o->why, sizeof o->why, "GET %s answered %d", path, r.status);
			return -1;
		}
		o->reloads++;
		sleep_ms(200);
	}
	snprintf(o->why, sizeof o->why, "the shop did not answer the buyer's return for %d s",
		 (int)(BUYER_GIVE_UP_MS / 1000));
	return -1;
}

/* the payment: paysink's Pay button with method (NULL: the first, a card);
 * 303 to the shop: paid (a delayed method: on its way); 409: not open */
static int pay(const char *method, int come, int64_t give_up, struct step_out *o)
{
	char path[160], body[64] = "";
	struct resp r;

	snprintf(path, sizeof path, "/pay/%s", o->session);
	if (method)
		snprintf(body, sizeof body, "method=%s", method);
	buyer_http(B.paysink_port, "POST", path,
		   "Content-Type: application/x-www-form-urlencoded\r\n", body, &r);
	o->t_paid = now_ms();
	if (r.status == 303) {
		o->paid = 1;
		snprintf(o->success, sizeof o->success, "%s", r.location);
		return come ? come_back(r.location, give_up, o) : 0;
	}
	if (r.status == 409) {
		o->paid = 0;
		return 0;
	}
	snprintf(o->why, sizeof o->why, "paysink answered the payment of %s with %d", o->session,
		 r.status);
	return -1;
}

/* the hold's public id: the session's client_reference_id, from the API */
static void hold_of(struct step_out *o)
{
	char path[160], auth[200];
	struct resp r;
	json_t *doc;
	json_error_t err;

	snprintf(path, sizeof path, "/v1/checkout/sessions/%s", o->session);
	snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", B.key);
	buyer_http(B.paysink_port, "GET", path, auth, NULL, &r);
	if (r.status != 200 || !(doc = json_loads(r.body, 0, &err)))
		return;
	if (json_string_value(json_object_get(doc, "client_reference_id")))
		snprintf(o->hold, sizeof o->hold, "%s",
			 json_string_value(json_object_get(doc, "client_reference_id")));
	json_decref(doc);
}

/* the next look at a place's page, 1-5 s on, as the buyer's hash and its
 * looks say (a page that looks again by itself, far inside the 30 s its
 * place is kept without a look) */
static long look_gap(long idx, long looks)
{
	return BUYER_LOOK_MS + (long)(buyer_hash(idx * 7919 + looks) % (4 * BUYER_LOOK_MS + 1));
}

/* In line: the place's page /w/<link> (the checkout's 303, loc) looked at
 * until it answers 303 to the payment page (into r: 1), or says sold out or
 * that the place is gone (o->status: 0); -1 and why when the shop answers
 * what it must not, or stops answering */
static int line_wait(long idx, int port, const char *loc, struct resp *r, struct step_out *o)
{
	static const struct says ends[] = {
		{ "<h1>Sold out</h1>", "soldout" },
		{ "<h1>Sales have closed</h1>", "soldout" },
		{ "<h1>You left the line</h1>", "gone" },
	};
	char path[200];
	const char *p, *end;
	int64_t t0 = now_ms(), answered = t0;
	int lport;

	if (buyer_url_split(loc, &lport, &p) != 0 || lport != port) {
		snprintf(o->why, sizeof o->why, "the checkout sent the buyer to '%.200s'", loc);
		return -1;
	}
	snprintf(path, sizeof path, "%.199s", p);
	for (;;) {
		sleep_ms(look_gap(idx, o->line_looks));
		buyer_http(port, "GET", path, NULL, NULL, r);
		o->line_looks++;
		o->line_ms = now_ms() - t0;
		if (r->status == 303)
			return 1;
		if (r->status == 200) {
			answered = now_ms();
			if ((end = buyer_says(r->body, ends, sizeof ends / sizeof ends[0]))) {
				o->status = end;
				return 0;
			}
			if (!strstr(r->body, "<h1>You are in line</h1>")) {
				snprintf(o->why, sizeof o->why, "the place's page %.60s says: %.200s",
					 path, r->body);
				return -1;
			}
			if (now_ms() - t0 >= BUYER_LINE_MS) {	/* the buyer gives up */
				o->status = "left";
				return 0;
			}
			continue;
		}
		if (r->status != 0 && r->status < 500) {
			snprintf(o->why, sizeof o->why, "GET %s answered %d", path, r->status);
			return -1;
		}
		o->reloads++;	/* the box is down, or the payment service did not answer */
		if (now_ms() - answered > BUYER_GIVE_UP_MS * (opt.failover ? 3 : 1)) {
			snprintf(o->why, sizeof o->why, "no shop answered the place's page %s for "
				 "%d s", path, (int)(BUYER_GIVE_UP_MS / 1000));
			return -1;
		}
	}
}

/* The checkout: the event's page, its form posted, until the shop answers
 * (r: its 303); 0, or 1 with o->status said (sold out), -1 with why */
static int checkout_post(long idx, int port, int64_t give_up, struct resp *r,
			 struct step_out *o)
{
	const struct buyer *b = &B.b[idx];
	char path[64], cookie[64] = "", hdrs[256], body[1024], name[64], ename[200], email[200];
	char tok[64];
	const char *p, *q;

	snprintf(name, sizeof name, "Shop buyer %ld", idx + 1);
	while (now_ms() < give_up) {
		/* the event's page: the form and its token */
		snprintf(path, sizeof path, "/e/%ld", soak.shop_event);
		snprintf(hdrs, sizeof hdrs, cookie[0] ? "Cookie: sd_csrf=%s\r\n" : "", cookie);
		buyer_http(port, "GET", path, hdrs, NULL, r);
		if (r->status != 200) {
			if (r->status != 0 && r->status < 500) {
				snprintf(o->why, sizeof o->why, "GET %s answered %d", path, r->status);
				return -1;
			}
			o->reloads++;	/* the box is down: the page again */
			sleep_ms(200);
			continue;
		}
		if (r->cookie[0])
			snprintf(cookie, sizeof cookie, "%s", r->cookie);
		/* sold out (for now, the page has the form: the line waits) */
		if (strstr(r->body, "class=\"soldout\"") && !strstr(r->body, "name=\"csrf\"")) {
			o->status = "soldout";
			return 1;
		}
		if (!(p = strstr(r->body, "name=\"csrf\" value=\"")) ||
		    !(q = strchr(p += 19, '"')) || q - p >= (long)sizeof tok || !cookie[0]) {
			snprintf(o->why, sizeof o->why, "the event's page has no form token (or no "
				 "cookie)");
			return -1;
		}
		snprintf(tok, sizeof tok, "%.*s", (int)(q - p), p);
		/* the checkout */
		form_enc(name, ename, sizeof ename);
		form_enc(b->email, email, sizeof email);
		snprintf(body, sizeof body, "csrf=%s&seats=%d&name=%s&email=%s", tok, b->seats,
			 ename, email);
		snprintf(hdrs, sizeof hdrs, "Cookie: sd_csrf=%s\r\nContent-Type: "
			 "application/x-www-form-urlencoded\r\nOrigin: http://127.0.0.1:%d\r\n",
			 cookie, port);
		snprintf(path, sizeof path, "/e/%ld/checkout", soak.shop_event);
		posting(idx, 1);	/* for a whole-box kill to meet */
		buyer_http(port, "POST", path, hdrs, body, r);
		posting(idx, 0);
		if (r->status == 303)
			return 0;
		if (r->status == 409) {
			o->status = "soldout";
			return 1;
		}
		if (r->status != 0 && r->status < 500) {
			snprintf(o->why, sizeof o->why, "POST %s answered %d: %.200s", path,
				 r->status, r->body);
			return -1;
		}
		o->restarts++;	/* no answer, or 5xx: start again */
		sleep_ms(200);
	}
	snprintf(o->why, sizeof o->why, "no shop answered the checkout in time (%ld starts)",
		 o->restarts + 1);
	return -1;
}

/* the 303 to paysink's page followed: the session, and the page loaded */
static int payment_page(const char *loc, struct step_out *o)
{
	const char *pp, *s = strstr(loc, "/pay/");
	char page[200];
	struct resp r;
	int pport;

	if (!s || buyer_url_split(loc, &pport, &pp) != 0 || pport != B.paysink_port) {
		snprintf(o->why, sizeof o->why, "the checkout sent the buyer to '%.200s'", loc);
		return -1;
	}
	snprintf(o->session, sizeof o->session, "%.*s", (int)strcspn(s + 5, "?#/"), s + 5);
	snprintf(page, sizeof page, "%.190s", pp);
	buyer_http(B.paysink_port, "GET", page, NULL, NULL, &r);
	if (r.status != 200) {
		snprintf(o->why, sizeof o->why, "paysink's page %s answered %d", page, r.status);
		return -1;
	}
	return 0;
}

/* the payment page loaded (the shop's 303 to it in r), the hold named, and
 * for a prompt payer its payment (and return) */
static void __attribute__((noreturn)) checkout_pay(long idx, const struct resp *r,
						   int64_t give_up, struct step_out *o,
						   const char *out)
{
	const struct buyer *b = &B.b[idx];
	int rc;

	o->t_checkout = now_ms();
	if (payment_page(r->location, o) != 0)
		step_exit(out, o);
	hold_of(o);
	o->status = "session";
	switch (b->choice) {
	case C_RETURN:
	case C_NORETURN:
	case C_REFUND_FULL:
	case C_REFUND_PART:
	case C_DISPUTE:	/* a card, at once; the money goes back later */
		rc = pay(NULL, b->choice != C_NORETURN, give_up, o);
		break;
	case C_DELAYED_OK:
	case C_DELAYED_FAILED:	/* the browser follows paysink's 303 back */
		rc = pay(BUYER_DELAYED, 1, give_up, o);
		break;
	default:		/* late, abandon: not now */
		rc = 0;
	}
	if (rc != 0)
		o->status = "error";
	step_exit(out, o);
}

/* The checkout; a buyer the shop puts in line goes on in a line step
 * (status line, the place's page in place). */
static void __attribute__((noreturn)) step_checkout(long idx, const char *out)
{
	const struct buyer *b = &B.b[idx];
	struct step_out o = { .status = "error", .paid = -1 };
	int64_t give_up = now_ms() + BUYER_GIVE_UP_MS * (opt.failover ? 3 : 1);
	static struct resp r;

	if (checkout_post(idx, B.shop_port[b->box], give_up, &r, &o) != 0)
		step_exit(out, &o);	/* sold out, or why not */
	if (strstr(r.location, "/w/")) {	/* a place in line */
		o.status = "line";
		snprintf(o.place, sizeof o.place, "%s", r.location);
		step_exit(out, &o);
	}
	checkout_pay(idx, &r, give_up, &o, out);
}

/* In line, then on as the checkout goes. */
static void __attribute__((noreturn)) step_line(long idx, const char *out)
{
	const struct buyer *b = &B.b[idx];
	struct step_out o = { .status = "error", .paid = -1 };
	static struct resp r;

	if (line_wait(idx, B.shop_port[b->box], b->place, &r, &o) != 1)
		step_exit(out, &o);
	checkout_pay(idx, &r, now_ms() + BUYER_GIVE_UP_MS * (opt.failover ? 3 : 1), &o, out);
}

/* The buyer's later step: the late payment (and the return, for some), the
 * delayed payment settled at its bank, or the money given back. */
static void __attribute__((noreturn)) step_later(long idx, const char *out)
{
	const struct buyer *b = &B.b[idx];
	struct step_out o = { .status = "later", .paid = b->paid };
	int64_t give_up = now_ms() + BUYER_GIVE_UP_MS * (opt.failover ? 3 : 1);
	int rc = 0;

	snprintf(o.session, sizeof o.session, "%s", b->session);
	snprintf(o.hold, sizeof o.hold, "%s", b->hold);
	snprintf(o.success, sizeof o.success, "%s", b->success);
	snprintf(o.later, sizeof o.later, "%s", b->later);
	o.returned = b->returned;
	o.t_paid = b->t_paid;
	switch (b->choice) {
	case C_LATE:
		o.status = "paid";
		o.paid = -1;
		if (b->refunds_pending && (rc = buyer_refunds_pending(b->session, o.why,
								      sizeof o.why)) != 0)
			break;
		if (b->refunds_pending)
			snprintf(o.later, sizeof o.later, "refunds-pending");
		rc = pay(NULL, b->late_return, give_up, &o);
		break;
	case C_DELAYED_OK:
	case C_DELAYED_FAILED:
		rc = buyer_settle(b->session, b->choice == C_DELAYED_OK, o.later, sizeof o.later,
				  o.why, sizeof o.why);
		break;
	default:	/* refund_full, refund_part, dispute */
		rc = buyer_money_back(b->session, b->success,
				      b->choice == C_REFUND_PART ? b->part : 0,
				      b->choice == C_DISPUTE ? b->reason : NULL,
				      now_ms() + BUYER_BACK_MS, o.later, sizeof o.later, o.why,
				      sizeof o.why);
	}
	if (rc != 0)
		o.status = "error";
	step_exit(out, &o);
}

/* ======================== the parent's side ============================= */

static void out_path(long idx, char *buf, size_t size)
{
	snprintf(buf, size, "%s/buyer-%ld.out", soak.dir, idx);
}

static int step_start(long idx)
{
	struct buyer *b = &B.b[idx];
	char out[CHAOS_PATH_MAX + 64];
	pid_t pid;

	out_path(idx, out, sizeof out);
	unlink(out);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		signal(SIGTERM, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		if (b->phase == P_LATER)
			step_later(idx, out);
		if (b->phase == P_LINE)
			step_line(idx, out);
		step_checkout(idx, out);
	}
	if (pid < 0) {
		fail("buyers: fork: %s", strerror(errno));
		return -1;
	}
	b->pid = pid;
	B.running++;
	B.lining += b->phase == P_LINE;
	return 0;
}

/* key=VALUE of a step's result (text starts with a newline) into buf */
static void field_of(const char *text, const char *key, char *buf, size_t size)
{
	char want[32];
	const char *p;

	snprintf(want, sizeof want, "\n%s=", key);
	buf[0] = '\0';
	if ((p = strstr(text, want)))
		snprintf(buf, size, "%.*s", (int)strcspn(p + strlen(want), "\n"), p + strlen(want));
}

static void buyer_log(long idx, const char *outcome)
{
	const struct buyer *b = &B.b[idx];

	actions_log("buyer idx=%ld box=%c choice=%s seats=%d email=%s outcome=%s session=%s "
		    "hold=%s paid=%s returned=%d later=%s restarts=%ld reloads=%ld "
		    "soldout_tries=%d line=%ld line_ms=%lld t0=%lld t1=%lld tpay=%lld", idx,
		    b->box ? 'b' : 'a', choice_names[b->choice], b->seats, b->email, outcome,
		    b->session[0] ? b->session : "-", b->hold[0] ? b->hold : "-",
		    b->paid < 0 ? "-" : b->paid ? "1" : "0", b->returned, b->later, b->restarts,
		    b->reloads, b->soldout_tries, b->line_looks, b->line_ms, rel_ms(b->t_first),
		    rel_ms(now_ms()), rel_ms(b->t_paid));
}

static void buyer_done(long idx, const char *outcome)
{
	struct buyer *b = &B.b[idx];

	b->phase = P_DONE;
	B.done++;
	B.t_end = now_ms();
	if (strcmp(outcome, "session") == 0) {
		B.paid += b->paid == 1;
		B.refused += b->paid == 0;
		B.returned += b->returned;
	}
	B.settled_ok += strcmp(b->later, "settled-succeeded") == 0;
	B.settled_failed += strcmp(b->later, "settled-failed") == 0;
	B.money_back += !strncmp(b->later, "refund", 6) && strcmp(b->later, "refunds-pending");
	B.money_back += strncmp(b->later, "dispute", 7) == 0;
	B.money_back_skipped += strncmp(b->later, "skip-", 5) == 0;
	buyer_log(idx, outcome);
}

/* a step's counts added to the buyer's and the figures */
static void step_counts(struct buyer *b, const char *text)
{
	char v[64];

	field_of(text, "restarts", v, sizeof v);
	b->restarts += atol(v);
	B.restarts += atol(v);
	field_of(text, "reloads", v, sizeof v);
	b->reloads += atol(v);
	B.reloads += atol(v);
	field_of(text, "line_looks", v, sizeof v);
	B.in_line += b->line_looks == 0 && atol(v) > 0;
	b->line_looks += atol(v);
	B.line_looks += atol(v);
	field_of(text, "line_ms", v, sizeof v);
	b->line_ms += atoll(v);
	if (b->line_ms > B.line_ms_max)
		B.line_ms_max = b->line_ms;
}

/* sold out, or its place in line gone: tried again in 1-3 s, for a while */
static void step_again(long idx, const char *status)
{
	struct buyer *b = &B.b[idx];

	b->soldout_tries++;
	B.soldout_tries++;
	B.line_gone += strcmp(status, "gone") == 0;
	if (now_ms() - b->t_first >= BUYER_SOLDOUT_MS) {
		B.soldout++;
		buyer_done(idx, "soldout");
		return;
	}
	b->phase = P_SOLDOUT_WAIT;
	b->due = now_ms() + 1000 + (int64_t)rng_below(2001);
}

/* the checkout's session: the buyer's later step planned, or it is done */
static int step_session(long idx, const char *text)
{
	struct buyer *b = &B.b[idx];
	char v[64];

	field_of(text, "session", b->session, sizeof b->session);
	field_of(text, "hold", b->hold, sizeof b->hold);
	field_of(text, "t_checkout", v, sizeof v);
	b->t_checkout = atoll(v);
	B.sessions++;
	if (!b->hold[0]) {
		fail("buyers: buyer %ld: paysink names no hold for session %s (%.300s)", idx,
		     b->session, text + 1);
		return -1;
	}
	if (b->choice == C_LATE) {
		b->phase = P_LATER_WAIT;
		b->due = b->t_checkout + b->late_ms;
	} else if (b->choice >= C_DELAYED_OK && b->paid == 1) {
		b->phase = P_LATER_WAIT;
		b->due = b->t_paid + b->later_ms;
	} else {
		buyer_done(idx, "session");
	}
	return 0;
}

/* a step ended: its result read, the buyer's next step planned */
static int step_done(long idx)
{
	struct buyer *b = &B.b[idx];
	char out[CHAOS_PATH_MAX + 64], text[4096], v[1024], status[16];
	enum phase was = b->phase;
	FILE *f;
	size_t n = 0;

	out_path(idx, out, sizeof out);
	text[0] = '\n';
	if ((f = fopen(out, "r"))) {
		n = fread(text + 1, 1, sizeof text - 2, f);
		fclose(f);
	}
	text[n + 1] = '\0';
	unlink(out);
	field_of(text, "status", status, sizeof status);
	if (!status[0] || strcmp(status, "error") == 0) {
		char why[400];

		field_of(text, "why", why, sizeof why);
		fail("buyers: buyer %ld (%s): %s", idx, choice_names[b->choice],
		     why[0] ? why : "its step died");
		return -1;
	}
	step_counts(b, text);
	if (strcmp(status, "soldout") == 0 || strcmp(status, "gone") == 0) {
		step_again(idx, status);
		return 0;
	}
	if (strcmp(status, "line") == 0) {	/* in line: its page, at once */
		field_of(text, "place", b->place, sizeof b->place);
		b->phase = P_LINE_WAIT;
		return 0;
	}
	if (strcmp(status, "left") == 0) {	/* waited in line too long */
		B.line_left++;
		buyer_done(idx, "left");
		return 0;
	}
	field_of(text, "paid", v, sizeof v);
	b->paid = atoi(v);
	field_of(text, "returned", v, sizeof v);
	b->returned = atoi(v);
	field_of(text, "t_paid", v, sizeof v);
	if (atoll(v) > 0)
		b->t_paid = atoll(v);
	field_of(text, "success", b->success, sizeof b->success);
	field_of(text, "later", v, sizeof v);
	if (v[0])
		snprintf(b->later, sizeof b->later, "%.63s", v);
	if (was == P_CHECKOUT || was == P_LINE)
		return step_session(idx, text);
	buyer_done(idx, "session");
	return 0;
}

/* the bank's word: the refunds of session's payment fail (its buyer's plan) */
static int refund_fails(const char *session)
{
	long i;

	for (i = 0; i < B.n; i++)
		if (strcmp(B.b[i].session, session) == 0)
			return B.b[i].refund_fails;
	return 0;
}

/* the finished steps reaped and read; -1 when one failed */
static int steps_reap(void)
{
	char path[CHAOS_PATH_MAX + 64];
	long i;
	int rc;

	for (i = 0; i < B.n && B.running > 0; i++) {
		struct buyer *b = &B.b[i];

		if (!b->pid || (rc = proc_wait(b->pid, 0)) == -2)
			continue;
		b->pid = 0;
		B.running--;
		B.lining -= b->phase == P_LINE;
		posting_path(i, path, sizeof path);
		unlink(path);
		if (rc != 0) {
			fail("buyers: buyer %ld's step exited %d", i, rc);
			return -1;
		}
		if (step_done(i) != 0)
			return -1;
	}
	return 0;
}

/* a slot free for a step: those in line hold none (each is a buyer's page
 * left open, not the harness's work) */
static int slot_free(void)
{
	return B.running - B.lining < BUYER_SLOTS;
}

int buyers_step(void)
{
	int64_t now = now_ms();
	long i;
	int pass;

	if (!opt.buyers)
		return 0;
	if (!B.t0)
		B.t0 = now;
	bank_step(B.record, refund_fails);
	if (steps_reap() != 0)
		return -1;
	/* start: the places in line at once, the late payments first (their
	 * time matters), then the sold-out ones trying again, then new buyers */
	for (pass = 0; pass < 3; pass++) {
		for (i = 0; i < B.n && (pass == 0 || slot_free()); i++) {
			struct buyer *b = &B.b[i];

			if (b->pid || now < b->due)
				continue;
			if (pass == 0 && b->phase == P_LINE_WAIT)
				b->phase = P_LINE;
			else if (pass == 1 && b->phase == P_LATER_WAIT)
				b->phase = P_LATER;
			else if (pass == 2 && b->phase == P_SOLDOUT_WAIT)
				b->phase = P_CHECKOUT;
			else
				continue;
			if (step_start(i) != 0)
				return -1;
		}
	}
	while (slot_free() && B.next < B.n && now >= B.t0 + B.b[B.next].due) {
		struct buyer *b = &B.b[B.next];

		b->phase = P_CHECKOUT;
		b->t_first = now;
		if (step_start(B.next++) != 0)
			return -1;
	}
	return 0;
}

int buyers_done(void)
{
	return !opt.buyers || B.done >= B.n;
}

int buyers_holds_ending(void)
{
	long i;

	if (buyers_done())
		return 1;
	for (i = 0; i < B.n; i++)
		if (B.b[i].t_checkout && now_ms() - B.b[i].t_checkout > 65000)
			return 1;
	return 0;
}

int buyers_checkout_running(int box)
{
	char path[CHAOS_PATH_MAX + 64];
	long i;

	if (buyers_done())
		return 1;
	for (i = 0; i < B.n; i++) {
		if (B.b[i].pid <= 0 || B.b[i].phase != P_CHECKOUT || B.b[i].box != box)
			continue;
		posting_path(i, path, sizeof path);
		if (access(path, F_OK) == 0)
			return 1;
	}
	return 0;
}

long buyers_pending(void)
{
	return opt.buyers ? B.n - B.done : 0;
}

void buyers_cleanup(void)
{
	long i;

	for (i = 0; B.b && i < B.n; i++) {
		if (B.b[i].pid > 0) {
			kill(B.b[i].pid, SIGKILL);
			proc_wait(B.b[i].pid, 5000);
			B.b[i].pid = 0;
		}
	}
	buyers_stop_provider();
}

/* ======================== the drain's extra wait ======================== */

/* paysink's webhook events still on their way to the box: neither
 * dropped, nor answered 2xx, nor given up by every copy; -1 unreadable */
static long events_in_flight(void)
{
	json_t *doc = json_load_file(B.record, 0, NULL), *x;
	long n = 0;
	size_t i;

	if (!doc)
		return -1;
	json_array_foreach(json_object_get(doc, "events"), i, x) {
		json_int_t copies = json_is_true(json_object_get(x, "duplicated")) ? 2 : 1;

		if (!json_is_true(json_object_get(x, "dropped")) &&
		    json_integer_value(json_object_get(x, "delivered_ok")) == 0 &&
		    json_integer_value(json_object_get(x, "gave_up")) < copies)
			n++;
	}
	json_decref(doc);
	return n;
}

int buyers_settled(char *why, size_t size)
{
	static const struct {
		const char *sql, *what;
	} q[] = {
		{ "SELECT count(*) FROM holds WHERE state = 'open'", "holds open" },
		/* a refund paysink failed is owed at the window: nothing to wait for */
		{ "SELECT count(*) FROM refunds WHERE via = 'provider' AND done_at IS NULL AND "
		  "failed_at IS NULL", "refunds owed at the provider" },
		{ "SELECT count(*) FROM refunds r WHERE r.reason = 'late' AND r.done_at IS NOT NULL "
		  "AND NOT EXISTS (SELECT 1 FROM effects e WHERE e.subject = 'refund:' || "
		  "r.payment_ref AND e.kind = 'mail' AND e.done_at IS NOT NULL)",
		  "refund emails not marked sent" },
		{ "SELECT count(*) FROM holds h WHERE h.state = 'failed' AND NOT EXISTS (SELECT 1 "
		  "FROM effects e WHERE e.subject = 'hold:' || h.public_id AND e.kind = 'mail' AND "
		  "e.done_at IS NOT NULL)", "failed payments' emails not marked sent" },
	};
	struct vdb *db = NULL;
	char err[300];
	size_t i;
	long n;

	why[0] = '\0';
	if (!opt.buyers)
		return 1;
	bank_step(B.record, refund_fails);	/* the pending refunds end meanwhile */
	if (vdb_open(soak.db, &db, err, sizeof err) != 0) {
		snprintf(why, size, "%s", err);
		return 0;
	}
	for (i = 0; i < sizeof q / sizeof q[0] && !why[0]; i++) {
		char c[32] = "";

		if (vdb_one(db, q[i].sql, c, sizeof c) != 0)
			snprintf(why, size, "cannot read the database: %s", q[i].sql);
		else if (atol(c) > 0)
			snprintf(why, size, "%s %s", c, q[i].what);
	}
	vdb_close(db);
	if (!why[0] && (n = bank_pending()) > 0)
		snprintf(why, size, "%ld refunds pending at paysink", n);
	if (!why[0] && (n = events_in_flight()) < 0)
		snprintf(why, size, "paysink's record %s is unreadable", B.record);
	else if (!why[0] && n > 0)
		snprintf(why, size, "%ld of paysink's webhook events on their way", n);
	if (why[0])
		B.settle_waits++;
	return !why[0];
}

int buyers_later_only(char *why, size_t size)
{
	struct vdb *db = NULL;
	char err[300], n[32] = "";
	int ok;

	why[0] = '\0';
	if (!opt.buyers)
		return 0;
	if (vdb_open(soak.db, &db, err, sizeof err) != 0) {
		snprintf(why, size, "%s", err);
		return 0;
	}
	ok = vdb_one(db, "SELECT count(*) FROM stream WHERE kind <> 'send_reminder' AND NOT "
		     CHAOS_SHOP_LATER, n, sizeof n) == 0 && atol(n) == 0;
	vdb_close(db);
	if (!ok)
		snprintf(why, size, "%s jobs wait that are not the shop's looks again later",
			 n[0] ? n : "some");
	return ok;
}

/* ======================== the figures =================================== */

void buyers_print_figures(void)
{
	if (!opt.buyers)
		return;
	printf("buyers_s %.1f\n", (double)((B.t_end ? B.t_end : now_ms()) - B.t0) / 1000.0);
	printf("buyer_checkouts %ld\n", B.sessions);
	printf("buyer_restarts %ld\n", B.restarts);
	printf("buyer_reloads %ld\n", B.reloads);
	printf("buyer_soldout_tries %ld\n", B.soldout_tries);
	printf("buyers_gone_sold_out %ld\n", B.soldout);
	printf("buyer_payments_accepted %ld\n", B.paid);
	printf("buyer_payments_refused %ld\n", B.refused);
	printf("buyer_returns %ld\n", B.returned);
	printf("buyers_in_line %ld\n", B.in_line);
	printf("buyer_line_looks %ld\n", B.line_looks);
	printf("buyer_line_wait_max_s %.1f\n", (double)B.line_ms_max / 1000.0);
	printf("buyer_line_places_gone %ld\n", B.line_gone);
	printf("buyers_left_the_line %ld\n", B.line_left);
	printf("buyer_delayed_settled_ok %ld\n", B.settled_ok);
	printf("buyer_delayed_settled_failed %ld\n", B.settled_failed);
	printf("buyer_money_back %ld\n", B.money_back);
	printf("buyer_money_back_skipped %ld\n", B.money_back_skipped);
	printf("bank_refunds_settled %ld\n", bank_settled(0));
	printf("bank_refunds_failed %ld\n", bank_settled(1));
	printf("drain_waits_for_payments %ld\n", B.settle_waits);
}
