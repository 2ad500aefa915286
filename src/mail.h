/*
 * mail.h: sending one email, behind one interface, with an idempotency key.
 *
 * mail_open picks the transport from a URL:
 *  - "maildir:PATH": each message is written atomically (tmp/, fsync, link
 *    into new/) as a complete RFC 5322 message, and like a mail provider it
 *    keeps the idempotency keys it has seen: the same key never makes a
 *    second message; the second send returns the first one's message id.
 *  - "smtp://host[:port]" (port 587 by default): SMTP with STARTTLS
 *    required; a server that does not offer it gets no login and no
 *    message.  "smtps://host[:port]" (465): TLS from the first byte.  Peer and host verification are always on.  SMTP
 *    has no idempotency key: a retry after an unknown outcome may deliver a
 *    second copy, which carries the same Message-ID (derived from the key),
 *    so the recipient's mail reader can recognise it.  (mail_curl.c)
 *  - "https://host[:port]/path": a JSON mail API.  Each send is one POST of
 *    {from, to, subject, text, attachments: [{filename, content_type,
 *    content (base64)}]} with the header "Idempotency-Key: <key>"; the
 *    provider answers a repeated key with the first answer, so a retry
 *    after an unknown outcome makes no second message.  The same message
 *    always makes the same body (a provider may refuse a key reused with
 *    another body).  (mail_curl.c)
 *
 * Messages use CRLF line ends; names and the subject may be UTF-8 (encoded
 * as RFC 2047 words); any CR, LF or NUL in an address, a name or the subject
 * is refused before anything is written (header injection).
 */
#ifndef SD_MAIL_H
#define SD_MAIL_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define MAIL_ID_MAX 200

struct mail_attachment {
	const char *filename;		/* "tickets-AB12.pdf" */
	const char *content_type;	/* "application/pdf" */
	const unsigned char *data;
	size_t len;
};

struct mail_message {
	const char *from;		/* address: "box@venue.example" */
	const char *from_name;		/* may be NULL */
	const char *to;			/* address */
	const char *to_name;		/* may be NULL */
	const char *subject;
	const char *text;		/* the plain-text body, UTF-8, LF or CRLF */
	const struct mail_attachment *attachments;
	int n_attachments;
	const char *idempotency_key;	/* "tickets-<public id>": same key, one message */
};

struct mail_result {
	char message_id[MAIL_ID_MAX + 1];	/* the provider's id for the message;
						 * maildir: the key + "@stagedoor.invalid",
						 * without the header's <> */
	int duplicate;				/* 1: the key was seen; nothing new sent */
	int retry_later;			/* 1: the provider holds the key in flight
						 * (HTTPS 409): try again soon, not a failure */
	int64_t retry_after_ms;			/* the provider's Retry-After (429, 5xx,
						 * 409), in ms; 0: none given */
};

struct mailer;

/* mail_address_valid: a plain address local@domain, no spaces or controls. */
enum sd_result mail_address_valid(const char *addr);

/* What the network transports need besides the URL; every field may be
 * 0/NULL for its default.  The maildir transport ignores it. */
struct mail_config {
	const char *ca_file;		/* PEM file of the CA(s) to trust instead of the
					 * system's, for a private CA; NULL: the system's */
	const char *user;		/* SMTP AUTH user; NULL or "": no AUTH */
	const char *password_file;	/* the password, one line, in a file no group or
					 * other may read (0600/0400; others refused);
					 * NULL: $CREDENTIALS_DIRECTORY/mail_password
					 * (systemd's 0440 accepted there: cred.h) */
	long connect_timeout_ms;	/* 0: MAIL_CONNECT_TIMEOUT_MS */
	long timeout_ms;		/* the whole send; 0: MAIL_TIMEOUT_MS */
};

#define MAIL_CONNECT_TIMEOUT_MS 10000L
#define MAIL_TIMEOUT_MS 60000L

/* mail_open: a transport for url ("maildir:PATH", "smtp://host:port",
 * "smtps://host:port", "https://host:port/path") with the default config.  [out] *out, mail_close(). */
enum sd_result mail_open(const char *url, struct mailer **out);

/*
 * mail_open_opts: as mail_open, with cfg (may be NULL: the defaults).  The
 * SMTP password is read here, once, and kept only in the mailer's memory:
 * it is never logged or written anywhere.  A URL may not hold a user or a
 * password ("smtp://user:pw@host" is refused without echoing it).
 */
enum sd_result mail_open_opts(const char *url, const struct mail_config *cfg,
			      struct mailer **out);
void mail_close(struct mailer *m);

/* mail_is_local: 1 when m delivers into a maildir on this box's own disk
 * (its SD_IO is a full or failing disk), 0 for a provider over the network. */
int mail_is_local(const struct mailer *m);

/*
 * mail_send: send msg once per idempotency key.  Safe to call from several
 * threads and processes at once with the same key: one message results
 * (maildir).  Over SMTP each call is one delivery attempt; results:
 *   SD_OK       the server accepted the message (res->message_id is the
 *               Message-ID without <>; res->duplicate is always 0)
 *   SD_INVALID  refused before sending (header injection, bad address), or
 *               the server rejected the recipient for good (5xx on RCPT)
 *   SD_IO       anything that may pass: no connection, timeout, TLS or
 *               certificate failure, no STARTTLS, login refused, 4xx/5xx
 *               at another step; the message names the host and the cause
 * Over HTTPS each call is one POST with the key:
 *   SD_OK       2xx (res->message_id: the provider's "id"; res->duplicate
 *               when it came with "Idempotent-Replayed: true")
 *   SD_BUSY     409: the key is in flight at the provider; res->retry_later
 *   SD_IO       429, 5xx, timeout, dropped connection, TLS or certificate
 *               failure; res->retry_after_ms when the provider said
 *   SD_INVALID  refused before sending, or any other 4xx (the provider's
 *               message in the error)
 */
enum sd_result mail_send(struct mailer *m, const struct mail_message *msg,
			 struct mail_result *res);

/*
 * mail_format: the RFC 5322 text of msg, dated date_ms, with a Message-ID
 * derived from the idempotency key.  [out] *out (free()), *len.
 */
enum sd_result mail_format(const struct mail_message *msg, int64_t date_ms, char **out,
			   size_t *len);

#endif
