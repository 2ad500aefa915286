/*
 * mail.c: one email per idempotency key; RFC 5322 formatting and the
 * maildir transport.
 *
 * Formatting (mail_format) is pure: it checks every field, then builds the
 * whole message in memory.  Invariants of its output:
 *  - every line ends in CRLF; no header holds a CR, LF or other control
 *    character from the caller (header injection is refused, not escaped);
 *  - non-ASCII names and subjects travel as RFC 2047 encoded words of at
 *    most 75 characters, never split inside a UTF-8 character;
 *  - the same message, key and date give the same bytes: the Message-ID and
 *    the MIME boundary come from the idempotency key, and the boundary is
 *    checked against the text (base64 cannot hold it: it contains '_').
 *
 * For SMTP the text part travels quoted-printable (mail_format_for): every
 * line then stays ASCII and at most 76 characters, within SMTP's 998 and
 * without needing the server's 8BITMIME; the maildir keeps 8bit text.
 * The boundary stays safe: it starts with '=', which quoted-printable
 * always writes as "=3D".
 *
 * The SMTP and HTTPS transports live in mail_curl.c, the one file that uses
 * libcurl; mail_open and mail_send dispatch to it by the URL's scheme.  For
 * the HTTPS mail API this file builds the JSON body (mail_json): checked
 * like a formatted message, attachments in base64 without line breaks,
 * keys sorted and compact, so that every retry sends the same bytes.
 *
 * The maildir transport ("maildir:PATH") keeps the folders tmp/, new/, cur/
 * and .idem/.  A send:
 *
 *     check and format the message   -> refused: nothing is written
 *     .idem/<key> exists             -> duplicate: return the id it holds
 *     write tmp/<unique>, fsync
 *     link tmp/<unique> new/<key>.eml
 *        EEXIST                      -> duplicate: another sender won
 *     unlink tmp/<unique>; fsync new/ (the loser too: the winner's name
 *        may not be synced yet)
 *     write .idem/<key> (temp in tmp/, fsync, rename, fsync .idem/)
 *
 * fsio_put does each "temp file, fsync, link or rename, fsync" step.
 *
 * link(2) never replaces a name, so of any number of threads or processes
 * sending one key at once exactly one makes new/<key>.eml; the others see
 * EEXIST.  .idem/ outlives the message in new/: a mail reader moves it to
 * cur/ under another name, and the record still says "sent".  A crash
 * between the link and the record leaves new/<key>.eml, which still stops
 * a second message; the next send of that key writes the record.
 */
#define _GNU_SOURCE
#include "mail.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "fsio.h"
#include "log.h"
#include "mail_curl.h"
#include "text.h"

#define MAIL_ID_DOMAIN "@stagedoor.invalid"
/* the longest key whose message id still fits in MAIL_ID_MAX */
#define MAIL_KEY_MAX (MAIL_ID_MAX - (int)(sizeof MAIL_ID_DOMAIN - 1))
#define MAIL_ADDR_MAX 254
/* longer ASCII names and subjects are sent as encoded words, which fold */
#define MAIL_PLAIN_MAX 200
#define MAIL_FILENAME_MAX 200
/* 45 bytes of UTF-8 make 60 base64 characters: with "=?UTF-8?B?" and "?="
 * an encoded word stays within RFC 2047's 75 */
#define MAIL_WORD_BYTES 45
#define MAIL_B64_LINE 76

struct mailer {
	char *dir;		/* the maildir: holds tmp/, new/, cur/, .idem/; or NULL */
	struct mail_curl *curl;	/* the SMTP transport; or NULL */
};

/* ======================== a growing buffer ============================== */

struct mail_buf {
	char *p;	/* the text, NUL-terminated while not failed */
	size_t len;	/* bytes used, without the NUL */
	size_t cap;	/* bytes allocated */
	int oom;	/* an allocation failed: everything after is dropped */
};

