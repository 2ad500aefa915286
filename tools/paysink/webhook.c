/*
 * webhook.c: events and their delivery, at least once, with the faults the
 * options order.
 *
 * An event is made under ps_lock when a session is paid, expires or its
 * delayed payment settles, a refund is made or settles, or a dispute opens
 * or closes (when --webhook-events lists its type; wh_all_types are all
 * those paysink makes, the default), with the object as it is at that
 * moment and, as Stripe fills request, the API request that caused it; its
 * payload bytes are fixed then and every attempt of every copy sends the
 * same bytes.  Each attempt is signed afresh with the real time (sig.c).
 * With a --webhook-url, the dice are drawn under the lock in event order,
 * one stream (--seed):
 *
 *   --drop-pct P      the event is never queued (recorded as dropped)
 *   --dup-pct P       a second copy is queued, independently
 *   --delay-ms-max N  each copy waits 0..N ms before its first attempt
 *   --reorder         each copy is held back until the same session's next
 *                     event has had its first attempt, or for 2 x N ms (2 s
 *                     when N is 0): the later event arrives first
 *
 * The queue is ordered by due time; WH_THREADS threads take from it (and
 * expire the sessions past their expires_at on the way, every 500 ms at
 * most).  An attempt succeeds on a 2xx answer; any other status (redirects
 * are not followed), a timeout or a connection error is retried after
 * --retry-base-ms, doubling up to --retry-cap-ms, until the copy has made
 * --webhook-attempts attempts (then it gives up, counted).
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "paysink.h"

#define WH_THREADS 4
#define WH_TICK_MS 500

struct wh_item {
	struct wh_item *next;
	struct ps_event *ev;
	int64_t due;			/* monotonic ms */
	long attempts;			/* made by this copy */
	const struct ps_event *after;	/* --reorder: wait for its first attempt */
	int held;			/* --reorder: waiting for the session's next event */
};

const char wh_all_types[] =
	"checkout.session.completed,checkout.session.expired,"
	"checkout.session.async_payment_succeeded,checkout.session.async_payment_failed,"
	"charge.refunded,charge.refund.updated,charge.dispute.created,charge.dispute.closed,"
	"refund.created,refund.updated,refund.failed";

static struct wh_item *queue;		/* by due time */
static char req_id[40];			/* the request events come from, or "" */
static char req_key[256];		/* its Idempotency-Key, or "" */
static pthread_cond_t wake;		/* on CLOCK_MONOTONIC */
static pthread_t threads[WH_THREADS];
static int n_threads;
static int wh_stopping;			/* under ps_lock */

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void queue_insert(struct wh_item *it)
{
	struct wh_item **p = &queue;

	while (*p && (*p)->due <= it->due)
		p = &(*p)->next;
	it->next = *p;
	*p = it;
}

static void queue_unlink(struct wh_item *it)
{
	struct wh_item **p;

	for (p = &queue; *p; p = &(*p)->next) {
		if (*p == it) {
			*p = it->next;
			it->next = NULL;
			return;
		}
	}
}

void wh_wake(void)
{
	pthread_cond_broadcast(&wake);
}

static int type_enabled(const char *type)
{
	const char *list = ps_opts.webhook_events, *p;
	size_t n = strlen(type);

	if (strcmp(list, "*") == 0)
		return 1;
	for (p = list; (p = strstr(p, type)); p += n)
		if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return 1;
	return 0;
}

/* --reorder: release the held copies of session's earlier events to go
 * after ev's first attempt; 1 when there were any */
static int reorder_release(const struct ps_event *ev, int64_t due)
{
	struct wh_item *it, *moved = NULL;
	int n = 0;

	for (it = queue; it;) {
		struct wh_item *next = it->next;

		if (it->held && it->ev != ev && strcmp(it->ev->session, ev->session) == 0) {
			queue_unlink(it);
			it->held = 0;
			it->after = ev;
			it->due = due;
			it->next = moved;
			moved = it;
			n++;
		}
		it = next;
	}
	while (moved) {
		it = moved;
		moved = it->next;
		queue_insert(it);
	}
	return n > 0;
}

