/*
 * mail.h: sending one email, behind one interface, with an idempotency key.
 *
 * mail_open picks the transport from a URL.  This issue has one transport,
 * "maildir:PATH": each message is written atomically (tmp/, fsync, link into
 * new/) as a complete RFC 5322 message, and like a mail provider it keeps
 * the idempotency keys it has seen: the same key never makes a second
 * message; the second send returns the first one's message id.
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
	const char *idempotency_key;	/* "tickets-<order_id>": same key, one message */
};

struct mail_result {
	char message_id[MAIL_ID_MAX + 1];	/* the provider's id for the message;
						 * maildir: the key + "@stagedoor.invalid",
						 * without the header's <> */
	int duplicate;				/* 1: the key was seen; nothing new sent */
};

struct mailer;

/* mail_address_valid: a plain address local@domain, no spaces or controls. */
enum sd_result mail_address_valid(const char *addr);

/* mail_open: a transport for url ("maildir:PATH").  [out] *out, mail_close(). */
enum sd_result mail_open(const char *url, struct mailer **out);
void mail_close(struct mailer *m);

/*
 * mail_send: send msg once per idempotency key.  Safe to call from several
 * threads and processes at once with the same key: one message results.
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
