/*
 * changes.c: the box office at work while the kill soak attacks.  Orders are
 * resent, given a new address (and then resent to it) and cancelled (some
 * twice), half through the command line (`stagedoor order resend|set-email|
 * cancel`) and half through the API (POST /v1/orders/{id}/resend with an
 * Idempotency-Key, PATCH /v1/orders/{id}, POST /v1/orders/{id}/cancel, on
 * either box), and every order and change acknowledged goes to the soak's
 * log (chaos.h: actions_log), which the verdict judges the box by.
 *
 * The plan: --resend-pct, --readdress-pct and --cancel-pct of the orders,
 * shuffled, change k due once k/(n+1) of the orders are acknowledged, so
 * that the changes fall among the orders, the kills and the two appliance
 * kills.  Each picks an acknowledged order that no change is busy with and
 * that was never cancelled; once the small event has sold out, half the
 * cancellations pick one of its orders, so that its seats are sold again.
 *
 *   resend     resend, by the CLI or the API in turn; every other API one is
 *              sent a second time with the same Idempotency-Key: the same n
 *              must come back, and no second resend be made
 *   readdress  set-email to an address of its own, then a resend (which must
 *              go to it, or to one set after it)
 *   cancel     cancel; every third is cancelled again by the other door,
 *              which must answer that nothing changed
 *
 * Invariants:
 *  - one change at a time per order and its steps in turn, each logged when
 *    acknowledged: an order's lines in the log are its changes in order, so
 *    the address in force at each intent is the last "email" line before it;
 *  - a step that got no answer is asked again until it is acknowledged: a
 *    new address and a cancellation are states, and an API resend carries
 *    its key; a CLI resend that failed may or may not have been made, so it
 *    is logged resend-unknown (the verdict allows that many extra) first;
 *  - what the box owes no one fails the soak at once: a resend of an order
 *    that is not cancelled refused, a cancellation refused, the same key
 *    answered with another n, a second cancellation that cancels.
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
#include <sys/time.h>
#include <unistd.h>

#include "chaos.h"

#define CH_SLOTS 2		/* changes under way at a time */
#define CH_IO_MS 10000		/* an API call's socket timeouts */
#define CH_GIVE_UP_MS 90000	/* one step unanswered this long: the soak fails */
#define CH_RETRY_MS 150		/* a step without an answer, asked again after */
#define CH_RECENT 16		/* the orders acknowledged last, for changes made at once */

enum ch_kind { CH_RESEND, CH_READDRESS, CH_CANCEL };
enum ch_op { OP_RESEND, OP_REPLAY, OP_EMAIL, OP_CANCEL };
enum ch_via { VIA_CLI, VIA_API };

static const char *const via_names[] = { "cli", "api" };
static const char *const op_names[] = { "resend", "resend again", "set-email", "cancel" };

/* An order as the changes see it. */
struct corder {
	char id[24];		/* public id; "" until acknowledged */
	long event, seats;
	int cancelled;		/* a cancellation was asked: never a target again */
	int busy;		/* a change is under way */
	int addrs;		/* new addresses given so far */
	long long last_n;	/* the last resend acknowledged */
};

struct change {
	int active;
	pid_t pid;		/* the CLI, or the API's client; 0 between tries */
	enum ch_kind kind;
	long plan_idx, idx;
	int step, n_steps;
	enum ch_op ops[2];
	enum ch_via via[2];
	int tries;		/* of this step */
	int64_t t0;		/* this step first asked, 0: not yet */
	int64_t retry_at;
	long long n;		/* the resend's n, once acknowledged */
	char key[96];		/* an API resend's Idempotency-Key */
	char email[96];		/* readdress: the new address */
	char out[CHAOS_PATH_MAX + 32];	/* what the step's process said */
};

static struct {
	struct corder *ord;
	unsigned char *plan;
	long plan_n, plan_next;
	struct change c[CH_SLOTS];
	/* figures */
	long begun[3];			/* changes begun, by kind: the doors' turn */
	long recent[CH_RECENT];		/* ring of the last orders acknowledged */
	long n_recent;
	/* figures */
	long steps_retried, api_no_answer, dropped, soon;
} CH;

