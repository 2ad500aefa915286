/*
 * result.c: names for result codes and the per-thread error message.
 */
#include "result.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char err_buf[512];

const char *sd_result_name(enum sd_result r)
{
	switch (r) {
	case SD_OK: return "ok";
	case SD_STALE: return "stale";
	case SD_NOT_FOUND: return "not found";
	case SD_INVALID: return "invalid";
	case SD_DB: return "database error";
	case SD_BUSY: return "database busy";
	case SD_SCHEMA: return "schema mismatch";
	case SD_IO: return "i/o error";
	case SD_NOMEM: return "out of memory";
	case SD_TIMEOUT: return "timeout";
	case SD_REFUSED: return "refused";
	case SD_SOLD_OUT: return "sold out";
	case SD_CONFLICT: return "conflict";
	case SD_LIMITED: return "limited";
	case SD_DENIED: return "denied";
	}
	return "unknown";
}

enum sd_result err_set(enum sd_result code, const char *fmt, ...)
{
	char tmp[sizeof err_buf];
	va_list ap;

	/* format aside first: the arguments may include err_msg() itself */
	va_start(ap, fmt);
	vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	memcpy(err_buf, tmp, sizeof tmp);
	return code;
}

const char *err_msg(void)
{
	return err_buf;
}

void err_clear(void)
{
	err_buf[0] = '\0';
}