static void mb_add(struct mail_buf *b, const void *s, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 1024;
		char *p;

		while (cap < b->len + n + 1)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void mb_str(struct mail_buf *b, const char *s)
{
	mb_add(b, s, strlen(s));
}

static void mb_printf(struct mail_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void mb_printf(struct mail_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	/* only short, fixed-shape lines go through here */
	if (n < 0 || (size_t)n >= sizeof tmp) {
		b->oom = 1;
		return;
	}
	mb_add(b, tmp, (size_t)n);
}

/* ======================== base64 ======================================== */

static const char b64_alphabet[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* Base64 of in; with line_max > 0, a CRLF after every line_max characters
 * and after the last line. */
static void mb_base64(struct mail_buf *b, const unsigned char *in, size_t len, int line_max)
{
	char quad[4];
	size_t i;
	int col = 0;

	for (i = 0; i < len; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16;
		size_t left = len - i;

		if (left > 1)
			v |= (uint32_t)in[i + 1] << 8;
		if (left > 2)
			v |= in[i + 2];
		quad[0] = b64_alphabet[(v >> 18) & 63];
		quad[1] = b64_alphabet[(v >> 12) & 63];
		quad[2] = left > 1 ? b64_alphabet[(v >> 6) & 63] : '=';
		quad[3] = left > 2 ? b64_alphabet[v & 63] : '=';
		/* 76 is a multiple of 4: a quad never straddles a line end */
		if (line_max > 0 && col == line_max) {
			mb_add(b, "\r\n", 2);
			col = 0;
		}
		mb_add(b, quad, 4);
		col += 4;
	}
	if (line_max > 0 && col > 0)
		mb_add(b, "\r\n", 2);
}

/* ======================== checks ======================================== */

static int mail_is_ascii(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s >= 0x80)
			return 0;
	return 1;
}

/*
 * A name, subject or filename: UTF-8 without control characters.  CR and LF
 * would end the header and start one of the caller's choosing; a NUL cannot
 * reach us inside a C string, and other controls have no business in a
 * header either.
 */
static enum sd_result mail_text_check(const char *what, const char *s)
{
	const unsigned char *p;

	for (p = (const unsigned char *)s; *p; p++) {
		if (*p == '\r' || *p == '\n')
			return err_set(SD_INVALID, "%s holds a line break: refused "
				       "(header injection)", what);
		if (*p < 0x20 || *p == 0x7f)
			return err_set(SD_INVALID, "%s holds a control character", what);
	}
	if (!text_utf8_valid(s))
		return err_set(SD_INVALID, "%s is not valid UTF-8", what);
	return SD_OK;
}

enum sd_result mail_address_valid(const char *addr)
{
	const char *at, *p, *domain;
	size_t len;

	if (!addr || !*addr)
		return err_set(SD_INVALID, "email address is empty");
	len = strlen(addr);
	if (len > MAIL_ADDR_MAX)
		return err_set(SD_INVALID, "email address is longer than %d characters",
			       MAIL_ADDR_MAX);
	for (p = addr; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '\r' || c == '\n')
			return err_set(SD_INVALID, "email address holds a line break: refused "
				       "(header injection)");
		/* printable ASCII only, and none of the characters that would
		 * need quoting or could close the <...> around the address */
		if (c <= ' ' || c >= 0x7f || strchr("\"<>,;:()[]\\", c))
		{
			char q[80];

			/* quoted with controls blanked: the message stays one line */
			return err_set(SD_INVALID, "email address %s holds a space, a control, "
				       "non-ASCII or one of \"<>,;:()[]\\", log_quote(q, sizeof q, addr));
		}
	}
	at = strchr(addr, '@');
	if (!at || at != strrchr(addr, '@') || at == addr)
		return err_set(SD_INVALID, "email address '%.64s' is not local@domain", addr);
	domain = at + 1;
	if (!strchr(domain, '.') || domain[0] == '.' || addr[len - 1] == '.' ||
	    strstr(domain, ".."))
		return err_set(SD_INVALID, "email address '%.64s' needs a domain like "
			       "example.org", addr);
	return SD_OK;
}

/* The idempotency key becomes the Message-ID's left part: RFC 5322 atext
 * and dots, which is printable ASCII without spaces, <, > or @ (and without
 * the other specials that would need quoting). */
static enum sd_result mail_key_check(const char *key)
{
	const char *p;

	if (!key || !*key)
		return err_set(SD_INVALID, "mail has no idempotency key");
	if (strlen(key) > (size_t)MAIL_KEY_MAX)
		return err_set(SD_INVALID, "idempotency key is longer than %d characters",
			       MAIL_KEY_MAX);
	for (p = key; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c <= ' ' || c >= 0x7f || strchr("<>@\"\\(),:;[]", c))
		{
			char q[80];

			return err_set(SD_INVALID, "idempotency key %s may hold only printable "
				       "ASCII without spaces, <, >, @ or quotes",
				       log_quote(q, sizeof q, key));
		}
	}
	return SD_OK;
}

