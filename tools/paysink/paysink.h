/*
 * paysink.h: what the parts of tools/paysink share (paysink.c says what the
 * program is).  One mutex, ps_lock, guards every piece of state below: the
 * sessions and their payments, refunds, disputes, events, the idempotency
 * table, the counters, the dice, the delivery queue, the record file and the
 * request log.  Functions marked "lock held" expect the caller to hold it.
 */
#ifndef PAYSINK_H
#define PAYSINK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#define PS_API_VERSION "2024-06-20"	/* events' api_version, answers' Stripe-Version */
#define PS_BODY_MAX (1024 * 1024)	/* larger request bodies get 413 */
#define PS_ID_MAX 80			/* every id we make is shorter */
#define PS_AMOUNT_MAX 99999999LL	/* Stripe's largest charge, in its units */
#define PS_IDEM_TTL 86400		/* Stripe forgets a key at 24 hours old */
#define PS_SIG_TOLERANCE 300		/* seconds either side, for /_paysink/verify */

/* ---- options (paysink.c) ------------------------------------------------ */

struct ps_opts {
	const char *listen;		/* "127.0.0.1:0" */
	const char *cert, *key;		/* both or neither: HTTPS */
	const char *api_key;		/* the one secret key accepted */
	const char *record;		/* the record file */
	const char *port_file;		/* may be NULL */
	const char *public_url;		/* base of session urls; NULL: from --listen */
	const char *webhook_url;	/* NULL: events are recorded, never sent */
	const char *webhook_secret;	/* whsec_...: signs v1 */
	const char *webhook_secret2;	/* a second v1 (rotation), or NULL */
	const char *webhook_ca;		/* CA file for an https webhook URL, or NULL */
	const char *webhook_events;	/* comma-separated event types to make */
	long webhook_timeout_ms;	/* one attempt's limit (10000) */
	long retry_base_ms;		/* first retry delay (1000) */
	long retry_cap_ms;		/* largest retry delay (60000) */
	long webhook_attempts;		/* attempts per copy (20) */
	long dup_pct;			/* events delivered twice, % */
	long drop_pct;			/* events never delivered, % */
	long delay_ms_max;		/* each copy waits 0..N ms first */
	int reorder;			/* a session's later event goes first */
	int record_at_exit;		/* the record file written when it stops only */
	long fail_5xx_pct;		/* API POSTs answered 500, % */
	long refund_fail_pct;		/* refund POSTs answered 500, % */
	long slow_ms;			/* API POSTs held with their key in flight */
	int refund_pending;		/* new refunds answer "pending" */
	const char *request_log;	/* one JSON line per /v1/ request, or NULL */
	uint64_t seed;			/* the dice's seed (1) */
};

extern struct ps_opts ps_opts;
extern char ps_base_url[256];		/* "http://127.0.0.1:PORT", no slash */
extern pthread_mutex_t ps_lock;
extern atomic_int ps_stopping;		/* set on SIGTERM/SIGINT */

/* ---- state (state.c) ------------------------------------------------------ */

enum ps_status { PS_OPEN, PS_COMPLETE, PS_EXPIRED };
/* a payment intent's status and its charge's, as Stripe names them */
enum ps_pi_status { PI_NONE, PI_PROCESSING, PI_SUCCEEDED, PI_REQUIRES_PM, PI_CANCELED };
enum ps_charge_status { CH_NONE, CH_PENDING, CH_SUCCEEDED, CH_FAILED };
enum ps_refund_status { RE_PENDING, RE_SUCCEEDED, RE_FAILED };
enum ps_dispute_status { DP_NEEDS_RESPONSE, DP_WON, DP_LOST };

struct ps_line {
	char *name;			/* product_data[name] */
	long long unit_amount;		/* Stripe's units (currency.c) */
	long long quantity;
};

/* a session's payment: its payment intent and its one charge (payment.c) */
struct ps_payment {
	char pi[PS_ID_MAX];		/* pi_... once submitted, else "" */
	char charge[PS_ID_MAX];		/* ch_..., likewise */
	char pm[PS_ID_MAX];		/* pm_..., the payment method used */
	char method[24];		/* its type: "card", "sepa_debit", ... */
	enum ps_pi_status status;
	enum ps_charge_status charge_status;
	char failure_code[40];		/* a failed delayed payment: why */
	int64_t created;		/* when it was submitted */
	int64_t settled_at;		/* a delayed one: when it succeeded or failed */
	long long refunded;		/* refunds pending or succeeded, Stripe's units */
	long long refund_pending;	/* of which still pending */
	int refunds_pending_mode;	/* its new refunds answer "pending" */
	int disputed;			/* a dispute was opened on its charge */
};

