/*
 * paysink.c: a local Stripe-like payment provider for tests, soaks and
 * offline demos, as tools/mailsink is a local mail provider.  As strict as
 * Stripe (API version 2024-06-20) where the box can go wrong, so that a box
 * that gets Stripe wrong fails against it.
 *
 *   paysink --listen 127.0.0.1:0 [--cert F --key F] --api-key sk_test_...|--api-key-file F
 *           --record FILE [--port-file F] [--public-url URL]
 *           [--webhook-url URL --webhook-secret whsec_...|--webhook-secret-file F
 *            [--webhook-secret-2 S]
 *            [--webhook-ca F] [--webhook-events LIST] [--webhook-timeout-ms N]
 *            [--retry-base-ms N] [--retry-cap-ms N] [--webhook-attempts N]]
 *           [--dup-pct P] [--drop-pct P] [--delay-ms-max N] [--reorder]
 *           [--fail-5xx-pct P] [--refund-fail-pct P] [--slow-ms N] [--seed S]
 *           [--record-at-exit] [--refund-pending] [--request-log FILE]
 *
 * It serves plain HTTP on loopback only, or HTTPS (--cert and --key, PEM;
 * libmicrohttpd with GnuTLS, TLS 1.2 or later) on any address.  The subset
 * of Stripe's API a ticket seller uses, shaped as api.stripe.com shapes it,
 * so that the official stripe npm package accepts it
 * (tests/browser/paysink_stripe.mjs checks that):
 *
 *   POST /v1/checkout/sessions             mode=payment, line_items with
 *        price_data, success_url, cancel_url, client_reference_id,
 *        customer_email, expires_at, metadata, payment_method_types,
 *        payment_intent_data[metadata]   -> a checkout.session, status open
 *   GET  /v1/checkout/sessions/{id}
 *   POST /v1/checkout/sessions/{id}/expire   open -> expired, else 400
 *   POST /v1/refunds                       payment_intent (or charge),
 *        amount (default: what is left), reason, metadata -> a refund
 *   GET  /v1/refunds[?payment_intent=&charge=&limit=]   a list, newest first
 *   GET  /v1/refunds/{id}, /v1/payment_intents/{id}, /v1/charges/{id},
 *        /v1/disputes/{id}
 *
 * Money as Stripe has it (currency.c): amounts in Stripe's units (cents;
 * zero-decimal currencies in whole units; ISK and UGX in whole units
 * written as cents, a multiple of 100; three-decimal currencies with a last
 * digit 0), only the currencies Stripe takes, a session's total 0 (a
 * no-cost order: no payment intent, a Customer, "no_payment_required") or
 * at least Stripe's minimum charge (USD 0.50, EUR 0.50, GBP 0.30, ...) and
 * at most 99999999.  expires_at from 30 minutes to less than 24 hours after
 * the session's creation (the time its create request came, on the business
 * clock).  payment_method_types: Stripe's values, each in a currency it
 * takes (payment.c); without it, card and the currency's bank debit.
 *
 * Bodies are x-www-form-urlencoded with Stripe's brackets (form.c);
 * authentication is "Authorization: Bearer <--api-key>" or HTTP Basic with
 * the key as user (else 401).  Errors are Stripe's
 * {"error": {"type", "code", "message", "param"}} with Stripe's statuses
 * (api.c, checkout.c, refund.c).  Every answer carries Request-Id: req_...
 *
 * The buyer's side (page.c): each session's url is <base>/pay/{id}, a
 * small HTML page with a button for each payment method it offers; card
 * pays at once (a payment intent "succeeded", a charge), a delayed method
 * (SEPA Direct Debit, ...) completes the session unpaid with the payment
 * intent "processing" until it settles (payment.c); then 303 to
 * success_url.  The test controls under /_paysink/ (loopback clients only,
 * no key; control.c lists their parameters): pay/{cs}[?method=], expire/,
 * settle/{pi}?outcome=succeeded|failed, refund/{pi} (a Dashboard refund),
 * refund-pending/{pi}?on=, refund-settle/{re}?outcome=, dispute/{pi},
 * dispute-close/{dp}?outcome=won|lost, the record, the business clock
 * (+S seconds, for expiry and key age), and the signature check.
 *
 * Invariants:
 *   - no payment is charged twice: a session is paid only while open, under
 *     the one lock, and a paid session's charge count is 1 for ever;
 *   - refunds never exceed the charge (charge_already_refunded once it is
 *     all refunded; amount_too_large for more than what is left; a pending
 *     refund counts, a failed one no longer does); a payment whose charge
 *     has not succeeded, or that is disputed, is not refunded (refund.c);
 *   - an Idempotency-Key (per API key) runs its request once: the same
 *     parameters get the stored answer again (Idempotent-Replayed: true,
 *     Original-Request: the first Request-Id), other parameters or another
 *     endpoint 400 idempotency_error, a second request while the first runs
 *     409 idempotency_key_in_use; a 5xx answer or parameters that failed
 *     validation store nothing, so a retry runs afresh; a key is forgotten
 *     at 24 hours old on the business clock, as Stripe prunes them (idem.c);
 *   - a session expires at its expires_at by itself (checked on every
 *     request and by the delivery threads) and its expired event is made;
 *   - every event is delivered at least once unless the dice dropped it or
 *     a copy ran out of attempts, and the record says which (webhook.c).
 *
 * Webhooks (with --webhook-url and --webhook-secret): Stripe event objects
 * (api_version, created, data.object, livemode, pending_webhooks, request
 * {id, idempotency_key} of the API request that made it or nulls, type)
 * of the types --webhook-events lists, default all paysink makes:
 * checkout.session.completed, .expired, .async_payment_succeeded,
 * .async_payment_failed; charge.refunded, charge.refund.updated (a
 * refund's change, as Stripe sent it for card refunds at 2024-06-20),
 * charge.dispute.created, charge.dispute.closed; refund.created,
 * refund.updated, refund.failed (refund.c says which when).
 * POSTed with Stripe-Signature: t=<real unix seconds>,v1=<HMAC-SHA256>
 * (sig.c), a second v1 with --webhook-secret-2; retried with exponential
 * backoff.
 *
 * Faults, for the soaks: --dup-pct, --drop-pct, --delay-ms-max and
 * --reorder act on events (webhook.c says how); --fail-5xx-pct P answers P%
 * of API POSTs with 500 api_error before the idempotency table is consulted
 * (nothing stored, the key stays unknown), --refund-fail-pct P the same for
 * POST /v1/refunds only; --slow-ms N holds each API POST N ms with its key
 * in flight (so a concurrent retry meets 409); --refund-pending makes every
 * new refund "pending" until /_paysink/refund-settle ends it.  The dice are
 * one xorshift64* stream seeded by --seed S (default 1), drawn under the
 * lock in arrival order, as mailsink draws them: the same seed and the same
 * arrivals give the same faults.
 *
 * --request-log FILE appends one JSON line per request under /v1/,
 * {"method", "path", "query", "body"}, the raw text as received (reqlog.c),
 * for a judge of the box's requests against Stripe's OpenAPI description.
 *
 * The record (--record FILE) is the whole state as JSON, rewritten
 * atomically (temp file, fsync, rename, fsync of the folder) after every
 * change (with --record-at-exit only when it stops: a benchmark's fast
 * provider, whose record of thousands of sessions would otherwise be
 * rewritten and flushed at every request); GET /_paysink/record answers the
 * same bytes, from memory (record.c):
 *   {"sessions": [{"id", "client_reference_id", "metadata", "amount_total",
 *                  "currency", "status", "payment_status",
 *                  "payment_method_types", "payment_intent",
 *                  "payment_intent_status", "payment_method" (the type
 *                  paid with), "charge", "charge_status", "failure_code",
 *                  "charges" (succeeded), "amount_refunded" (pending or
 *                  succeeded), "amount_refund_pending", "disputed",
 *                  "submitted_at", "settled_at", "customer", "created",
 *                  "expires_at", "completed_at", "paid_at" (the money
 *                  arrived), "expired_at", "customer_email"}],
 *    "refunds": [{"id", "payment_intent", "charge", "session", "amount",
 *                 "currency", "status", "failure_reason", "reason",
 *                 "source" ("api" or "dashboard"), "idempotency_key",
 *                 "created", "settled_at"}],
 *    "disputes": [{"id", "charge", "payment_intent", "session", "amount",
 *                  "currency", "reason", "status", "created", "closed_at"}],
 *    "events": [{"id", "type", "session", "delivered_ok" (2xx answers),
 *                "attempts", "gave_up", "dropped", "duplicated", "created"}],
 *    "idempotency": {"keys" (answers stored), "replays", "conflicts",
 *                    "in_use", "pruned" (forgotten at 24 hours)},
 *    "api_requests" (every request under /v1/), "injected_5xx",
 *    "clock_offset", "refund_pending"}
 * A soak judges from it alone.
 *
 * A missing value, an unknown option or an out-of-range number: a message
 * and exit 2.  Prints the port on stdout (and into --port-file, renamed
 * into place); one line per webhook attempt.  Stops on SIGTERM or SIGINT:
 * the server first, then the delivery threads, the record written last.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "paysink.h"

struct ps_opts ps_opts;
char ps_base_url[256];
pthread_mutex_t ps_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_int ps_stopping;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "paysink: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

/* ======================== options ======================================== */

