/*
 * mailcheck.c: what a stored email says, read as its buyer would read it.
 *
 * The verdict counts a message for the order its text names (the buyer
 * reads "Order T..." in the tickets email, "your order T..." in a
 * cancellation), not for the order its key suggests: a key that a lost
 * commit handed to another order carries the first order's email, and the
 * second order's buyer has none.  And a ticket code is judged at the door:
 * each code printed in a message's PDF (pdftotext reads it back) is scanned
 * by `stagedoor scan` on a copy of the final database, and the order whose
 * seat it admits must be the message's own.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "chaos.h"

/* ======================== the text ====================================== */

/* An order's public id: "T" and 9 of 23456789ABCDEFGHJKMNPQRSTUVWXYZ. */
static int public_id_at(const char *p)
{
	static const char alphabet[] = "23456789ABCDEFGHJKMNPQRSTUVWXYZ";
	int i;

	if (p[0] != 'T')
		return 0;
	for (i = 1; i < 10; i++)
		if (!p[i] || !strchr(alphabet, p[i]))
			return 0;
	return !((p[10] >= 'A' && p[10] <= 'Z') || (p[10] >= '0' && p[10] <= '9'));
}

/* The message's text part: after the head, before any attachment. */
static const char *body_of(const char *msg)
{
	const char *p = strstr(msg, "\r\n\r\n");

	return p ? p + 4 : msg;
}

void mail_order_named(const char *msg, char *pub, size_t size)
{
	static const char *const marks[] = { "\nOrder ", "your order " };
	const char *body = body_of(msg), *p;
	size_t i;

	pub[0] = '\0';
	for (i = 0; i < sizeof marks / sizeof marks[0]; i++)
		if ((p = strstr(body, marks[i])) && public_id_at(p + strlen(marks[i]))) {
			snprintf(pub, size, "%.10s", p + strlen(marks[i]));
			return;
		}
}

/* ======================== the PDF ======================================= */

static int b64_value(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* The bytes of the first application/pdf part into *out (free()); 0, or -1
 * when the message has none. */
static int pdf_part(const char *msg, unsigned char **out, size_t *len)
{
	const char *p = strcasestr(msg, "Content-Type: application/pdf"), *end;
	unsigned char *buf;
	unsigned acc = 0;
	int bits = 0, v;
	size_t n = 0;

	if (!p || !(p = strstr(p, "\r\n\r\n")))
		return -1;
	p += 4;
	if (!(end = strstr(p, "\r\n--")))
		end = p + strlen(p);
	if (!(buf = malloc((size_t)(end - p) / 4 * 3 + 3)))
		return -1;
	for (; p < end; p++) {
		if ((v = b64_value((unsigned char)*p)) < 0)
			continue;	/* line breaks, padding */
		acc = acc << 6 | (unsigned)v;
		if ((bits += 6) >= 8) {
			bits -= 8;
			buf[n++] = (unsigned char)(acc >> bits);
		}
	}
	*out = buf;
	*len = n;
	return 0;
}

/* A code as code.c writes it: 52 characters of A-Z and 2-7. */
static int code_at(const char *p, const char *start)
{
	int i;

	if (p > start && ((p[-1] >= 'A' && p[-1] <= 'Z') || (p[-1] >= '0' && p[-1] <= '9')))
		return 0;
	for (i = 0; i < CHAOS_CODE_LEN; i++)
		if (!((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '2' && p[i] <= '7')))
			return 0;
	return !((p[i] >= 'A' && p[i] <= 'Z') || (p[i] >= '0' && p[i] <= '9'));
}

int mail_codes(const char *msg, const char *tmp, char (*codes)[CHAOS_CODE_LEN + 1], int max)
{
	const char *argv[] = { "/usr/bin/pdftotext", "-q", tmp, "-", NULL };
	unsigned char *pdf = NULL;
	size_t len = 0;
	char *text;
	const char *p;
	int fd, n = 0;

	if (pdf_part(msg, &pdf, &len) != 0)
		return 0;
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, pdf, len) != (ssize_t)len) {
		if (fd >= 0)
			close(fd);
		free(pdf);
		return -1;
	}
	close(fd);
	free(pdf);
	if (!(text = malloc(1 << 20)))
		return -1;
	if (proc_run(argv, text, 1 << 20, 0) != 0) {
		free(text);
		return -1;
	}
	for (p = text; *p && n < max; p++)
		if (code_at(p, text)) {
			snprintf(codes[n++], CHAOS_CODE_LEN + 1, "%.*s", CHAOS_CODE_LEN, p);
			p += CHAOS_CODE_LEN - 1;
		}
	free(text);
	return n;
}