/* ======================== the log ======================================= */

void actions_log(const char *fmt, ...)
{
	FILE *f = fopen(soak.actions_log, "a");
	va_list ap;

	if (!f) {
		fail("actions: cannot write %s: %s", soak.actions_log, strerror(errno));
		return;
	}
	va_start(ap, fmt);
	vfprintf(f, fmt, ap);
	va_end(ap);
	fputc('\n', f);
	if (fclose(f) != 0)
		fail("actions: cannot write %s: %s", soak.actions_log, strerror(errno));
}

static long long rel_ms(int64_t t)
{
	return (long long)(t - soak.t0);
}

/* ======================== the plan ====================================== */

int changes_init(void)
{
	long r = opt.orders * opt.resend_pct / 100, a = opt.orders * opt.readdress_pct / 100;
	long c = opt.orders * opt.cancel_pct / 100, i;
	FILE *f;

	if (!(CH.ord = calloc((size_t)opt.orders, sizeof *CH.ord)) ||
	    !(CH.plan = malloc((size_t)(r + a + c + 1)))) {
		fail("changes: out of memory");
		return -1;
	}
	for (i = 0; i < r + a + c; i++)
		CH.plan[i] = i < r ? CH_RESEND : i < r + a ? CH_READDRESS : CH_CANCEL;
	CH.plan_n = r + a + c;
	for (i = CH.plan_n - 1; i > 0; i--) {	/* Fisher-Yates */
		long j = (long)rng_below((uint64_t)i + 1);
		unsigned char t = CH.plan[i];

		CH.plan[i] = CH.plan[j];
		CH.plan[j] = t;
	}
	if (!(f = fopen(soak.actions_log, "w"))) {	/* a fresh log, even in a reused --dir */
		fail("actions: cannot write %s: %s", soak.actions_log, strerror(errno));
		return -1;
	}
	fprintf(f, "# chaos seed %" PRIu64 ": what the soak did, acknowledged; t0 asked, t1 "
		"answered (ms since it started)\n", opt.seed);
	fclose(f);
	return 0;
}

void changes_placed(long idx, const char *public_id, const struct order_fields *f, int64_t t0)
{
	struct corder *o = &CH.ord[idx];

	snprintf(o->id, sizeof o->id, "%s", public_id);
	o->event = atol(f->event);
	o->seats = atol(f->seats);
	CH.recent[CH.n_recent++ % CH_RECENT] = idx;
	actions_log("placed idx=%ld order=%s event=%ld seats=%ld email=%s via=cli t0=%lld t1=%lld",
		    idx, public_id, o->event, o->seats, f->email, rel_ms(t0), rel_ms(now_ms()));
}

static int eligible(long i, int small_only)
{
	const struct corder *o = &CH.ord[i];

	return o->id[0] && !o->cancelled && !o->busy &&
	       (!small_only || o->event == soak.small_event);
}

/* An order for a change of kind: random draws, then a walk from a random
 * start; -1 when none is free.  Half the new addresses and a quarter of
 * the resends go to an order just placed, whose tickets email may be on
 * its way: the buyer who spots a typo at once. */
static long pick(enum ch_kind kind)
{
	int small = kind == CH_CANCEL && soak.small_full && rng_below(2) == 0;
	long i, start;
	int pass, d;

	if ((kind == CH_READDRESS && rng_below(2) == 0) || (kind == CH_RESEND && rng_below(4) == 0)) {
		long n = CH.n_recent < CH_RECENT ? CH.n_recent : CH_RECENT;

		for (d = 0; d < 4 && n > 0; d++) {
			i = CH.recent[(CH.n_recent - 1 - (long)rng_below((uint64_t)n)) % CH_RECENT];
			if (eligible(i, 0)) {
				CH.soon++;
				return i;
			}
		}
	}

	for (pass = small ? 0 : 1; pass < 2; pass++) {
		for (d = 0; d < 32; d++) {
			i = (long)rng_below((uint64_t)opt.orders);
			if (eligible(i, pass == 0))
				return i;
		}
		start = (long)rng_below((uint64_t)opt.orders);
		for (d = 0; d < opt.orders; d++) {
			i = (start + d) % opt.orders;
			if (eligible(i, pass == 0))
				return i;
		}
	}
	return -1;
}

