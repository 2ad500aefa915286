/*
 * mail_curl.h: the SMTP and SMTPS transports, inside the mail module only.
 * mail.c dispatches to these; nothing else includes this header, and no
 * other file includes <curl/curl.h>.
 */
#ifndef SD_MAIL_CURL_H
#define SD_MAIL_CURL_H

#include <stddef.h>

#include "mail.h"
#include "result.h"

struct mail_curl;

/*
 * mail_curl_open: an SMTP transport for url ("smtp://host[:port][/]" with
 * STARTTLS required, "smtps://host[:port][/]" with TLS from the start) and
 * cfg (may be NULL).  Reads the password file now.  [out] *out,
 * mail_curl_close().
 */
enum sd_result mail_curl_open(const char *url, const struct mail_config *cfg,
			      struct mail_curl **out);

/* mail_curl_close: forget the password (zeroed) and free; NULL is fine. */
void mail_curl_close(struct mail_curl *c);

/*
 * mail_curl_send: one delivery attempt of text (len bytes, a complete
 * RFC 5322 message with CRLF line ends, checked by mail_format) from the
 * envelope sender from to the recipient to, both already validated.
 * SD_OK: accepted.  SD_INVALID: the recipient was rejected for good.
 * SD_IO: anything that may pass (see mail_send in mail.h).
 */
enum sd_result mail_curl_send(struct mail_curl *c, const char *from, const char *to,
			      const char *text, size_t len);

#endif
