/*
 * text.h: the one check for text that enters the box, and the one UTF-8
 * decoder every module uses.
 *
 * Text from a user (a buyer's name, an event's name and venue, a config
 * value, a job kind) is checked once, where it enters (CLI, API, config),
 * with text_check: well-formed UTF-8 as RFC 3629 defines it (no overlong
 * forms, no surrogates, nothing past U+10FFFF), no C0 or C1 control and no
 * DEL, and no bidirectional embedding, override or isolate (U+202A..U+202E,
 * U+2066..U+2069), which would let a name shown in an email or a PDF read
 * as something else.  Text that passed is stored and rendered as it is.
 *
 * A read path never fails on a stored value: text_escape makes any string
 * (a row stored before this check, a message cut short) into text that
 * passes, with each byte or character that would not pass written as
 * \xNN or \u{NNNN}.  Text that passes comes back unchanged.
 */
#ifndef SD_TEXT_H
#define SD_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

/*
 * text_utf8_next: decode one code point from s (NUL-terminated).
 * Returns its length in bytes (1..4) with [out] *cp set, or 0 for a
 * malformed sequence (a lone continuation byte, an overlong form, a
 * surrogate, a code point past U+10FFFF, or one cut short by the NUL).
 * Never reads past the terminating NUL.
 */
size_t text_utf8_next(const unsigned char *s, uint32_t *cp);

/* text_utf8_valid: is all of s well-formed UTF-8?  1 or 0. */
int text_utf8_valid(const char *s);


/*
 * text_check: s is 1..max_bytes bytes of well-formed UTF-8 with no control
 * and no bidi override.  SD_INVALID otherwise, the message naming what and
 * the byte offset of the first offence, never the value itself.
 */
enum sd_result text_check(const char *what, const char *s, size_t max_bytes);

/* A person's words the box keeps: names, venues, event names; bytes of UTF-8 */
#define TEXT_FIELD_MAX 200

/* text_field_valid: text_check with TEXT_FIELD_MAX. */
enum sd_result text_field_valid(const char *what, const char *s);

/*
 * text_escape: s as text that text_check accepts (empty stays empty):
 * malformed bytes as "\xNN", refused code points as "\u{NNNN}", a backslash
 * as itself.  Returns a new string (free()), or NULL when memory ran out.
 */
char *text_escape(const char *s);

/*
 * text_copy: text_escape(src) into dst[size] without allocating, cut at a
 * character or escape boundary when it does not fit (never inside one), so
 * dst always passes text_utf8_valid.  src NULL copies as "".  Returns the
 * length written.
 */
size_t text_copy(char *dst, size_t size, const char *src);

/*
 * text_duration_ms: a duration as people write it: a whole number and a
 * unit, "500ms", "45s", "90m", "12h", "7d" (a bare number is milliseconds).
 * -1 when malformed, 0 on success with *ms set (at most 100 years).
 */
int text_duration_ms(const char *s, int64_t *ms);

/*
 * text_redact_url: a URL or URI as it may be shown (a message, a log line,
 * --json, config show): the one place a secret in one is hidden.  The
 * password of its user part becomes *** (postgresql://u:s@h ->
 * postgresql://u:***@h); in a postgresql:// or postgres:// URI the values
 * of libpq's secret parameters (password, sslpassword) become ***, the
 * rest of the query staying (it says which server and schema); any other
 * URL's query string, where an API key would hide, becomes ?***.  Text
 * that is not a URL (a file path) comes back as it is.  buf holds size
 * bytes; NULL url gives "".
 */
void text_redact_url(const char *url, char *buf, size_t size);

#endif