/* A MIME type token/token, or the message could be given extra parameters. */
static enum sd_result mail_ctype_check(const char *ct)
{
	const char *p, *slash = strchr(ct, '/');
	char q[80];

	for (p = ct; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c != '/' && (c <= ' ' || c >= 0x7f || strchr("()<>@,;:\\\"[]?=", c)))
			return err_set(SD_INVALID, "attachment type %s holds a character that is "
				       "not allowed there", log_quote(q, sizeof q, ct));
	}
	if (!slash || slash == ct || !slash[1] || strchr(slash + 1, '/'))
		return err_set(SD_INVALID, "attachment type %s is not type/subtype",
			       log_quote(q, sizeof q, ct));
	return SD_OK;
}

static enum sd_result mail_check(const struct mail_message *msg)
{
	enum sd_result r;
	int i;

	if (!msg)
		return err_set(SD_INVALID, "no message");
	if ((r = mail_key_check(msg->idempotency_key)) != SD_OK)
		return r;
	if (mail_address_valid(msg->from) != SD_OK)
		return err_set(SD_INVALID, "sender: %s", err_msg());
	if (mail_address_valid(msg->to) != SD_OK)
		return err_set(SD_INVALID, "recipient: %s", err_msg());
	if (msg->from_name && (r = mail_text_check("sender name", msg->from_name)) != SD_OK)
		return r;
	if (msg->to_name && (r = mail_text_check("recipient name", msg->to_name)) != SD_OK)
		return r;
	if (msg->subject && (r = mail_text_check("subject", msg->subject)) != SD_OK)
		return r;
	if (msg->n_attachments < 0 || (msg->n_attachments > 0 && !msg->attachments))
		return err_set(SD_INVALID, "attachment list is inconsistent");
	for (i = 0; i < msg->n_attachments; i++) {
		const struct mail_attachment *a = &msg->attachments[i];

		if (!a->filename || !*a->filename)
			return err_set(SD_INVALID, "attachment %d has no file name", i + 1);
		if (strlen(a->filename) > MAIL_FILENAME_MAX)
			return err_set(SD_INVALID, "attachment file name is longer than %d bytes",
				       MAIL_FILENAME_MAX);
		if ((r = mail_text_check("attachment file name", a->filename)) != SD_OK)
			return r;
		if (a->content_type && (r = mail_ctype_check(a->content_type)) != SD_OK)
			return r;
		if (a->len > 0 && !a->data)
			return err_set(SD_INVALID, "attachment %s has no data", a->filename);
	}
	return SD_OK;
}

/* ======================== header pieces ================================= */

