/*
 * shopfix.h: the shop's test fixture, shared by the tests of the shop and
 * its payments (test_shop.c, test_payments.c): a shop listening in the
 * test's process under the fake clock set to the real time, tools/paysink
 * as its payment provider, the shop's jobs run here one call each, a buyer
 * (curl) and the webhook's signature made by the official stripe package.
 * Every test that includes it runs with F set up by sf_setup_with.
 */
#ifndef SD_TESTS_SHOPFIX_H
#define SD_TESTS_SHOPFIX_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "handler.h"
#include "shop.h"
#include "testutil.h"
#include "tickets.h"

#define KEY "sk_test_shop"
#define SECRET "whsec_shop_current"
#define OLD_SECRET "whsec_shop_previous"
#define SIGN_SCRIPT "tests/browser/stripe_sign.mjs"
#define MIN_MS (60 * 1000LL)
#define WAIT_MS 15000

struct fx {
	const struct tu_env *e;
	pid_t ps;
	int ps_port, port;
	char ps_url[64], url[64], record[400], key_file[400], secret_file[400], maildir[400];
	char requests[400];		/* every request paysink took, one JSON line each */
	char certs[400], ca[420];		/* a TLS shop's: its test CA */
	struct shop *shop;
	struct tickets_env *tenv;
	struct handler_ctx *ctx;
	int64_t event_id;
};

extern struct fx F;

/* What a test's shop and provider are started with. */
struct variant {
	const char *faults[6];		/* paysink's fault options */
	int64_t rate_per_min;		/* 0: 100 */
	const char *proxies;		/* shop_trusted_proxies */
	int capacity;			/* 0: 4 */
	int no_provider;		/* payment_provider = none */
	int tls;			/* the shop with its own certificate */
	int unpaid_share;		/* shop_unpaid_share; 0: 100 (no line) */
};

struct resp {
	long status;
	char *body;
	size_t len;
	char location[2048];
	char cookie[128];		/* sd_csrf=... from Set-Cookie */
	char cookie_line[256];		/* the whole Set-Cookie, attributes and all */
	char retry_after[16];
	char referrer_policy[32];
};

/* set-up and tear-down: the shop, paysink with v's options, the jobs'
 * context, one event (4 seats at 12.50 EUR unless v says) */
int64_t sf_real_ms(void);
void sf_write_secret(const char *path, const char *text);
int sf_setup_with(void **state, const struct variant *v);
int sf_teardown(void **state);

/* HTTP: one request (headers NULL-terminated "Name: value", may be NULL);
 * GET of a shop path */
void sf_http(const char *method, const char *url, const char *body,
	     const char *const *headers, struct resp *r);
void sf_resp_free(struct resp *r);
void sf_get(const char *path, const char *const *headers, struct resp *r);

/* a buyer: the event page's form token and its cookie; the checkout form
 * posted (xff: an X-Forwarded-For, may be NULL), or with raw fields; a
 * checkout that reaches the payment page ([out] hold, HOLD_ID_MAX, and the
 * session, STRIPE_ID_MAX); the buyer paying on paysink's page */
void sf_form_token(char *tok, size_t size, char *cookie, size_t csize);
void sf_checkout_as(int seats, const char *name, const char *email, const char *xff,
		    struct resp *r);
void sf_checkout_raw(const char *fields, struct resp *r);
void sf_checkout(int seats, const char *email, char *hold, char *session);
void sf_pay(const char *session);

/* paysink's record (json_decref it), its events of type delivered (2xx) */
json_t *sf_record(void);
int sf_delivered(const char *type);

/* the test's database: a count; waited for (WAIT_MS at most) */
int64_t sf_count(const char *sql);
void sf_wait_count(const char *sql, int64_t want);
void sf_wait_delivered(const char *type, int want);

/* the shop's jobs, run here: one job of kind with {"key": id} */
enum job_outcome sf_run_job(handler_fn fn, const char *kind, const char *key, int64_t id);
/* the buyer's address of the hold's page: /h/<its link><query> */
void sf_hold_path(const char *hold, const char *query, char *path, size_t size);
enum job_outcome sf_reconcile(const char *hold);
int64_t sf_refund_of(const char *hold);

/* the box's jobs, run to the end in this process (the provider is
 * paysink); an order paid through the shop, [out] pid its public id (16) */
void sf_drain(void);
void sf_paid_order(const char *email, char *pid);

/* the webhook: the header the official package makes for payload, signed
 * with secret at ts (0: now); a POST of it; a checkout.session.completed
 * event (malloc'd) for the session as paysink has it */
void sf_package_header(const char *payload, const char *secret, long long ts, char *out,
		       size_t size);
void sf_hook_post(const char *payload, const char *sig_header, struct resp *r);
char *sf_completed_event(const char *session, const char *event_id);

#endif