/* ======================== one step ====================================== */

/* The API's client, a child of ours: one request to box b, the answer's
 * status and body into out ("0\n" for none).  Never returns. */
static void __attribute__((noreturn)) api_child(int port, const char *token, const char *method,
						const char *path, const char *key,
						const char *body, const char *out)
{
	struct sockaddr_in a;
	struct timeval tv = { CH_IO_MS / 1000, 0 };
	static char req[4096], resp[16384];
	char keyhdr[160] = "";
	size_t len = 0;
	ssize_t got;
	int n, fd, status = 0;
	const char *b;
	FILE *f;

	if (key)
		snprintf(keyhdr, sizeof keyhdr, "Idempotency-Key: %s\r\n", key);
	n = snprintf(req, sizeof req,
		     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n%s"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s", method, path, token, keyhdr, strlen(body), body);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
		    write(fd, req, (size_t)n) == n) {
			while (len < sizeof resp - 1 &&
			       (got = read(fd, resp + len, sizeof resp - 1 - len)) > 0)
				len += (size_t)got;
		}
	}
	resp[len] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		status = 0;
	b = strstr(resp, "\r\n\r\n");
	if ((f = fopen(out, "w"))) {
		fprintf(f, "%d\n%s\n", status, status && b ? b + 4 : "");
		fclose(f);
	}
	_exit(0);
}

static int read_token(int box, char *buf, size_t size)
{
	char path[CHAOS_PATH_MAX + 64];
	FILE *f;
	size_t n;

	box_token_path(box, path, sizeof path);
	if (!(f = fopen(path, "r")))
		return -1;
	n = fread(buf, 1, size - 1, f);
	fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\r\n")] = '\0';
	return buf[0] ? 0 : -1;
}

/* Start the change's current step: 0, 1 to ask again later (no box up), -1. */
static int step_start(struct change *c)
{
	const struct corder *o = &CH.ord[c->idx];
	enum ch_op op = c->ops[c->step];
	char path[128], body[200], token[256];
	const char *method = "POST";
	int box, port;
	pid_t pid;

	if (!c->t0)
		c->t0 = now_ms();
	unlink(c->out);
	if (c->via[c->step] == VIA_CLI) {
		const char *argv[12] = { opt.bin, "order", NULL };
		int n = 2;

		argv[n++] = op == OP_EMAIL ? "set-email" : op == OP_CANCEL ? "cancel" : "resend";
		argv[n++] = o->id;
		if (op == OP_EMAIL)
			argv[n++] = c->email;
		if (op == OP_CANCEL) {
			argv[n++] = "--reason";
			argv[n++] = "chaos";
		}
		argv[n++] = "--db";
		argv[n++] = soak.db;
		argv[n] = NULL;
		if ((c->pid = proc_spawn(argv, c->out, c->out, NULL)) < 0) {
			c->pid = 0;
			fail("changes: cannot run %s", opt.bin);
			return -1;
		}
		return 0;
	}
	box = opt.boxes > 1 ? (int)rng_below(2) : 0;
	if (!(port = box_http_port(box)) && opt.boxes > 1)
		port = box_http_port(box = !box);
	if (!port || read_token(box, token, sizeof token) != 0)
		return 1;	/* no box listening just now (being started again) */
	body[0] = '\0';
	if (op == OP_EMAIL) {
		method = "PATCH";
		snprintf(path, sizeof path, "/v1/orders/%s", o->id);
		snprintf(body, sizeof body, "{\"email\":\"%s\"}", c->email);
	} else if (op == OP_CANCEL) {
		snprintf(path, sizeof path, "/v1/orders/%s/cancel", o->id);
		snprintf(body, sizeof body, "{\"reason\":\"chaos\"}");
	} else {
		snprintf(path, sizeof path, "/v1/orders/%s/resend", o->id);
	}
	pid = fork();
	if (pid == 0)
		api_child(port, token, method, path, op == OP_RESEND || op == OP_REPLAY ? c->key : NULL,
			  body, c->out);
	if (pid < 0) {
		fail("changes: fork: %s", strerror(errno));
		return -1;
	}
	c->pid = pid;
	return 0;
}