/* queue ev's copies (lock held) */
static void wh_queue(struct ps_event *ev)
{
	int copies = 1, i, released = 0;
	int64_t now = mono_ms();
	long hold = ps_opts.delay_ms_max > 0 ? 2 * ps_opts.delay_ms_max : 2000;

	if (ps_dice_roll(ps_opts.drop_pct)) {
		ev->dropped = 1;
		return;
	}
	if (ps_dice_roll(ps_opts.dup_pct)) {
		ev->duplicated = 1;
		copies = 2;
	}
	if (ps_opts.reorder)
		released = reorder_release(ev, now);
	for (i = 0; i < copies; i++) {
		struct wh_item *it = calloc(1, sizeof *it);

		if (!it)
			break;
		it->ev = ev;
		it->due = now + (int64_t)ps_dice_upto((uint64_t)ps_opts.delay_ms_max);
		if (ps_opts.reorder && !released) {
			it->held = 1;
			it->due += hold;
		}
		queue_insert(it);
	}
	wh_wake();
}

void wh_request(const char *request_id, const char *idem_key)
{
	snprintf(req_id, sizeof req_id, "%s", request_id ? request_id : "");
	snprintf(req_key, sizeof req_key, "%s", idem_key ? idem_key : "");
}

/* the event's request: the API request that made it, or nulls for what
 * Stripe does by itself (an expiry, a delayed payment settling) */
static json_t *event_request(void)
{
	return json_pack("{s:o,s:o}", "id", req_id[0] ? json_string(req_id) : json_null(),
			 "idempotency_key", req_key[0] ? json_string(req_key) : json_null());
}

void wh_event(const char *type, const char *session, json_t *obj)
{
	struct ps_event *ev;
	json_t *doc;

	if (!type_enabled(type) || !(ev = state_new(PS_EVENTS))) {
		json_decref(obj);
		return;
	}
	snprintf(ev->type, sizeof ev->type, "%s", type);
	snprintf(ev->session, sizeof ev->session, "%s", session);
	doc = json_pack("{s:s,s:s,s:s,s:I,s:{s:o},s:b,s:i,s:o,s:s}", "id", ev->id, "object",
			"event", "api_version", PS_API_VERSION, "created", (json_int_t)ev->created,
			"data", "object", obj, "livemode", 0, "pending_webhooks",
			ps_opts.webhook_url ? 1 : 0, "request", event_request(), "type", type);
	ev->payload = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
	json_decref(doc);
	if (!ev->payload)
		ev->payload = strdup("{}");
	if (ps_opts.webhook_url && ev->payload)
		wh_queue(ev);
}

/* ======================== one attempt ==================================== */

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
	(void)p;
	(void)arg;
	return size * n;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)arg;
	(void)a;
	(void)b;
	(void)c;
	(void)d;
	return ps_stopping ? 1 : 0;	/* abort a transfer when paysink stops */
}

/* POST payload, signed now; the HTTP status, or 0 when none came */
static long wh_post(const char *payload)
{
	CURL *h = curl_easy_init();
	struct curl_slist *hdrs = NULL;
	char sig[300];
	long status = 0;

	if (!h)
		return 0;
	sig_header(sig, sizeof sig, ps_real_now(), payload, strlen(payload),
		   ps_opts.webhook_secret, ps_opts.webhook_secret2);
	{
		char line[340];

		snprintf(line, sizeof line, "Stripe-Signature: %s", sig);
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json; charset=utf-8");
		hdrs = curl_slist_append(hdrs, "Accept: */*; q=0.5, application/xml");
		hdrs = curl_slist_append(hdrs, "Cache-Control: no-cache");
		hdrs = curl_slist_append(hdrs, "Expect:");
		hdrs = curl_slist_append(hdrs, line);
	}
	curl_easy_setopt(h, CURLOPT_URL, ps_opts.webhook_url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "Stripe/1.0 (+https://stripe.com/docs/webhooks)");
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, payload);
	curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(payload));
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ps_opts.webhook_timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ps_opts.webhook_timeout_ms);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	if (ps_opts.webhook_ca)
		curl_easy_setopt(h, CURLOPT_CAINFO, ps_opts.webhook_ca);
	if (curl_easy_perform(h) == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(hdrs);
	curl_easy_cleanup(h);
	return status;
}