/* s as RFC 2047 "B" encoded words, folded onto continuation lines. */
static void mb_words(struct mail_buf *b, const char *s)
{
	size_t len = strlen(s), i = 0;

	if (len == 0) {
		mb_str(b, "=?UTF-8?B?" "?=");
		return;
	}
	while (i < len) {
		size_t n = len - i;

		if (n > MAIL_WORD_BYTES) {
			n = MAIL_WORD_BYTES;
			/* back up to the start of a character: a word must hold
			 * whole characters (RFC 2047 section 5) */
			while (n > 0 && ((unsigned char)s[i + n] & 0xc0) == 0x80)
				n--;
		}
		if (i > 0)
			mb_str(b, "\r\n ");
		mb_str(b, "=?UTF-8?B?");
		mb_base64(b, (const unsigned char *)s + i, n, 0);
		mb_str(b, "?=");
		i += n;
	}
}

/* Plain text is safe in a header when it is short ASCII and cannot be
 * mistaken for an encoded word. */
static int mail_plain_ok(const char *s)
{
	return mail_is_ascii(s) && strlen(s) <= MAIL_PLAIN_MAX && !strstr(s, "=?");
}

/* A display name: a quoted string when plain, else encoded words. */
static void mb_phrase(struct mail_buf *b, const char *name)
{
	const char *p;

	if (!mail_plain_ok(name)) {
		mb_words(b, name);
		return;
	}
	mb_add(b, "\"", 1);
	for (p = name; *p; p++) {
		if (*p == '"' || *p == '\\')
			mb_add(b, "\\", 1);
		mb_add(b, p, 1);
	}
	mb_add(b, "\"", 1);
}

static void mb_address(struct mail_buf *b, const char *field, const char *name, const char *addr)
{
	mb_str(b, field);
	mb_str(b, ": ");
	if (name && *name) {
		mb_phrase(b, name);
		mb_str(b, " <");
		mb_str(b, addr);
		mb_str(b, ">\r\n");
	} else {
		mb_str(b, addr);
		mb_str(b, "\r\n");
	}
}

/* RFC 5322 section 3.3, in UTC, with English names whatever the locale. */
static void mb_date(struct mail_buf *b, int64_t date_ms)
{
	static const char *days[] = { "Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat" };
	static const char *months[] = { "Jan", "Feb", "Mar", "Apr", "May", "Jun",
					"Jul", "Aug", "Sep", "Oct", "Nov", "Dec" };
	int64_t sec = date_ms / 1000 - (date_ms % 1000 < 0 ? 1 : 0);
	time_t t = (time_t)sec;
	struct tm tm;

	if (!gmtime_r(&t, &tm)) {
		t = 0;
		gmtime_r(&t, &tm);
	}
	mb_printf(b, "Date: %s, %02d %s %04d %02d:%02d:%02d +0000\r\n", days[tm.tm_wday],
		  tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min,
		  tm.tm_sec);
}

/* A boundary from the key (FNV-1a, so the same message formats the same),
 * bumped while the text happens to contain it. */
static void mail_boundary(const char *key, const char *text, char *out, size_t size)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	const char *p;
	int n = 0;

	for (p = key; *p; p++) {
		h ^= (unsigned char)*p;
		h *= 0x100000001b3ULL;
	}
	snprintf(out, size, "=_sd_%016llx", (unsigned long long)h);
	while (text && strstr(text, out))
		snprintf(out, size, "=_sd_%016llx_%d", (unsigned long long)h, ++n);
}

/*
 * One line of text, quoted-printable (RFC 2045 section 6.7): printable
 * ASCII but '=' as is, the rest as =XX, a space or tab at the line's end
 * encoded, and a soft break "=" CRLF before a line would pass 76 characters.
 * A '.' that starts a line is encoded too, so no line of the body can look
 * like SMTP's end of data whatever the sender does about dot-stuffing.
 */