struct ps_session {
	char id[PS_ID_MAX];		/* cs_test_... */
	enum ps_status status;
	long long amount_total;
	char currency[4];		/* lower case */
	char *client_reference_id;	/* or NULL; so are the next three */
	char *customer_email;
	char *success_url;
	char *cancel_url;
	json_t *metadata;		/* an object, maybe empty */
	json_t *pi_metadata;		/* payment_intent_data[metadata] */
	json_t *pm_types;		/* the payment method types offered: strings */
	struct ps_line *lines;
	size_t n_lines;
	int64_t created, expires_at;	/* business clock, unix seconds */
	int64_t completed_at;		/* the buyer paid (or a delayed payment went in) */
	int64_t paid_at, expired_at;	/* 0: not (yet); paid: the money arrived */
	char customer[PS_ID_MAX];	/* cus_... made for a no-cost order, else "" */
	int charges;			/* successful charges (0 or 1, never more) */
	struct ps_payment pay;
};

struct ps_refund {
	char id[PS_ID_MAX];		/* re_... */
	char pi[PS_ID_MAX];
	char charge[PS_ID_MAX];
	char session[PS_ID_MAX];
	long long amount;
	char currency[4];
	enum ps_refund_status status;
	char failure_reason[40];	/* when failed */
	int dashboard;			/* made in the Dashboard, not by the API */
	char *idempotency_key;		/* or NULL */
	char *reason;			/* or NULL */
	json_t *metadata;
	int64_t created;
	int64_t settled_at;		/* a pending one: when it succeeded or failed */
};

struct ps_dispute {
	char id[PS_ID_MAX];		/* dp_... */
	char pi[PS_ID_MAX];
	char charge[PS_ID_MAX];
	char session[PS_ID_MAX];
	long long amount;
	char currency[4];
	char reason[40];		/* "fraudulent", ... */
	enum ps_dispute_status status;
	int64_t created;
	int64_t closed_at;		/* 0 while open */
};

struct ps_event {
	char id[PS_ID_MAX];		/* evt_... */
	char type[48];
	char session[PS_ID_MAX];	/* the session it is about */
	char *payload;			/* the exact bytes every attempt sends */
	int64_t created;
	long delivered_ok;		/* 2xx answers, over every copy */
	long attempts;			/* HTTP attempts, over every copy */
	long gave_up;			/* copies that ran out of attempts */
	int dropped;			/* never queued (--drop-pct) */
	int duplicated;			/* queued twice (--dup-pct) */
};

struct ps_counts {
	long api_requests;		/* every request under /v1/ */
	long injected_5xx;		/* answered 500 by --fail-5xx-pct/--refund-fail-pct */
	long idem_replays;		/* stored answers sent again */
	long idem_conflicts;		/* a key reused with other parameters or endpoint */
	long idem_in_use;		/* 409: the key's first request still running */
	long idem_pruned;		/* keys forgotten at 24 hours old */
};

extern struct ps_counts ps_counts;

void state_init(void);
void state_free(void);
/* business clock (unix seconds + the /_paysink/clock offset); real clock */
int64_t ps_now(void);
int64_t ps_real_now(void);
void ps_clock_advance(int64_t seconds);		/* lock held */
int64_t ps_clock_offset(void);			/* lock held */
/* prefix and n random characters of [0-9A-Za-z] into out */
void ps_rand_id(char *out, size_t size, const char *prefix, int n);
/* one roll of the dice: 1 with probability pct% (lock held); a number 0..max */
int ps_dice_roll(long pct);
uint64_t ps_dice_upto(uint64_t max);

/* the kinds of object kept, each in an array that only grows */
enum ps_kind { PS_SESSIONS, PS_REFUNDS, PS_DISPUTES, PS_EVENTS, PS_KINDS };
/* a new zeroed refund, dispute or event, kept, with a fresh id and created
 * now (lock held); NULL when out of memory */
void *state_new(enum ps_kind kind);
/* the object of kind whose id is id, or NULL; how many; the i-th (lock held) */
void *state_find(enum ps_kind kind, const char *id);
size_t state_count(enum ps_kind kind);
void *state_at(enum ps_kind kind, size_t i);
/* give s an id and keep it, created at the given time (lock held): 0 or -1 */
int state_session_add(struct ps_session *s, int64_t created);
void state_session_free(struct ps_session *s);	/* one never added */
/* the session whose payment intent or charge is pi_or_charge */
struct ps_session *state_session_by_pi(const char *pi_or_charge);

/* state changes; each queues its event; "" for ok, else why not (lock held) */
const char *state_expire(struct ps_session *s);
void state_sweep_expiry(void);			/* expire the sessions past expires_at */
/* the API objects, as Stripe shapes them; caller json_decref()s */
json_t *session_json(const struct ps_session *s);
/* its status and payment_status, as Stripe names them */
const char *session_status_name(const struct ps_session *s);
const char *session_payment_status(const struct ps_session *s);
/* a string, or JSON null for NULL */
json_t *str_or_null(const char *s);
/* idempotency keys stored (answers kept) */
long idem_stored(void);