/* the copy's next delay: base doubling per attempt made, capped */
static long backoff_ms(long attempts)
{
	long d = ps_opts.retry_base_ms;

	while (--attempts > 0 && d < ps_opts.retry_cap_ms)
		d = d > ps_opts.retry_cap_ms / 2 ? ps_opts.retry_cap_ms : d * 2;
	return d < ps_opts.retry_cap_ms ? d : ps_opts.retry_cap_ms;
}

/* make one attempt of it, taken off the queue (lock held on entry and
 * exit, dropped during the POST) */
static void wh_attempt(struct wh_item *it)
{
	struct ps_event *ev = it->ev;
	long status;

	pthread_mutex_unlock(&ps_lock);
	status = wh_post(ev->payload);
	pthread_mutex_lock(&ps_lock);
	ev->attempts++;
	it->attempts++;
	printf("paysink: %s %s attempt %ld: %ld\n", ev->id, ev->type, it->attempts, status);
	fflush(stdout);
	if (status >= 200 && status < 300) {
		ev->delivered_ok++;
		free(it);
	} else if (it->attempts >= ps_opts.webhook_attempts || wh_stopping) {
		if (!wh_stopping)
			ev->gave_up++;
		free(it);
	} else {
		it->due = mono_ms() + backoff_ms(it->attempts);
		queue_insert(it);
	}
	record_write();
	wh_wake();
}

/* the first item due by now whose turn has come, off the queue; *next the
 * time to look again */
static struct wh_item *wh_pick(int64_t now, int64_t *next)
{
	struct wh_item *it;

	for (it = queue; it; it = it->next) {
		if (it->due > now) {
			if (it->due < *next)
				*next = it->due;
			break;
		}
		if (it->after && it->after->attempts == 0 && !it->after->dropped)
			continue;	/* --reorder: the later event goes first */
		queue_unlink(it);
		return it;
	}
	return NULL;
}

static void *wh_run(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&ps_lock);
	while (!wh_stopping) {
		int64_t now = mono_ms(), next = now + WH_TICK_MS;
		struct wh_item *it;
		struct timespec ts;

		state_sweep_expiry();
		it = wh_pick(now, &next);
		if (it) {
			wh_attempt(it);
			continue;
		}
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += (next - now) / 1000;
		ts.tv_nsec += ((next - now) % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&wake, &ps_lock, &ts);
	}
	pthread_mutex_unlock(&ps_lock);
	return NULL;
}

int wh_start(void)
{
	pthread_condattr_t ca;
	int i;

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&wake, &ca);
	pthread_condattr_destroy(&ca);
	for (i = 0; i < WH_THREADS; i++) {
		if (pthread_create(&threads[i], NULL, wh_run, NULL) != 0)
			return -1;
		n_threads++;
	}
	return 0;
}

void wh_stop(void)
{
	int i;

	pthread_mutex_lock(&ps_lock);
	wh_stopping = 1;
	wh_wake();
	pthread_mutex_unlock(&ps_lock);
	for (i = 0; i < n_threads; i++)
		pthread_join(threads[i], NULL);
	n_threads = 0;
	while (queue) {
		struct wh_item *it = queue;

		queue = it->next;
		free(it);
	}
	pthread_cond_destroy(&wake);
}
