/*
 * result.h: the one result type every function in Stagedoor Box returns.
 *
 * A function that fails writes its human message once, where the failure is
 * found, with err_set(); callers pass the code up and the command line prints
 * err_msg().  Codes are values, never bit masks.
 */
#ifndef SD_RESULT_H
#define SD_RESULT_H

enum sd_result {
	SD_OK = 0,
	SD_STALE,	/* a lease token no longer names the entry's lease */
	SD_NOT_FOUND,	/* no such job, entry or row */
	SD_INVALID,	/* bad input from a caller or a user */
	SD_DB,		/* SQLite reported an error */
	SD_BUSY,	/* the database stayed locked past the busy timeout */
	SD_SCHEMA,	/* the database's schema is newer than this program */
	SD_IO,		/* a file or system call failed */
	SD_NOMEM,	/* an allocation failed */
	SD_TIMEOUT,	/* a wait ran out of time */
	SD_REFUSED,	/* a rule of the database (a trigger) refused the write; the
			 * message is the rule's own */
	SD_SOLD_OUT,	/* an order asks for more seats than its event has left */
	SD_CONFLICT,	/* the change contradicts the state it would change (an order
			 * with an admitted ticket cancelled) */
	SD_LIMITED,	/* a limit on how often refused it: the same again later */
	SD_DENIED,	/* a credential or signature that does not prove who asks */
};

/* sd_result_name: a short stable name for a code ("stale", "invalid"). */
const char *sd_result_name(enum sd_result r);

/*
 * err_set: record the message for the failure being reported, printf-style.
 * [in] code is returned unchanged, so "return err_set(SD_INVALID, ...)" reads
 * as one step.  The message is per thread.
 */
enum sd_result err_set(enum sd_result code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* err_msg: the last message set on this thread, or "" when none. */
const char *err_msg(void);

/* err_clear: forget the last message on this thread. */
void err_clear(void);

#endif