/* ---- the record (record.c), the request log (reqlog.c) ------------------- */

/* the record document, and its file rewritten (temp, fsync, rename) */
json_t *record_json(void);
char *record_text(void);			/* malloc'd, ends in a newline; lock held */
void record_write(void);			/* lock held */
/* write all of buf to fd; 0 or -1 */
int write_all(int fd, const char *buf, size_t len);
/* --request-log: open it (exit 2 when it cannot be); one line for a
 * request under /v1/ (lock held) */
int reqlog_open(const char *path);
void reqlog_line(const char *method, const char *path, const char *query, const char *body,
		 size_t len);

/* ---- payments (payment.c): payment intents, charges, method types ------- */

/* payment_method_types of a session create, checked against Stripe's values
 * and the currency; the default list when none was given.  0 or -1 and e. */
struct ps_err;
int pm_types_parse(json_t *p, const char *currency, json_t **out, struct ps_err *e);
/* 1 when type settles later (a delayed, asynchronous method) */
int pm_type_delayed(const char *type);
/* what the hosted page calls a method ("SEPA Direct Debit") */
const char *pm_type_label(const char *type);
/* pay s with method type (NULL: card); "" or why not, and *status the HTTP
 * status that fits (lock held) */
const char *state_pay(struct ps_session *s, const char *method, int *status);
/* a delayed payment settled: ok or failed with failure_code (lock held) */
const char *payment_settle(struct ps_session *s, int ok, const char *failure_code);
json_t *pi_json(const struct ps_session *s);
json_t *charge_json(const struct ps_session *s);
const char *pi_status_name(enum ps_pi_status st);
const char *charge_status_name(enum ps_charge_status st);

/* ---- money (currency.c) ---------------------------------------------------- */

/* 1 when Stripe takes cur (lower case) as a presentment currency */
int currency_supported(const char *cur);
/* the list Stripe names in its error, "usd, aed, ..." */
const char *currency_list(void);
/* 0, or -1 and e when amount breaks cur's rules (ISK, UGX: whole units;
 * three-decimal: a last digit 0); param names it */
int currency_amount_ok(const char *cur, long long amount, const char *param, struct ps_err *e);
/* Stripe's minimum charge in cur (its units), 0 when Stripe publishes none */
long long currency_minimum(const char *cur);
/* Stripe's units as "12.50 EUR" (zero-decimal currencies without the point,
 * ISK and UGX in whole units, three-decimal ones with three digits) */
void amount_format(char *out, size_t size, long long amount, const char *currency);
/* the same as Stripe writes it in its minimum message: "$0.50 usd" */
void amount_format_stripe(char *out, size_t size, long long amount, const char *currency);

/* ---- the idempotency table (idem.c) ----------------------------------------- */

struct ps_idem;
enum idem_look { IDEM_NEW, IDEM_REPLAY, IDEM_IN_USE, IDEM_OTHER_PARAMS, IDEM_OTHER_ENDPOINT };
/* look key up for api_key; IDEM_NEW adds it in flight and sets *e; IDEM_REPLAY
 * sets *e to the finished entry (lock held) */
enum idem_look idem_begin(const char *api_key, const char *key, const char *endpoint,
			  const unsigned char sha[32], struct ps_idem **e);
void idem_finish(struct ps_idem *e, int status, const char *body, const char *request_id);
void idem_forget(struct ps_idem *e);
int idem_status(const struct ps_idem *e);
const char *idem_body(const struct ps_idem *e);
const char *idem_request_id(const struct ps_idem *e);
const char *idem_endpoint(const struct ps_idem *e);
void idem_free_all(void);

/* ---- the form body (form.c) ------------------------------------------------- */

/* Stripe's x-www-form-urlencoded body ("a[b][0][c]=v") as a tree of JSON
 * objects with string leaves ("a[]=v" appends to an array).  NULL on a
 * malformed name, which goes into bad. */
json_t *form_parse(const char *body, size_t len, char *bad, size_t bad_size);
/* percent-decode s[0..len) ('+' is a space) into a malloc'd string */
char *form_unescape(const char *s, size_t len);

/* ---- one request and its answer (http.c) ------------------------------------ */

struct ps_req {
	const char *method;		/* "GET", "POST", ... */
	char path[512];			/* without the query, percent-decoded */
	char *uri;			/* as received: path and query, raw */
	char *body;			/* NUL-terminated */
	size_t len, cap;
	int too_big;
	int loopback;			/* the client is on loopback */
	void *conn;			/* the MHD_Connection */
};

