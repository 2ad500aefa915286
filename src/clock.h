/*
 * clock.h: the one clock of Stagedoor Box, in integer milliseconds.
 *
 * Every time that job logic stores or compares comes from clock_now_ms() and
 * reaches SQL as a bound parameter; SQL never reads the time itself.  Tests
 * switch the clock to a fake one and move it by hand, so a 60 s lease or a
 * 2 min stale claim passes in microseconds.
 */
#ifndef SD_CLOCK_H
#define SD_CLOCK_H

#include <stdint.h>

/* clock_now_ms: milliseconds since the Unix epoch, real or fake. */
int64_t clock_now_ms(void);

/* clock_mono_us: a monotonic microsecond clock for durations and benchmarks;
 * never fake, never stored. */
int64_t clock_mono_us(void);

/* clock_fake_set: switch to the fake clock and set it to ms. */
void clock_fake_set(int64_t ms);

/* clock_fake_advance: move the fake clock forward by ms. */
void clock_fake_advance(int64_t ms);

/* clock_real: switch back to the real clock. */
void clock_real(void);


#endif