static void mb_qp_line(struct mail_buf *b, const unsigned char *s, size_t n)
{
	size_t i;
	int col = 0;

	for (i = 0; i < n; i++) {
		unsigned char c = s[i];
		char tok[4];
		int tl, literal;

		literal = (c >= 33 && c <= 126 && c != '=') || ((c == ' ' || c == '\t') && i + 1 < n);
		if (c == '.' && col == 0)
			literal = 0;
		if (literal) {
			tok[0] = (char)c;
			tl = 1;
		} else {
			snprintf(tok, sizeof tok, "=%02X", c);
			tl = 3;
		}
		if (col + tl > 75) {
			mb_add(b, "=\r\n", 3);
			col = 0;
			if (c == '.') {		/* now at a line's start */
				snprintf(tok, sizeof tok, "=%02X", c);
				tl = 3;
			}
		}
		mb_add(b, tok, (size_t)tl);
		col += tl;
	}
	mb_add(b, "\r\n", 2);
}

/* One line of the text part and its CRLF, 8bit or quoted-printable. */
static void mb_text_line(struct mail_buf *b, const char *s, size_t n, int qp)
{
	if (qp) {
		mb_qp_line(b, (const unsigned char *)s, n);
		return;
	}
	mb_add(b, s, n);
	mb_add(b, "\r\n", 2);
}

/* The text part's body: every line end (LF, CR or CRLF) becomes CRLF, and
 * the body ends with one; with qp each line is quoted-printable. */
static void mb_text(struct mail_buf *b, const char *text, int qp)
{
	const char *p, *start = text;

	for (p = text; *p; p++) {
		if (*p != '\r' && *p != '\n')
			continue;
		mb_text_line(b, start, (size_t)(p - start), qp);
		if (p[0] == '\r' && p[1] == '\n')
			p++;
		start = p + 1;
	}
	if (p > start)
		mb_text_line(b, start, (size_t)(p - start), qp);
}

static void mb_disposition(struct mail_buf *b, const char *filename)
{
	const char *p;

	mb_str(b, "Content-Disposition: attachment; filename=\"");
	for (p = filename; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c >= 0x80) {
			/* an ASCII stand-in for old readers: one '_' per character */
			if ((c & 0xc0) != 0x80)
				mb_add(b, "_", 1);
			continue;
		}
		if (c == '"' || c == '\\')
			mb_add(b, "\\", 1);
		mb_add(b, p, 1);
	}
	mb_add(b, "\"", 1);
	if (!mail_is_ascii(filename)) {
		/* the real name, RFC 2231, on its own folded line */
		mb_str(b, ";\r\n filename*=UTF-8''");
		for (p = filename; *p; p++) {
			unsigned char c = (unsigned char)*p;

			if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			    (c >= '0' && c <= '9') || strchr("!#$&+-.^_`|~", c))
				mb_add(b, p, 1);
			else
				mb_printf(b, "%%%02X", c);
		}
	}
	mb_str(b, "\r\n");
}

/* ======================== the message =================================== */

/* mail_format_for: mail_format, with the text part quoted-printable when qp
 * (for SMTP) instead of 8bit. */