static long opt_long(const char *name, const char *v, long min, long max)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < min || n > max)
		die("%s wants a whole number from %ld to %ld, not '%s'", name, min, max, v);
	return n;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: paysink --listen 127.0.0.1:PORT [--cert F --key F] --api-key sk_test_...\n"
		"               --record FILE [--port-file F] [--public-url URL]\n"
		"               [--webhook-url URL --webhook-secret whsec_... [--webhook-secret-2 S]\n"
		"                [--webhook-ca F] [--webhook-events LIST] [--webhook-timeout-ms N]\n"
		"                [--retry-base-ms N] [--retry-cap-ms N] [--webhook-attempts N]]\n"
		"               [--dup-pct P] [--drop-pct P] [--delay-ms-max N] [--reorder]\n"
		"               [--fail-5xx-pct P] [--refund-fail-pct P] [--slow-ms N] [--seed S]\n"
		"               [--record-at-exit] [--refund-pending] [--request-log FILE]\n");
	exit(2);
}

/* the first line of the file at path (a key kept out of the process list) */
static const char *file_line(const char *opt, const char *path)
{
	char buf[512];
	FILE *f = fopen(path, "r");

	if (!f || !fgets(buf, sizeof buf, f))
		die("%s: cannot read a line from %s", opt, path);
	fclose(f);
	buf[strcspn(buf, "\r\n")] = '\0';
	return strdup(buf);
}