/* ======================== the door ====================================== */

/* copy_file: src to dst, mode 0600; 0 or -1. */
static int copy_file(const char *src, const char *dst)
{
	char buf[65536];
	ssize_t n;
	int in = open(src, O_RDONLY | O_CLOEXEC), out, rc = 0;

	if (in < 0)
		return -1;
	if ((out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		close(in);
		return -1;
	}
	while ((n = read(in, buf, sizeof buf)) > 0)
		if (write(out, buf, (size_t)n) != n)
			rc = -1;
	if (n < 0)
		rc = -1;
	close(in);
	close(out);
	return rc;
}

int mail_door_open(const char *db_path, const char *key_path, const char *dir, char *copy,
		   size_t size, char *err, size_t esize)
{
	sqlite3 *from = NULL, *to = NULL;
	sqlite3_backup *b;
	char key[CHAOS_PATH_MAX + 32];
	int rc;

	/* a folder of its own: the box's ticket.key may be beside dir's files */
	snprintf(key, sizeof key, "%s/door", dir);
	if (mkdir(key, 0700) != 0 && errno != EEXIST) {
		snprintf(err, esize, "the door's folder %s: %s", key, strerror(errno));
		return -1;
	}
	snprintf(copy, size, "%s/door/stagedoor.db", dir);
	snprintf(key, sizeof key, "%s/door/ticket.key", dir);
	unlink(copy);
	if (sqlite3_open_v2(db_path, &from, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
	    sqlite3_open_v2(copy, &to, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
		    SQLITE_OK ||
	    !(b = sqlite3_backup_init(to, "main", from, "main"))) {
		snprintf(err, esize, "the door's copy of %s: %s", db_path,
			 sqlite3_errmsg(to ? to : from));
		sqlite3_close(from);
		sqlite3_close(to);
		return -1;
	}
	while ((rc = sqlite3_backup_step(b, 1024)) == SQLITE_OK)
		;
	sqlite3_backup_finish(b);
	sqlite3_close(from);
	sqlite3_close(to);
	if (rc != SQLITE_DONE) {
		snprintf(err, esize, "the door's copy of %s failed (%d)", db_path, rc);
		return -1;
	}
	chmod(copy, 0600);
	if (copy_file(key_path, key) != 0) {
		snprintf(err, esize, "the door's copy of %s: %s", key_path, strerror(errno));
		return -1;
	}
	return 0;
}

int mail_door_scan(const char *bin, const char *copy, const char *code, char *pub, size_t size,
		   int *admitted)
{
	const char *argv[] = { bin, "scan", "--db", copy, code, NULL };
	char out[512];
	const char *p;
	int rc = proc_run(argv, out, sizeof out, 1);

	pub[0] = '\0';
	*admitted = rc == 0 && strncmp(out, "admitted", 8) == 0;
	if ((rc == 4 && strncmp(out, "invalid", 7) == 0) ||
	    (rc == 5 && strncmp(out, "event cancelled", 15) == 0))
		return 0;	/* the door turns it away (admitting no seat) */
	if ((rc != 0 && rc != 3 && rc != 5) || !(p = strstr(out, ", order ")))
		return -1;
	snprintf(pub, size, "%.*s", (int)strcspn(p + 8, " \r\n"), p + 8);
	return 1;
}
