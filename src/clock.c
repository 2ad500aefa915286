/*
 * clock.c: real and fake time.  The fake clock is an atomic so that handler
 * threads and the test thread see one value.
 */
#include "clock.h"

#include <stdatomic.h>
#include <time.h>

static atomic_int fake_on;
static _Atomic int64_t fake_ms;

int64_t clock_now_ms(void)
{
	struct timespec ts;

	if (atomic_load_explicit(&fake_on, memory_order_acquire))
		return atomic_load(&fake_ms);
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void clock_fake_set(int64_t ms)
{
	atomic_store(&fake_ms, ms);
	atomic_store_explicit(&fake_on, 1, memory_order_release);
}

void clock_fake_advance(int64_t ms)
{
	atomic_fetch_add(&fake_ms, ms);
}

void clock_real(void)
{
	atomic_store(&fake_on, 0);
}