static enum sd_result mail_format_for(const struct mail_message *msg, int64_t date_ms, int qp,
				      char **out, size_t *len)
{
	struct mail_buf b = { 0 };
	char boundary[64];
	const char *text;
	enum sd_result r;
	int i;

	*out = NULL;
	*len = 0;
	if ((r = mail_check(msg)) != SD_OK)
		return r;
	text = msg->text ? msg->text : "";
	mail_boundary(msg->idempotency_key, text, boundary, sizeof boundary);

	mb_address(&b, "From", msg->from_name, msg->from);
	mb_address(&b, "To", msg->to_name, msg->to);
	mb_str(&b, "Subject: ");
	if (msg->subject && !mail_plain_ok(msg->subject))
		mb_words(&b, msg->subject);
	else if (msg->subject)
		mb_str(&b, msg->subject);
	mb_str(&b, "\r\n");
	mb_date(&b, date_ms);
	mb_str(&b, "Message-ID: <");
	mb_str(&b, msg->idempotency_key);
	mb_str(&b, MAIL_ID_DOMAIN ">\r\n");
	mb_str(&b, "MIME-Version: 1.0\r\n");
	mb_printf(&b, "Content-Type: multipart/mixed; boundary=\"%s\"\r\n", boundary);
	mb_str(&b, "\r\n");

	mb_printf(&b, "--%s\r\n", boundary);
	mb_str(&b, "Content-Type: text/plain; charset=utf-8\r\n");
	mb_str(&b, qp ? "Content-Transfer-Encoding: quoted-printable\r\n\r\n"
		      : "Content-Transfer-Encoding: 8bit\r\n\r\n");
	mb_text(&b, text, qp);
	for (i = 0; i < msg->n_attachments; i++) {
		const struct mail_attachment *a = &msg->attachments[i];

		mb_printf(&b, "--%s\r\n", boundary);
		mb_printf(&b, "Content-Type: %s\r\n",
			  a->content_type ? a->content_type : "application/octet-stream");
		mb_str(&b, "Content-Transfer-Encoding: base64\r\n");
		mb_disposition(&b, a->filename);
		mb_str(&b, "\r\n");
		mb_base64(&b, a->data, a->len, MAIL_B64_LINE);
	}
	mb_printf(&b, "--%s--\r\n", boundary);

	if (b.oom) {
		free(b.p);
		return err_set(SD_NOMEM, "out of memory formatting a mail");
	}
	*out = b.p;
	*len = b.len;
	return SD_OK;
}

enum sd_result mail_format(const struct mail_message *msg, int64_t date_ms, char **out,
			   size_t *len)
{
	return mail_format_for(msg, date_ms, 0, out, len);
}

/* ======================== the mail API's body =========================== */

/*
 * mail_json: msg as the mail API's JSON body, after the same checks as
 * mail_format (no CR, LF or NUL in names, subject or addresses; a valid
 * key).  The same message gives the same bytes.  [out] *out (free()), *len.
 */
static enum sd_result mail_json(const struct mail_message *msg, char **out, size_t *len)
{
	json_t *doc = NULL, *list;
	struct mail_buf b64 = { 0 };
	enum sd_result r = SD_OK;
	int i;

	*out = NULL;
	*len = 0;
	if ((r = mail_check(msg)) != SD_OK)
		return r;
	if (msg->text && !text_utf8_valid(msg->text))
		return err_set(SD_INVALID, "mail text is not valid UTF-8");
	doc = json_pack("{s:s,s:s,s:s,s:s}", "from", msg->from, "to", msg->to, "subject",
			msg->subject ? msg->subject : "", "text", msg->text ? msg->text : "");
	list = json_array();
	if (!doc || !list || json_object_set_new(doc, "attachments", list) != 0) {
		r = err_set(SD_NOMEM, "out of memory building a mail");
		goto out;
	}
	for (i = 0; i < msg->n_attachments; i++) {
		const struct mail_attachment *a = &msg->attachments[i];

		b64.len = 0;
		mb_add(&b64, "", 0);	/* an empty attachment is "" */
		mb_base64(&b64, a->data, a->len, 0);
		if (b64.oom || json_array_append_new(list, json_pack("{s:s,s:s,s:s}",
				"filename", a->filename, "content_type",
				a->content_type ? a->content_type : "application/octet-stream",
				"content", b64.p)) != 0) {
			r = err_set(SD_NOMEM, "out of memory building a mail");
			goto out;
		}
	}
	if (!(*out = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS))) {
		r = err_set(SD_NOMEM, "out of memory building a mail");
		goto out;
	}
	*len = strlen(*out);
out:
	free(b64.p);
	json_decref(doc);
	return r;
}

/* ======================== the maildir transport ========================= */

enum sd_result mail_open(const char *url, struct mailer **out)
{
	return mail_open_opts(url, NULL, out);
}