/* The number after "name": in a JSON answer (true 1, false 0), -1 if none. */
static long long json_num(const char *text, const char *name)
{
	char want[64];
	const char *p;

	snprintf(want, sizeof want, "\"%s\"", name);
	if (!(p = strstr(text, want)))
		return -1;
	p += strlen(want);
	while (*p == ' ' || *p == ':')
		p++;
	if (*p == 't')
		return 1;
	if (*p == 'f')
		return 0;
	return *p >= '0' && *p <= '9' ? strtoll(p, NULL, 10) : -1;
}

/* What a step's process said, its status first for the API ("STATUS\nbody"). */
static void step_output(const struct change *c, char *text, size_t size)
{
	FILE *f = fopen(c->out, "r");
	size_t n = 0;

	if (f) {
		n = fread(text, 1, size - 1, f);
		fclose(f);
	}
	text[n] = '\0';
}

/* The step was acknowledged with text: log it, check it.  0, or -1. */
static int step_acked(struct change *c, const char *text)
{
	struct corder *o = &CH.ord[c->idx];
	enum ch_op op = c->ops[c->step];
	const char *via = via_names[c->via[c->step]];
	long long n = -1, t0 = rel_ms(c->t0), t1 = rel_ms(now_ms());
	const char *p;

	switch (op) {
	case OP_RESEND:
	case OP_REPLAY:
		if (c->via[c->step] == VIA_CLI)
			n = (p = strstr(text, ": resend ")) ? strtoll(p + 9, NULL, 10) : -1;
		else
			n = json_num(text, "resend");
		if (n < 1) {
			fail("changes: order %s: %s by %s answered '%.200s', no resend number", o->id,
			     op_names[op], via, text);
			return -1;
		}
		if (op == OP_REPLAY) {
			actions_log("replay order=%s via=%s n=%lld first=%lld key=%s t0=%lld t1=%lld",
				    o->id, via, n, c->n, c->key, t0, t1);
			if (n != c->n) {
				fail("changes: order %s: Idempotency-Key %s answered resend %lld, then "
				     "%lld: a second resend for one request", o->id, c->key, c->n, n);
				return -1;
			}
			break;
		}
		actions_log("resend order=%s via=%s n=%lld key=%s t0=%lld t1=%lld", o->id, via, n,
			    c->via[c->step] == VIA_API ? c->key : "-", t0, t1);
		if (n <= o->last_n) {
			fail("changes: order %s: resend %lld acknowledged after resend %lld", o->id,
			     n, o->last_n);
			return -1;
		}
		o->last_n = c->n = n;
		break;
	case OP_EMAIL:
		actions_log("email order=%s via=%s to=%s t0=%lld t1=%lld", o->id, via, c->email, t0,
			    t1);
		break;
	case OP_CANCEL: {
		long long already, seats;

		if (c->via[c->step] == VIA_CLI) {
			already = strstr(text, "was cancelled before") ? 1
				  : strstr(text, " is cancelled: ") ? 0 : -1;
			p = strstr(text, " is cancelled: ");
			seats = already == 0 && p ? strtoll(p + 15, NULL, 10) : 0;
		} else {
			already = json_num(text, "already");
			seats = already == 0 ? json_num(text, "seats_freed") : 0;
		}
		if (already < 0) {
			fail("changes: order %s: cancel by %s answered '%.200s'", o->id, via, text);
			return -1;
		}
		actions_log("cancel order=%s via=%s already=%lld seats=%lld again=%d t0=%lld t1=%lld",
			    o->id, via, already, seats, c->step, t0, t1);
		if (c->step == 1 && !already) {
			fail("changes: order %s: cancelled again by %s, and it cancelled it again",
			     o->id, via);
			return -1;
		}
		/* a first ask whose answer was lost may have cancelled it */
		if (c->step == 0 && already && c->tries == 0) {
			fail("changes: order %s: its first cancellation found it cancelled", o->id);
			return -1;
		}
		if (!already && seats != o->seats) {
			fail("changes: order %s: cancelled with %lld seats back, it has %ld", o->id,
			     seats, o->seats);
			return -1;
		}
		break;
	}
	}
	return 0;
}

