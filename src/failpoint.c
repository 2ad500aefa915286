/*
 * failpoint.c: hooks for tests, crashes and behaviours for the harness
 * (failpoint.h has the grammar).
 */
#define _POSIX_C_SOURCE 200809L
#include "failpoint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "result.h"

#define FP_MAX 16

enum fp_action { FP_CRASH, FP_ON };

struct fp {
	char name[48];
	enum fp_action action;
	long every;		/* crash: at the Nth pass (0: every pass); on: every Nth */
	atomic_long passes;
};

static _Atomic(failpoint_fn) hook;
static void *_Atomic hook_arg;
static struct fp armed[FP_MAX];
static int n_armed;
/* 0: not read yet; 1: nothing armed and no hook; 2: look closer */
static atomic_int state;
static pthread_once_t spec_once = PTHREAD_ONCE_INIT;

/* parse: spec into out (may be NULL); the number of entries, or -1 with the
 * error set. */
static int parse(const char *spec, struct fp *out)
{
	const char *p = spec;
	int n = 0;

	while (p && *p) {
		const char *end = strchr(p, ','), *eq, *act;
		size_t len = end ? (size_t)(end - p) : strlen(p), nl;
		long every = 0;
		enum fp_action a;

		eq = memchr(p, '=', len);
		if (!eq || eq == p || (nl = (size_t)(eq - p)) >= sizeof armed[0].name) {
			err_set(SD_INVALID, "STAGEDOOR_FAILPOINTS: '%.*s' is not name=crash[:N] "
				"or name=on[:N]", (int)len, p);
			return -1;
		}
		act = eq + 1;
		if (strncmp(act, "crash", 5) == 0) {
			a = FP_CRASH;
			act += 5;
		} else if (strncmp(act, "on", 2) == 0) {
			a = FP_ON;
			act += 2;
		} else {
			err_set(SD_INVALID, "STAGEDOOR_FAILPOINTS: %.*s: the action must be crash "
				"or on", (int)nl, p);
			return -1;
		}
		if (act < p + len && *act == ':') {
			char *e;
			every = strtol(act + 1, &e, 10);
			if (e == act + 1 || e != p + len || every < 1 || every > 1000000000L) {
				err_set(SD_INVALID, "STAGEDOOR_FAILPOINTS: %.*s: N must be a "
					"whole number from 1", (int)nl, p);
				return -1;
			}
		} else if (act != p + len) {
			err_set(SD_INVALID, "STAGEDOOR_FAILPOINTS: %.*s: the action must be "
				"crash, crash:N, on or on:N", (int)nl, p);
			return -1;
		}
		if (n == FP_MAX) {
			err_set(SD_INVALID, "STAGEDOOR_FAILPOINTS: at most %d failpoints", FP_MAX);
			return -1;
		}
		if (out) {
			memcpy(out[n].name, p, nl);
			out[n].name[nl] = '\0';
			out[n].action = a;
			out[n].every = every;
			atomic_store(&out[n].passes, 0);
		}
		n++;
		p = end ? end + 1 : NULL;
	}
	return n;
}

int failpoint_check_spec(const char *spec)
{
	return parse(spec, NULL) < 0 ? SD_INVALID : SD_OK;
}

static void spec_read(void)
{
	const char *s = getenv("STAGEDOOR_FAILPOINTS");
	int n = s && *s ? parse(s, armed) : 0;

	/* a malformed spec arms nothing; commands check it at start */
	n_armed = n > 0 ? n : 0;
	atomic_store(&state, n_armed || atomic_load(&hook) ? 2 : 1);
}

void failpoint_set_hook(failpoint_fn fn, void *arg)
{
	pthread_once(&spec_once, spec_read);
	atomic_store(&hook_arg, arg);
	atomic_store(&hook, fn);
	atomic_store(&state, n_armed || fn ? 2 : 1);
}

/* pass: the hook, then this pass's action for name: -1 none, else the action. */
static int pass(const char *name)
{
	failpoint_fn fn;
	int i;

	if (atomic_load_explicit(&state, memory_order_relaxed) == 1)
		return -1;
	pthread_once(&spec_once, spec_read);
	if ((fn = atomic_load(&hook)))
		fn(name, atomic_load(&hook_arg));
	for (i = 0; i < n_armed; i++) {
		struct fp *f = &armed[i];
		long k;

		if (strcmp(f->name, name) != 0)
			continue;
		k = atomic_fetch_add(&f->passes, 1) + 1;
		if (f->every == 0 || (f->action == FP_CRASH ? k == f->every : k % f->every == 0)) {
			log_event(LOG_WARN, "failpoint hit", "failpoint=%s action=%s pass=%ld", name,
				  f->action == FP_CRASH ? "crash" : "on", k);
			return (int)f->action;
		}
		return -1;
	}
	return -1;
}

void failpoint(const char *name)
{
	if (pass(name) == FP_CRASH)
		_exit(70);
}

int failpoint_on(const char *name)
{
	int a = pass(name);

	if (a == FP_CRASH)
		_exit(70);
	return a == FP_ON;
}