enum sd_result mail_open_opts(const char *url, const struct mail_config *cfg,
			      struct mailer **out)
{
	static const char *subs[] = { "tmp", "new", "cur", ".idem" };
	struct mailer *m = NULL;
	char sub[PATH_MAX];
	const char *path;
	enum sd_result r = SD_OK;
	size_t i, scheme;

	*out = NULL;
	if (!url || !*url)
		return err_set(SD_INVALID, "no mail URL given (expected maildir:PATH, "
			       "smtp://host:port, smtps://host:port or https://host/path)");
	scheme = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
	if (scheme == 0 || url[scheme] != ':')
		return err_set(SD_INVALID, "mail URL has no scheme (expected maildir:PATH)");
	if ((scheme == 4 && strncmp(url, "smtp", 4) == 0) ||
	    (scheme == 5 && strncmp(url, "smtps", 5) == 0) ||
	    (scheme == 5 && strncmp(url, "https", 5) == 0)) {
		if (!(m = calloc(1, sizeof *m)))
			return err_set(SD_NOMEM, "out of memory opening the mailer");
		if ((r = mail_curl_open(url, cfg, &m->curl)) != SD_OK)
			goto out;
		*out = m;
		return SD_OK;
	}
	/* name only the scheme: the rest of a URL may hold a password */
	if (scheme != 7 || strncmp(url, "maildir", 7) != 0)
		return err_set(SD_INVALID, "mail URL scheme '%.*s' is not supported: "
"maildir:PATH, smtp://, smtps:// and https:// are", scheme > 32 ? 32 : (int)scheme, url);
	path = url + 8;
	if (!*path)
		return err_set(SD_INVALID, "maildir URL has no path (expected maildir:PATH)");
	if (strlen(path) + 1 + MAIL_KEY_MAX + 64 >= PATH_MAX)
		return err_set(SD_INVALID, "maildir path too long");
	m = calloc(1, sizeof *m);
	if (!m || !(m->dir = strdup(path))) {
		r = err_set(SD_NOMEM, "out of memory opening the maildir");
		goto out;
	}
	if ((r = fsio_mkdirs(path, 0)) != SD_OK)
		goto out;
	for (i = 0; i < sizeof subs / sizeof subs[0]; i++) {
		snprintf(sub, sizeof sub, "%s/%s", path, subs[i]);
		if ((r = fsio_mkdirs(sub, strlen(path) + 1)) != SD_OK)
			goto out;
	}
	/* also when nothing was made here: an open that crashed may have made
	 * a subfolder without syncing it */
	if ((r = fsio_sync_dir(path)) != SD_OK)
		goto out;
	*out = m;
	m = NULL;
out:
	mail_close(m);
	return r;
}

int mail_is_local(const struct mailer *m)
{
	return m && !m->curl;
}

void mail_close(struct mailer *m)
{
	if (!m)
		return;
	mail_curl_close(m->curl);
	free(m->dir);
	free(m);
}

/*
 * The head of a temp file's path in tmp/, in the maildir habit: time, then
 * something unique to this delivery ("<dir>/tmp/<s>.P<pid>R"; fsio_put adds
 * random digits and the tail).  [out] head holds size bytes.
 */
static void mail_tmp_head(struct mailer *m, char *head, size_t size)
{
	snprintf(head, size, "%s/tmp/%lld.P%ldR", m->dir, (long long)(clock_now_ms() / 1000),
		 (long)getpid());
}

/* The key names files in new/ and .idem/: no '/', and not "." or "..". */
static enum sd_result mail_maildir_key_check(const char *key)
{
	enum sd_result r;

	if ((r = mail_key_check(key)) != SD_OK)
		return r;
	if (strchr(key, '/'))
		return err_set(SD_INVALID, "idempotency key '%.64s' holds a '/'", key);
	if (strcmp(key, ".") == 0 || strcmp(key, "..") == 0)
		return err_set(SD_INVALID, "idempotency key '%s' names a folder", key);
	return SD_OK;
}

