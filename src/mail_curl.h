/*
 * mail_curl.h: the SMTP, SMTPS and HTTPS mail API transports, inside the
 * mail module only.
 * mail.c dispatches to these (and version.c reads libcurl's version); no
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

/* mail_curl_is_api: 1 when c is the https:// JSON mail API transport. */
int mail_curl_is_api(const struct mail_curl *c);

/*
 * mail_curl_post: one attempt at the JSON mail API: POST body (len bytes of
 * JSON, built by mail.c) with the header "Idempotency-Key: key" (checked:
 * printable ASCII, no spaces).  [out] res: message_id on success;
 * retry_later, retry_after_ms as the provider said.  Results:
 *   SD_OK       2xx: sent (res->message_id: the answer's "id", or the key)
 *   SD_BUSY     409: a request with this key is in flight at the provider
 *               (res->retry_later = 1)
 *   SD_IO       429, 5xx, timeout, no answer, TLS or certificate failure
 *               (res->retry_after_ms from Retry-After, or 0)
 *   SD_INVALID  any other 4xx: refused for good, with the provider's words
 */
enum sd_result mail_curl_post(struct mail_curl *c, const char *key, const char *body,
			      size_t len, struct mail_result *res);

/* mail_curl_lib_version: libcurl's version as linked ("7.88.1"). */
const char *mail_curl_lib_version(void);

#endif