/* the options that take a string */
static int opt_string(const char *a, const char *v)
{
	if (strcmp(a, "--api-key-file") == 0) {
		ps_opts.api_key = file_line(a, v);
		return 1;
	}
	if (strcmp(a, "--webhook-secret-file") == 0) {
		ps_opts.webhook_secret = file_line(a, v);
		return 1;
	}
	static const struct { const char *name; size_t off; } strs[] = {
		{ "--listen", offsetof(struct ps_opts, listen) },
		{ "--cert", offsetof(struct ps_opts, cert) },
		{ "--key", offsetof(struct ps_opts, key) },
		{ "--api-key", offsetof(struct ps_opts, api_key) },
		{ "--record", offsetof(struct ps_opts, record) },
		{ "--port-file", offsetof(struct ps_opts, port_file) },
		{ "--public-url", offsetof(struct ps_opts, public_url) },
		{ "--webhook-url", offsetof(struct ps_opts, webhook_url) },
		{ "--webhook-secret", offsetof(struct ps_opts, webhook_secret) },
		{ "--webhook-secret-2", offsetof(struct ps_opts, webhook_secret2) },
		{ "--webhook-ca", offsetof(struct ps_opts, webhook_ca) },
		{ "--webhook-events", offsetof(struct ps_opts, webhook_events) },
		{ "--request-log", offsetof(struct ps_opts, request_log) },
	};
	size_t i;

	for (i = 0; i < sizeof strs / sizeof strs[0]; i++) {
		if (strcmp(a, strs[i].name) == 0) {
			if (!*v)
				die("%s wants a value, not an empty string", a);
			*(const char **)((char *)&ps_opts + strs[i].off) = v;
			return 1;
		}
	}
	return 0;
}

/* the options that take a number */
static int opt_number(const char *a, const char *v)
{
	static const struct { const char *name; size_t off; long min, max; } nums[] = {
		{ "--webhook-timeout-ms", offsetof(struct ps_opts, webhook_timeout_ms), 1, 600000 },
		{ "--retry-base-ms", offsetof(struct ps_opts, retry_base_ms), 1, 86400000 },
		{ "--retry-cap-ms", offsetof(struct ps_opts, retry_cap_ms), 1, 86400000 },
		{ "--webhook-attempts", offsetof(struct ps_opts, webhook_attempts), 1, 1000 },
		{ "--dup-pct", offsetof(struct ps_opts, dup_pct), 0, 100 },
		{ "--drop-pct", offsetof(struct ps_opts, drop_pct), 0, 100 },
		{ "--delay-ms-max", offsetof(struct ps_opts, delay_ms_max), 0, 3600000 },
		{ "--fail-5xx-pct", offsetof(struct ps_opts, fail_5xx_pct), 0, 100 },
		{ "--refund-fail-pct", offsetof(struct ps_opts, refund_fail_pct), 0, 100 },
		{ "--slow-ms", offsetof(struct ps_opts, slow_ms), 0, 600000 },
	};
	size_t i;

	for (i = 0; i < sizeof nums / sizeof nums[0]; i++) {
		if (strcmp(a, nums[i].name) == 0) {
			*(long *)((char *)&ps_opts + nums[i].off) =
				opt_long(a, v, nums[i].min, nums[i].max);
			return 1;
		}
	}
	if (strcmp(a, "--seed") == 0) {
		ps_opts.seed = (uint64_t)opt_long(a, v, 0, LONG_MAX);
		return 1;
	}
	return 0;
}