/* Read .idem/<key>.  [out] id.  SD_NOT_FOUND when the key is new. */
static enum sd_result mail_idem_read(const char *path, char *id, size_t size)
{
	ssize_t n;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		if (errno == ENOENT)
			return SD_NOT_FOUND;
		return err_set(SD_IO, "cannot open %s: %s", path, strerror(errno));
	}
	while (got < size - 1) {
		n = read(fd, id + got, size - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int e = errno;
			close(fd);
			return err_set(SD_IO, "cannot read %s: %s", path, strerror(e));
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	id[got] = '\0';
	id[strcspn(id, "\r\n")] = '\0';
	return SD_OK;
}

/* Write .idem/<key> holding id: temp in tmp/, rename, sync .idem/. */
static enum sd_result mail_idem_write(struct mailer *m, const char *path, const char *id)
{
	char head[PATH_MAX], line[MAIL_ID_MAX + 2];
	int n = snprintf(line, sizeof line, "%s\n", id);

	mail_tmp_head(m, head, sizeof head);
	return fsio_put(path, line, (size_t)n, head, ".idem", 0600, FSIO_RENAME, NULL);
}

enum sd_result mail_send(struct mailer *m, const struct mail_message *msg,
			 struct mail_result *res)
{
	char idem[PATH_MAX], head[PATH_MAX], dst[PATH_MAX];
	char *text = NULL;
	size_t len;
	enum sd_result r;
	int placed = 0;

	memset(res, 0, sizeof *res);
	if (!m || !msg)
		return err_set(SD_INVALID, "no mailer or no message");
	if (m->curl && mail_curl_is_api(m->curl)) {
		if ((r = mail_json(msg, &text, &len)) != SD_OK)
			return r;
		r = mail_curl_post(m->curl, msg->idempotency_key, text, len, res);
		free(text);
		return r;
	}
	if (m->curl) {
		/* mail_format_for checks every field (CR, LF, NUL, addresses)
		 * before libcurl sees any of them */
		if ((r = mail_format_for(msg, clock_now_ms(), 1, &text, &len)) != SD_OK)
			return r;
		r = mail_curl_send(m->curl, msg->from, msg->to, text, len);
		if (r == SD_OK)
			snprintf(res->message_id, sizeof res->message_id, "%s" MAIL_ID_DOMAIN,
				 msg->idempotency_key);
		free(text);
		return r;
	}
	if ((r = mail_maildir_key_check(msg->idempotency_key)) != SD_OK)
		return r;
	/* format first: a message that is refused is refused every time,
	 * whether or not its key was seen, and before anything is written */
	if ((r = mail_format(msg, clock_now_ms(), &text, &len)) != SD_OK)
		return r;
	snprintf(res->message_id, sizeof res->message_id, "%s" MAIL_ID_DOMAIN,
		 msg->idempotency_key);
	snprintf(idem, sizeof idem, "%s/.idem/%s", m->dir, msg->idempotency_key);
	snprintf(dst, sizeof dst, "%s/new/%s.eml", m->dir, msg->idempotency_key);

	r = mail_idem_read(idem, res->message_id, sizeof res->message_id);
	if (r == SD_OK) {
		if (!res->message_id[0])	/* a damaged record: the id is fixed anyway */
			snprintf(res->message_id, sizeof res->message_id, "%s" MAIL_ID_DOMAIN,
				 msg->idempotency_key);
		res->duplicate = 1;
		goto out;
	}
	if (r != SD_NOT_FOUND)
		goto out;

	mail_tmp_head(m, head, sizeof head);
	if ((r = fsio_put(dst, text, len, head, ".eml", 0600, FSIO_LINK, &placed)) != SD_OK)
		goto out;
	/* not placed: another thread or process delivered this key first */
	res->duplicate = !placed;
	/* the loser writes the record too: it heals a winner that crashed
	 * between its link and its record */
	r = mail_idem_write(m, idem, res->message_id);
out:
	free(text);
	return r;
}
