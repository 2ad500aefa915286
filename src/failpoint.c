/*
 * failpoint.c: hooks for tests, crashes for the harness.
 */
#define _POSIX_C_SOURCE 200809L
#include "failpoint.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static _Atomic(failpoint_fn) hook;
static void *_Atomic hook_arg;
static const char *spec;		/* $STAGEDOOR_FAILPOINTS, read once */
static pthread_once_t spec_once = PTHREAD_ONCE_INIT;

static void spec_read(void)
{
	const char *s = getenv("STAGEDOOR_FAILPOINTS");

	spec = s && *s ? s : NULL;
}

void failpoint_set_hook(failpoint_fn fn, void *arg)
{
	atomic_store(&hook_arg, arg);
	atomic_store(&hook, fn);
}

/* "a=crash,b=crash": is name armed to crash? */
static int armed(const char *name)
{
	const char *p = spec;
	size_t n = strlen(name);

	while (p && *p) {
		if (strncmp(p, name, n) == 0 && strncmp(p + n, "=crash", 6) == 0 &&
		    (p[n + 6] == ',' || p[n + 6] == '\0'))
			return 1;
		p = strchr(p, ',');
		if (p)
			p++;
	}
	return 0;
}

void failpoint(const char *name)
{
	failpoint_fn fn = atomic_load(&hook);

	if (fn)
		fn(name, atomic_load(&hook_arg));
	pthread_once(&spec_once, spec_read);
	if (spec && armed(name)) {
		log_event(LOG_WARN, "failpoint: crashing", "failpoint=%s", name);
		_exit(70);
	}
}