/* The step's process ended: acknowledged (next step), asked again, or a
 * refusal that fails the soak.  0, or -1. */
static int step_done(struct change *c, int rc)
{
	struct corder *o = &CH.ord[c->idx];
	enum ch_op op = c->ops[c->step];
	const char *via = via_names[c->via[c->step]];
	static char text[16384];
	int status = 0, again = 0;
	const char *body = text;

	c->pid = 0;
	step_output(c, text, sizeof text);
	if (c->via[c->step] == VIA_CLI) {
		if (rc == 0) {
			if (step_acked(c, text) != 0)
				return -1;
		} else if (rc == 2 || rc == 3) {
			fail("changes: order %s: `order %s` exit %d: %.300s", o->id, op_names[op], rc,
			     text);
			return -1;
		} else {
			if (op == OP_RESEND)	/* it may have been made, or not */
				actions_log("resend-unknown order=%s via=cli rc=%d t0=%lld t1=%lld",
					    o->id, rc, rel_ms(c->t0), rel_ms(now_ms()));
			again = 1;
		}
	} else {
		status = atoi(text);
		body = strchr(text, '\n') ? strchr(text, '\n') + 1 : "";
		if (status >= 200 && status < 300) {
			if (step_acked(c, body) != 0)
				return -1;
		} else if (status == 0 || status == 429 || status >= 500 ||
			   (status == 409 && strstr(body, "Idempotency-Key"))) {
			CH.api_no_answer += status == 0;
			again = 1;	/* no answer, a box busy or between primaries,
					 * or our key still running: ask again */
		} else {
			fail("changes: order %s: %s by the API answered %d: %.300s", o->id,
			     op_names[op], status, body);
			return -1;
		}
	}
	if (again) {
		CH.steps_retried++;
		c->tries++;
		if (now_ms() - c->t0 > CH_GIVE_UP_MS * (opt.failover ? 3 : 1)) {
			fail("changes: order %s: %s by %s unanswered for %d s (last: %.200s)", o->id,
			     op_names[op], via, CH_GIVE_UP_MS / 1000, text);
			return -1;
		}
		c->retry_at = now_ms() + CH_RETRY_MS;
		return 0;
	}
	if (++c->step >= c->n_steps) {
		o->busy = 0;
		c->active = 0;
		return 0;
	}
	c->tries = 0;
	c->t0 = 0;
	c->retry_at = now_ms();
	return 0;
}

/* ======================== the plan's changes ============================= */

/* Change plan[k] on order idx: its steps, doors and key.  The doors take
 * turns within each kind, so each is used by both whatever the timing: the
 * CLI and the API alternate; every other API resend is sent twice; every
 * third cancellation is made again by the other door; a new address is
 * followed by a resend through each door in turn. */