struct ps_resp {
	int status;
	char *body;			/* malloc'd */
	const char *type;		/* Content-Type; NULL: application/json */
	char *location;			/* malloc'd Location, or NULL */
	char request_id[40];		/* "req_..." */
	int replayed;			/* Idempotent-Replayed: true */
	char original[40];		/* Original-Request: the key's first request */
	char idem_key[256];		/* echoed as Idempotency-Key when not "" */
	int api;			/* a Stripe API answer: Stripe-Version too */
};

/* the server on the listening socket fd; cert and key PEM text for HTTPS
 * (NULL: plain HTTP); 0 or -1 */
int http_start(int fd, int ipv6, char *cert, char *key);
void http_stop(void);
/* a header of the request, or NULL; a query argument, or NULL */
const char *req_header(const struct ps_req *rq, const char *name);
const char *req_query(const struct ps_req *rq, const char *name);
/* answer body (taken: freed by the caller of the handler) */
void resp_json(struct ps_resp *out, int status, json_t *doc);	/* steals doc */
void resp_text(struct ps_resp *out, int status, const char *type, char *body);

/* ---- Stripe errors (api.c) ---------------------------------------------------- */

struct ps_err {
	int status;			/* 0: no error */
	const char *type;		/* "invalid_request_error", ... */
	const char *code;		/* or NULL */
	char param[200];		/* "" for none */
	char message[700];
	int store;			/* an idempotent answer to keep */
};

void err_set(struct ps_err *e, int status, const char *type, const char *code, const char *param,
	     const char *fmt, ...) __attribute__((format(printf, 6, 7)));
json_t *err_json(const struct ps_err *e);

/* the /v1/ API (api.c), the checkout resources (checkout.c) */
void api_handle(struct ps_req *rq, struct ps_resp *out);
/* validate params and make the session, created at the time the request
 * came (lock held) */
struct ps_session *checkout_create(json_t *params, int64_t created, struct ps_err *e);
/* params helpers shared with api.c, refund.c and payment.c */
int param_allowed(json_t *obj, const char *prefix, const char *const *names, struct ps_err *e);
int param_int(json_t *obj, const char *name, const char *label, long long min, long long max,
	      int required, long long *out, struct ps_err *e);
int param_str(json_t *obj, const char *name, const char *label, size_t max, int required,
	      const char **out, struct ps_err *e);
int param_metadata(json_t *obj, const char *name, const char *label, json_t **out,
		   struct ps_err *e);
void param_missing(struct ps_err *e, const char *label);

/* ---- refunds (refund.c), disputes (dispute.c) ------------------------------- */

/* POST /v1/refunds (lock held) */
struct ps_refund *refund_create(json_t *params, const char *idem_key, struct ps_err *e);
/* a refund made in the Dashboard: amount (0: what is left), no key (lock held) */
struct ps_refund *refund_dashboard(struct ps_session *s, long long amount, struct ps_err *e);
/* a pending refund settled: ok, or failed with failure_reason (lock held) */
const char *refund_settle(struct ps_refund *r, int ok, const char *failure_reason);
json_t *refund_json(const struct ps_refund *r);
const char *refund_status_name(enum ps_refund_status st);
/* a cardholder's dispute on s's charge: amount (0: all of it), reason (lock
 * held); closing it won or lost */
struct ps_dispute *dispute_open(struct ps_session *s, long long amount, const char *reason,
				struct ps_err *e);
const char *dispute_close(struct ps_dispute *d, int won);
json_t *dispute_json(const struct ps_dispute *d);
const char *dispute_status_name(enum ps_dispute_status st);

/* ---- the hosted page (page.c), the test controls (control.c) ---------------- */

void page_handle(struct ps_req *rq, const char *id, struct ps_resp *out);
void control_handle(struct ps_req *rq, struct ps_resp *out);

/* ---- webhooks (webhook.c), signatures (sig.c) -------------------------------- */

/* make an event of type about session, with data.object obj (stolen), when
 * that type is enabled; queue its deliveries (lock held) */
void wh_event(const char *type, const char *session, json_t *obj);
/* the request the events made from now on came from (its Request-Id and
 * Idempotency-Key; NULL, NULL: none, as for what Stripe does by itself) */
void wh_request(const char *request_id, const char *idem_key);
/* every event type paysink makes, comma-separated: the default of
 * --webhook-events */
extern const char wh_all_types[];
int wh_start(void);
void wh_stop(void);
void wh_wake(void);	/* lock held */

/* "t=T,v1=HEX[,v1=HEX2]" for payload at time t, into out */
void sig_header(char *out, size_t size, int64_t t, const char *payload, size_t len,
		const char *secret, const char *secret2);
/* 1: header's t is within tolerance seconds of now and one of its v1 is the
 * HMAC-SHA256 of "t.payload" keyed with secret; 0 and *why otherwise */
int sig_verify(const char *header, const char *payload, size_t len, const char *secret,
	       int64_t now, int64_t tolerance, const char **why);

#endif