static void opts_check(void)
{
	if (!ps_opts.listen || !ps_opts.api_key || !ps_opts.record)
		die("--listen, --api-key and --record are required (--help for the usage)");
	if (!ps_opts.cert != !ps_opts.key)
		die("--cert and --key go together");
	if (strncmp(ps_opts.api_key, "sk_", 3) != 0 && strncmp(ps_opts.api_key, "rk_", 3) != 0)
		die("--api-key wants a secret key, sk_test_..., not '%s'", ps_opts.api_key);
	if (!ps_opts.webhook_url != !ps_opts.webhook_secret)
		die("--webhook-url and --webhook-secret go together");
	if (ps_opts.webhook_url && strncmp(ps_opts.webhook_url, "http://", 7) != 0 &&
	    strncmp(ps_opts.webhook_url, "https://", 8) != 0)
		die("--webhook-url wants an http:// or https:// URL, not '%s'", ps_opts.webhook_url);
	if (ps_opts.webhook_secret2 && !ps_opts.webhook_secret)
		die("--webhook-secret-2 needs --webhook-secret");
	if (ps_opts.retry_cap_ms < ps_opts.retry_base_ms)
		die("--retry-cap-ms (%ld) is below --retry-base-ms (%ld)", ps_opts.retry_cap_ms,
		    ps_opts.retry_base_ms);
	if (ps_opts.public_url && strncmp(ps_opts.public_url, "http://", 7) != 0 &&
	    strncmp(ps_opts.public_url, "https://", 8) != 0)
		die("--public-url wants an http:// or https:// URL, not '%s'", ps_opts.public_url);
	if (strlen(ps_opts.record) > PATH_MAX - 8)
		die("--record: the path is too long");
	if (ps_opts.request_log && reqlog_open(ps_opts.request_log) != 0)
		die("--request-log %s: %s", ps_opts.request_log, strerror(errno));
}

static void opts_parse(int argc, char **argv)
{
	int i;

	ps_opts.webhook_timeout_ms = 10000;
	ps_opts.retry_base_ms = 1000;
	ps_opts.retry_cap_ms = 60000;
	ps_opts.webhook_attempts = 20;
	ps_opts.seed = 1;
	ps_opts.webhook_events = wh_all_types;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
			usage();
		if (strcmp(a, "--reorder") == 0) {
			ps_opts.reorder = 1;
			continue;
		}
		if (strcmp(a, "--record-at-exit") == 0) {
			ps_opts.record_at_exit = 1;
			continue;
		}
		if (strcmp(a, "--refund-pending") == 0) {
			ps_opts.refund_pending = 1;
			continue;
		}
		if (strncmp(a, "--", 2) != 0)
			die("unexpected argument '%s' (--help for the usage)", a);
		if (!v || strncmp(v, "--", 2) == 0)
			die("%s wants a value", a);
		i++;
		if (!opt_string(a, v) && !opt_number(a, v))
			die("unknown option %s (--help for the usage)", a);
	}
	opts_check();
}

/* ======================== the socket ===================================== */

/* host and port of spec ("127.0.0.1:0", "[::1]:0") */
static void listen_split(const char *spec, char *host, size_t size, const char **port)
{
	const char *colon;

	if (spec[0] == '[') {
		const char *close = strchr(spec, ']');

		if (!close || close[1] != ':' || (size_t)(close - spec - 1) >= size)
			die("--listen wants [::1]:PORT or 127.0.0.1:PORT, not '%s'", spec);
		memcpy(host, spec + 1, (size_t)(close - spec - 1));
		host[close - spec - 1] = '\0';
		*port = close + 2;
		return;
	}
	colon = strrchr(spec, ':');
	if (!colon || (size_t)(colon - spec) >= size)
		die("--listen wants 127.0.0.1:PORT or [::1]:PORT, not '%s'", spec);
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	*port = colon + 1;
}

static int addr_is_loopback(const struct addrinfo *ai)
{
	if (ai->ai_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)ai->ai_addr)->sin_addr.s_addr) >> 24) ==
		       127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)ai->ai_addr)->sin6_addr);
}