static void change_begin(struct change *c, long k, long idx)
{
	struct corder *o = &CH.ord[idx];
	long turn = CH.begun[CH.plan[k]]++;
	enum ch_via via = turn % 2 ? VIA_API : VIA_CLI;

	memset(c, 0, sizeof *c);
	c->active = 1;
	c->kind = (enum ch_kind)CH.plan[k];
	c->plan_idx = k;
	c->idx = idx;
	c->via[0] = via;
	c->n_steps = 1;
	snprintf(c->out, sizeof c->out, "%s/change-%d.out", soak.dir, (int)(c - CH.c));
	switch (c->kind) {
	case CH_RESEND:
		c->ops[0] = OP_RESEND;
		if (via == VIA_API && turn / 2 % 2 == 0) {	/* the client sends it twice */
			c->ops[1] = OP_REPLAY;
			c->via[1] = VIA_API;
			c->n_steps = 2;
		}
		break;
	case CH_READDRESS:
		c->ops[0] = OP_EMAIL;
		c->ops[1] = OP_RESEND;
		c->via[1] = turn / 2 % 2 ? VIA_API : VIA_CLI;
		c->n_steps = 2;
		snprintf(c->email, sizeof c->email, "buyer%ld.new%d@example.org", idx + 1,
			 ++o->addrs);
		break;
	case CH_CANCEL:
		c->ops[0] = OP_CANCEL;
		o->cancelled = 1;
		if (turn % 3 == 0) {	/* again, by the other door */
			c->ops[1] = OP_CANCEL;
			c->via[1] = via == VIA_CLI ? VIA_API : VIA_CLI;
			c->n_steps = 2;
		}
		break;
	}
	/* one key per resend intent asked for; the replay reuses it */
	snprintf(c->key, sizeof c->key, "chaos-%" PRIu64 "-change-%ld", opt.seed, k);
	o->busy = 1;
	c->retry_at = now_ms();
}

static int change_due(void)
{
	return CH.plan_next < CH.plan_n &&
	       soak.placed * (CH.plan_n + 1) >= (CH.plan_next + 1) * opt.orders;
}

static int changes_active(void)
{
	int i, n = 0;

	for (i = 0; i < CH_SLOTS; i++)
		n += CH.c[i].active;
	return n;
}

int changes_step(void)
{
	int i, rc;

	for (i = 0; i < CH_SLOTS; i++) {
		struct change *c = &CH.c[i];

		if (c->active && c->pid > 0) {
			if ((rc = proc_wait(c->pid, 0)) == -2)
				continue;
			if (step_done(c, rc) != 0)
				return -1;
		}
		if (!c->active && change_due()) {
			long idx = pick((enum ch_kind)CH.plan[CH.plan_next]);

			if (idx < 0) {
				/* every order busy or cancelled: when no more come,
				 * the rest of the plan is dropped */
				if (soak.placed >= opt.orders && !changes_active()) {
					CH.dropped += CH.plan_n - CH.plan_next;
					say("changes: no order left to change; %ld changes dropped",
					    CH.plan_n - CH.plan_next);
					CH.plan_next = CH.plan_n;
				}
				continue;
			}
			change_begin(c, CH.plan_next++, idx);
		}
		if (c->active && c->pid == 0 && now_ms() >= c->retry_at) {
			if ((rc = step_start(c)) < 0)
				return -1;
			if (rc > 0) {
				c->retry_at = now_ms() + CH_RETRY_MS;
				if (now_ms() - c->t0 > CH_GIVE_UP_MS * (opt.failover ? 3 : 1)) {
					fail("changes: no box answering the API for %d s",
					     CH_GIVE_UP_MS / 1000);
					return -1;
				}
			}
		}
	}
	return 0;
}

int changes_pending(void)
{
	return CH.plan_next < CH.plan_n || changes_active();
}

void changes_cleanup(void)
{
	int i;

	for (i = 0; i < CH_SLOTS; i++) {
		if (CH.c[i].pid > 0) {
			kill(CH.c[i].pid, SIGKILL);
			proc_wait(CH.c[i].pid, 5000);
			CH.c[i].pid = 0;
		}
	}
}

void changes_print_figures(void)
{
	printf("changes_planned %ld\n", CH.plan_n);
	printf("changes_dropped %ld\n", CH.dropped);
	printf("change_steps_asked_again %ld\n", CH.steps_retried);
	printf("change_api_calls_unanswered %ld\n", CH.api_no_answer);
	printf("changes_on_orders_just_placed %ld\n", CH.soon);
	printf("orders_moved_off_sold_out_event %ld\n", soak.sold_out_moved);
}