/* A listening socket: loopback only without TLS.  Returns the fd; *port,
 * *ipv6, and ps_base_url set. */
static int listen_on(const char *spec, int tls, int *port, int *ipv6)
{
	char host[128];
	const char *portstr;
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof ss;
	int fd, one = 1, rc;

	listen_split(spec, host, sizeof host, &portstr);
	memset(&hints, 0, sizeof hints);
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE;
	hints.ai_socktype = SOCK_STREAM;
	rc = getaddrinfo(host, portstr, &hints, &ai);
	if (rc != 0)
		die("--listen %s: a numeric address and port, please (%s)", spec, gai_strerror(rc));
	if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
		die("--listen %s: not an IP address", spec);
	if (!tls && !addr_is_loopback(ai))
		die("--listen %s: plain HTTP on loopback (127.0.0.0/8, ::1) only; give --cert "
		    "and --key for another address", spec);
	*ipv6 = ai->ai_family == AF_INET6;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die("socket: %s", strerror(errno));
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0)
		die("--listen %s: %s", spec, strerror(errno));
	freeaddrinfo(ai);
	if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
		die("getsockname: %s", strerror(errno));
	*port = ss.ss_family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
		: ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	if (ps_opts.public_url)
		snprintf(ps_base_url, sizeof ps_base_url, "%s", ps_opts.public_url);
	else
		snprintf(ps_base_url, sizeof ps_base_url, *ipv6 ? "%s://[%s]:%d" : "%s://%s:%d",
			 tls ? "https" : "http", host, *port);
	while (strlen(ps_base_url) > 0 && ps_base_url[strlen(ps_base_url) - 1] == '/')
		ps_base_url[strlen(ps_base_url) - 1] = '\0';
	return fd;
}

/* the whole file as a string, or exit 2 naming what */
static char *slurp(const char *path, const char *what)
{
	FILE *f = fopen(path, "rb");
	char *text = NULL;
	size_t len = 0, cap = 0, n;

	if (!f)
		die("%s %s: %s", what, path, strerror(errno));
	do {
		if (len + 4096 + 1 > cap) {
			cap = cap ? cap * 2 : 8192;
			text = realloc(text, cap);
			if (!text)
				die("out of memory");
		}
		n = fread(text + len, 1, cap - len - 1, f);
		len += n;
	} while (n > 0);
	fclose(f);
	text[len] = '\0';
	return text;
}

static void port_announce(int port)
{
	char buf[32], tmp[PATH_MAX];
	int n = snprintf(buf, sizeof buf, "%d\n", port);
	FILE *f;

	printf("%s", buf);
	fflush(stdout);
	if (!ps_opts.port_file)
		return;
	/* renamed into place: a reader never sees half a number */
	snprintf(tmp, sizeof tmp, "%s.tmp", ps_opts.port_file);
	f = fopen(tmp, "w");
	if (!f || fwrite(buf, 1, (size_t)n, f) != (size_t)n || fclose(f) != 0 ||
	    rename(tmp, ps_opts.port_file) != 0)
		die("--port-file %s: %s", ps_opts.port_file, strerror(errno));
}

int main(int argc, char **argv)
{
	sigset_t stop;
	char *cert = NULL, *key = NULL;
	int fd, port = 0, ipv6 = 0, sig = 0;

	opts_parse(argc, argv);
	/* SIGTERM and SIGINT blocked in every thread, taken by sigwait below */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	signal(SIGPIPE, SIG_IGN);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		die("curl_global_init failed");
	state_init();
	if (ps_opts.cert) {
		cert = slurp(ps_opts.cert, "--cert");
		key = slurp(ps_opts.key, "--key");
	}
	fd = listen_on(ps_opts.listen, cert != NULL, &port, &ipv6);
	pthread_mutex_lock(&ps_lock);
	record_write();
	pthread_mutex_unlock(&ps_lock);
	if (http_start(fd, ipv6, cert, key) != 0)
		die("cannot start the HTTP%s server on %s (the certificate and key?)",
		    cert ? "S" : "", ps_opts.listen);
	if (key)
		memset(key, 0, strlen(key));
	free(cert);
	free(key);
	if (wh_start() != 0)
		die("cannot start the delivery threads");
	port_announce(port);

	while (sigwait(&stop, &sig) != 0)
		;
	ps_stopping = 1;
	http_stop();
	wh_stop();
	pthread_mutex_lock(&ps_lock);
	record_write();
	state_free();
	pthread_mutex_unlock(&ps_lock);
	curl_global_cleanup();
	return 0;
}
