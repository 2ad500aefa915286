/*
 * test_mail.c: message formatting, header injection, and the maildir
 * transport's one-message-per-key promise under threads and processes.
 *
 * The tests parse what they get back (base64 decoded here, independently of
 * mail.c) rather than trusting the formatter's own view of its output.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mail.h"
#include "testutil.h"

#define DATE_MS 1764488254000LL	/* Sun, 30 Nov 2025 07:37:34 +0000 */

static unsigned char pdf[1001];	/* every byte value; 1001 is not a multiple of 3 */
static struct mail_attachment att = { "tickets-AB12.pdf", "application/pdf", pdf, sizeof pdf };

static void fill_pdf(void)
{
	size_t i;

	for (i = 0; i < sizeof pdf; i++)
		pdf[i] = (unsigned char)(i * 131 + 17);
}

static struct mail_message sample(const char *key)
{
	struct mail_message m = {
		.from = "box@venue.example",
		.from_name = "Stagedoor Box Office",
		.to = "jose@example.org",
		.to_name = "Jos\xc3\xa9 M\xc3\xbcller",	/* José Müller */
		.subject = "Your tickets",
		.text = "Hello Jos\xc3\xa9,\nyour tickets are attached.\n\nSee you at the door.",
		.attachments = &att,
		.n_attachments = 1,
		.idempotency_key = key,
	};

	fill_pdf();
	return m;
}

/* ---- decoding, done here without mail.c ------------------------------- */

static int b64_value(char c)
{
	const char *a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	const char *p = c ? strchr(a, c) : NULL;

	return p ? (int)(p - a) : -1;
}

/* Decode base64 from s up to end, skipping CRLF; fails the test on anything
 * else.  Returns the malloc'd bytes, [out] *len. */
static unsigned char *b64_decode(const char *s, const char *end, size_t *len)
{
	unsigned char *out = malloc((size_t)(end - s) + 1);
	uint32_t acc = 0;
	int bits = 0;
	size_t n = 0;

	assert_non_null(out);
	for (; s < end; s++) {
		int v;

		if (*s == '\r' || *s == '\n')
			continue;
		if (*s == '=')
			break;
		v = b64_value(*s);
		if (v < 0)
			fail_msg("not base64: 0x%02x", (unsigned char)*s);
		acc = (acc << 6) | (uint32_t)v;
		bits += 6;
		if (bits >= 8) {
			out[n++] = (unsigned char)(acc >> (bits - 8));
			bits -= 8;
		}
	}
	*len = n;
	return out;
}

/* The boundary from the message's Content-Type header. */
static void get_boundary(const char *msg, char *out, size_t size)
{
	const char *p = strstr(msg, "\r\nContent-Type: multipart/mixed; boundary=\"");
	const char *q;

	assert_non_null(p);
	p = strchr(p, '"') + 1;
	q = strchr(p, '"');
	assert_non_null(q);
	assert_true((size_t)(q - p) < size);
	snprintf(out, size, "%.*s", (int)(q - p), p);
}

/* Find the part whose Content-Disposition names filename, check its base64
 * lines and return its decoded bytes. */
static unsigned char *attachment_bytes(const char *msg, const char *filename, size_t *len)
{
	char boundary[128], head[300], delim[140];
	const char *p, *end, *line;

	get_boundary(msg, boundary, sizeof boundary);
	snprintf(head, sizeof head, "Content-Disposition: attachment; filename=\"%s\"\r\n\r\n",
		 filename);
	p = strstr(msg, head);
	assert_non_null(p);
	p += strlen(head);
	snprintf(delim, sizeof delim, "\r\n--%s", boundary);
	end = strstr(p - 2, delim);
	assert_non_null(end);
	/* every line at most 76 characters, all but the last exactly 76 */
	for (line = p; line < end;) {
		const char *eol = strstr(line, "\r\n");
		size_t n = (size_t)(eol - line);

		assert_true(n <= 76);
		if (eol < end)
			assert_int_equal(n, 76);
		line = eol + 2;
	}
	return b64_decode(p, end, len);
}

static int starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

static void assert_crlf_only(const char *s, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++) {
		if (s[i] == '\n' && (i == 0 || s[i - 1] != '\r'))
			fail_msg("bare LF at byte %zu", i);
		if (s[i] == '\r' && (i + 1 == len || s[i + 1] != '\n'))
			fail_msg("bare CR at byte %zu", i);
	}
	assert_true(len >= 2 && s[len - 2] == '\r' && s[len - 1] == '\n');
}

/* ---- maildir helpers ------------------------------------------------- */

static int count_files(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static int count_sub(const char *maildir, const char *sub)
{
	char path[400];

	snprintf(path, sizeof path, "%s/%s", maildir, sub);
	return count_files(path);
}

static struct mailer *open_maildir(struct tu_env *env, char *dir, size_t size)
{
	char url[400];
	struct mailer *m;

	snprintf(dir, size, "%s/mail", env->dir);
	snprintf(url, sizeof url, "maildir:%s", dir);
	assert_int_equal(mail_open(url, &m), SD_OK);
	return m;
}

/* ---- formatting ------------------------------------------------------ */

static void test_format_headers_and_crlf(void **state)
{
	struct mail_message m = sample("tickets-17");
	char *out;
	size_t len;
	const char *body;

	(void)state;
	assert_int_equal(mail_format(&m, DATE_MS, &out, &len), SD_OK);
	assert_int_equal(strlen(out), len);
	assert_crlf_only(out, len);

	body = strstr(out, "\r\n\r\n");
	assert_non_null(body);
	assert_true(starts_with(out, "From: \"Stagedoor Box Office\" <box@venue.example>\r\n"));
	/* "José Müller" as an RFC 2047 word */
	assert_non_null(strstr(out, "\r\nTo: =?UTF-8?B?Sm9zw6kgTcO8bGxlcg==?= <jose@example.org>\r\n"));
	assert_non_null(strstr(out, "\r\nSubject: Your tickets\r\n"));
	assert_non_null(strstr(out, "\r\nDate: Sun, 30 Nov 2025 07:37:34 +0000\r\n"));
	assert_non_null(strstr(out, "\r\nMessage-ID: <tickets-17@stagedoor.invalid>\r\n"));
	assert_non_null(strstr(out, "\r\nMIME-Version: 1.0\r\n"));
	assert_non_null(strstr(out, "\r\nContent-Type: multipart/mixed; boundary=\""));
	/* all of those are in the header block, before the first blank line */
	assert_true(strstr(out, "Message-ID:") < body);
	assert_true(strstr(out, "MIME-Version:") < body);
	assert_non_null(strstr(out, "Content-Type: text/plain; charset=utf-8\r\n"
				    "Content-Transfer-Encoding: 8bit\r\n\r\n"
				    "Hello Jos\xc3\xa9,\r\nyour tickets are attached.\r\n\r\n"
				    "See you at the door.\r\n"));
	assert_non_null(strstr(out, "Content-Type: application/pdf\r\n"
				    "Content-Transfer-Encoding: base64\r\n"
				    "Content-Disposition: attachment; filename=\"tickets-AB12.pdf\"\r\n"));
	free(out);
}

static void test_format_attachment_decodes_back(void **state)
{
	struct mail_message m = sample("tickets-18");
	unsigned char *got;
	char *out, boundary[128], closing[160];
	size_t len, n;

	(void)state;
	assert_int_equal(mail_format(&m, DATE_MS, &out, &len), SD_OK);
	got = attachment_bytes(out, "tickets-AB12.pdf", &n);
	assert_int_equal(n, sizeof pdf);
	assert_memory_equal(got, pdf, sizeof pdf);
	free(got);
	/* the message closes with the final delimiter */
	get_boundary(out, boundary, sizeof boundary);
	snprintf(closing, sizeof closing, "\r\n--%s--\r\n", boundary);
	assert_true(len > strlen(closing));
	assert_string_equal(out + len - strlen(closing), closing);
	free(out);
}

static void test_format_is_deterministic_and_boundary_avoids_text(void **state)
{
	struct mail_message m = sample("tickets-19");
	char *a, *b, boundary[128], boundary2[128], text[300];
	size_t la, lb;

	(void)state;
	assert_int_equal(mail_format(&m, DATE_MS, &a, &la), SD_OK);
	assert_int_equal(mail_format(&m, DATE_MS, &b, &lb), SD_OK);
	assert_int_equal(la, lb);
	assert_memory_equal(a, b, la);
	get_boundary(a, boundary, sizeof boundary);
	free(b);

	/* a text that holds the boundary line gets another boundary */
	snprintf(text, sizeof text, "evil\n--%s\nContent-Type: text/html\n\n<b>x</b>\n", boundary);
	m.text = text;
	assert_int_equal(mail_format(&m, DATE_MS, &b, &lb), SD_OK);
	get_boundary(b, boundary2, sizeof boundary2);
	assert_string_not_equal(boundary, boundary2);
	assert_null(strstr(text, boundary2));
	free(a);
	free(b);
}

static void test_format_text_line_ends(void **state)
{
	struct mail_message m = sample("tickets-22");
	char *out;
	size_t len;

	(void)state;
	m.text = "one\r\ntwo\rthree\nfour\n\nfive";
	m.n_attachments = 0;
	assert_int_equal(mail_format(&m, DATE_MS, &out, &len), SD_OK);
	assert_crlf_only(out, len);
	assert_non_null(strstr(out, "\r\n\r\none\r\ntwo\r\nthree\r\nfour\r\n\r\nfive\r\n--"));
	free(out);
}

static void test_format_names_and_subjects(void **state)
{
	struct mail_message m = sample("tickets-20");
	char subject[400], *out, *p;
	size_t len;
	int i, words = 0;

	(void)state;
	/* ASCII names are quoted, with their quotes escaped */
	m.to_name = "Ann \"Ace\" Lee";
	m.from_name = NULL;
	m.n_attachments = 0;
	m.text = NULL;
	/* a long non-ASCII subject: several words, each at most 75 chars,
	 * none splitting a character */
	subject[0] = '\0';
	for (i = 0; i < 40; i++)
		strcat(subject, "\xc3\xa9t\xc3\xa9 ");
	m.subject = subject;
	assert_int_equal(mail_format(&m, DATE_MS, &out, &len), SD_OK);
	assert_crlf_only(out, len);
	assert_non_null(strstr(out, "\r\nTo: \"Ann \\\"Ace\\\" Lee\" <jose@example.org>\r\n"));
	assert_true(starts_with(out, "From: box@venue.example\r\n"));
	for (p = strstr(out, "=?UTF-8?B?"); p; p = strstr(p + 1, "=?UTF-8?B?")) {
		char *q = strstr(p + 10, "?=");
		size_t wl;
		unsigned char *dec;

		assert_non_null(q);
		wl = (size_t)(q + 2 - p);
		assert_true(wl <= 75);
		dec = b64_decode(p + 10, q, &len);
		/* a whole number of characters: never ends inside "é" */
		assert_true(len > 0 && dec[len - 1] != 0xc3);
		assert_true(dec[0] != 0xa9);
		free(dec);
		words++;
	}
	assert_true(words >= 3);
	free(out);
}

static void test_header_injection_refused(void **state)
{
	struct tu_env *env = *state;
	struct mail_message m;
	struct mail_result res;
	struct mail_attachment bad_att;
	struct mailer *mr;
	char dir[300], *out;
	size_t len;
	int i;

	mr = open_maildir(env, dir, sizeof dir);
	for (i = 0; i < 12; i++) {
		m = sample("tickets-21");
		bad_att = att;
		switch (i) {
		case 0: m.subject = "Hi\r\nBcc: all@evil.example"; break;
		case 1: m.subject = "Hi\nBcc: all@evil.example"; break;
		case 2: m.to_name = "Jos\xc3\xa9\rBcc: all@evil.example"; break;
		case 3: m.from_name = "Box\nOffice"; break;
		case 4: m.to = "jose@example.org\r\nBcc: all@evil.example"; break;
		case 5: m.from = "box@venue.example\n"; break;
		case 6: bad_att.filename = "t.pdf\r\nContent-Type: text/html"; break;
		case 7: bad_att.filename = "t\n.pdf"; break;
		case 8: m.idempotency_key = "k\r\nBcc: all@evil.example"; break;
		case 9: m.to = "Jose <jose@example.org>"; break;
		case 10: m.idempotency_key = NULL; break;
		case 11: bad_att.content_type = "text/plain\r\nX-Evil: 1"; break;
		}
		m.attachments = &bad_att;
		out = (char *)"untouched";
		if (mail_format(&m, DATE_MS, &out, &len) != SD_INVALID)
			fail_msg("case %d was formatted", i);
		/* the message may quote the input, but stays one line */
		if (strpbrk(err_msg(), "\r\n"))
			fail_msg("case %d: message breaks the line: %s", i, err_msg());
		assert_null(out);
		memset(&res, 0x55, sizeof res);
		if (mail_send(mr, &m, &res) != SD_INVALID)
			fail_msg("case %d was sent", i);
		assert_int_equal(res.duplicate, 0);
	}
	/* nothing at all was written */
	assert_int_equal(count_sub(dir, "tmp"), 0);
	assert_int_equal(count_sub(dir, "new"), 0);
	assert_int_equal(count_sub(dir, "cur"), 0);
	assert_int_equal(count_sub(dir, ".idem"), 0);
	mail_close(mr);
}

static void test_address_valid(void **state)
{
	const char *good[] = { "a@b.co", "jose.muller+tix@mail.example.org", "x_y-z@d-1.example" };
	const char *bad[] = { "", "plain", "@example.org", "a@", "a@localhost", "a b@example.org",
			      "\"a\"@example.org", "<a@example.org>", "a@example.org,b@example.org",
			      "a@@example.org", "a@b@example.org", "a@.example.org", "a@example.",
			      "a@example..org", "j\xc3\xb6@example.org", "a@example.org\r\n",
			      "a\tb@example.org", "a\x1b[2J@example.org", NULL };
	char long_addr[300];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof good / sizeof good[0]; i++)
		if (mail_address_valid(good[i]) != SD_OK)
			fail_msg("'%s' refused: %s", good[i], err_msg());
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (mail_address_valid(bad[i]) != SD_INVALID)
			fail_msg("'%s' accepted", bad[i] ? bad[i] : "(null)");
		assert_null(strpbrk(err_msg(), "\r\n"));
	}
	memset(long_addr, 'a', sizeof long_addr);
	strcpy(long_addr + 300 - 13, "@example.org");	/* 299 characters */
	assert_int_equal(mail_address_valid(long_addr), SD_INVALID);
	strcpy(long_addr + 254 - 12, "@example.org");	/* 254: the limit */
	assert_int_equal(mail_address_valid(long_addr), SD_OK);
}

/* ---- the maildir transport ------------------------------------------- */

static void test_open_urls(void **state)
{
	struct tu_env *env = *state;
	struct mailer *m;
	char dir[300], sub[400];
	struct stat st;
	const char *subs[] = { "tmp", "new", "cur", ".idem" };
	size_t i;

	/* smtp:// and smtps:// are tests/test_smtp.c's; a password in the
	 * URL is refused without being echoed */
	assert_int_equal(mail_open("smtp://user:s3cret@mail.example.org:587", &m), SD_INVALID);
	assert_null(m);
	assert_null(strstr(err_msg(), "s3cret"));
	assert_int_equal(mail_open("imap://user:s3cret@mail.example.org", &m), SD_INVALID);
	assert_non_null(strstr(err_msg(), "'imap'"));
	assert_null(strstr(err_msg(), "s3cret"));
	/* https:// is the mail API (tests/test_mailapi.c): it opens without a
	 * connection; a query or a password in its URL is refused */
	assert_int_equal(mail_open("https://api.example/send", &m), SD_OK);
	mail_close(m);
	assert_int_equal(mail_open("https://api.example/send?token=s3cret", &m), SD_INVALID);
	assert_null(strstr(err_msg(), "s3cret"));
	assert_int_equal(mail_open("https://user:s3cret@api.example/send", &m), SD_INVALID);
	assert_null(strstr(err_msg(), "s3cret"));
	assert_int_equal(mail_open("maildir:", &m), SD_INVALID);
	assert_int_equal(mail_open("/just/a/path", &m), SD_INVALID);
	assert_int_equal(mail_open("", &m), SD_INVALID);

	m = open_maildir(env, dir, sizeof dir);
	for (i = 0; i < 4; i++) {
		snprintf(sub, sizeof sub, "%s/%s", dir, subs[i]);
		assert_int_equal(stat(sub, &st), 0);
		assert_true(S_ISDIR(st.st_mode));
	}
	mail_close(m);
	mail_close(NULL);
}

static void test_send_twice_one_message(void **state)
{
	struct tu_env *env = *state;
	struct mail_message msg = sample("tickets-42");
	struct mail_result r1, r2;
	struct mailer *m;
	char dir[300], path[400];
	unsigned char *file, *got;
	size_t size, n;

	m = open_maildir(env, dir, sizeof dir);
	assert_int_equal(mail_send(m, &msg, &r1), SD_OK);
	assert_int_equal(r1.duplicate, 0);
	assert_string_equal(r1.message_id, "tickets-42@stagedoor.invalid");
	assert_int_equal(count_sub(dir, "new"), 1);

	/* the file is a complete message: headers, text, attachment, end */
	snprintf(path, sizeof path, "%s/new/tickets-42.eml", dir);
	file = tu_slurp(path, &size);
	assert_crlf_only((const char *)file, size);
	assert_non_null(strstr((char *)file, "Message-ID: <tickets-42@stagedoor.invalid>\r\n"));
	/* the date is the (fake) clock's: 1,000,000,000 ms */
	assert_non_null(strstr((char *)file, "Date: Mon, 12 Jan 1970 13:46:40 +0000\r\n"));
	got = attachment_bytes((const char *)file, "tickets-AB12.pdf", &n);
	assert_int_equal(n, sizeof pdf);
	assert_memory_equal(got, pdf, sizeof pdf);
	free(got);

	/* again: nothing new, the same id */
	msg.subject = "Your tickets (retry)";
	assert_int_equal(mail_send(m, &msg, &r2), SD_OK);
	assert_int_equal(r2.duplicate, 1);
	assert_string_equal(r2.message_id, r1.message_id);
	assert_int_equal(count_sub(dir, "new"), 1);
	assert_int_equal(count_sub(dir, "tmp"), 0);
	assert_int_equal(count_sub(dir, ".idem"), 1);
	free(file);

	/* a mail reader moving the message to cur/ does not reopen the key */
	{
		char cur[400];

		snprintf(cur, sizeof cur, "%s/cur/tickets-42.eml:2,S", dir);
		assert_int_equal(rename(path, cur), 0);
	}
	assert_int_equal(mail_send(m, &msg, &r2), SD_OK);
	assert_int_equal(r2.duplicate, 1);
	assert_int_equal(count_sub(dir, "new"), 0);
	mail_close(m);
}

static void test_different_keys_separate_files(void **state)
{
	struct tu_env *env = *state;
	struct mail_message a = sample("tickets-1"), b = sample("tickets-2");
	struct mail_result r;
	struct mailer *m;
	char dir[300], path[400];
	struct stat st;

	m = open_maildir(env, dir, sizeof dir);
	assert_int_equal(mail_send(m, &a, &r), SD_OK);
	assert_int_equal(r.duplicate, 0);
	assert_int_equal(mail_send(m, &b, &r), SD_OK);
	assert_int_equal(r.duplicate, 0);
	assert_string_equal(r.message_id, "tickets-2@stagedoor.invalid");
	assert_int_equal(count_sub(dir, "new"), 2);
	snprintf(path, sizeof path, "%s/new/tickets-1.eml", dir);
	assert_int_equal(stat(path, &st), 0);
	snprintf(path, sizeof path, "%s/new/tickets-2.eml", dir);
	assert_int_equal(stat(path, &st), 0);
	mail_close(m);
}

static void test_keys_that_name_folders_refused(void **state)
{
	struct tu_env *env = *state;
	struct mail_message msg;
	struct mail_result r;
	struct mailer *m;
	char dir[300];
	const char *bad[] = { "../x", "a/b", ".", "..", "a b", "a@b", "<a>" };
	size_t i;

	m = open_maildir(env, dir, sizeof dir);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		msg = sample(bad[i]);
		if (mail_send(m, &msg, &r) != SD_INVALID)
			fail_msg("key '%s' was sent", bad[i]);
	}
	assert_int_equal(count_sub(dir, "new"), 0);
	assert_int_equal(count_sub(dir, ".idem"), 0);
	/* and nothing beside the maildir */
	assert_int_equal(count_files(env->dir), 1);
	mail_close(m);
}

/* ---- the same key at once -------------------------------------------- */

#define RACERS 8

struct racer {
	struct mailer *m;
	pthread_barrier_t *start;
	enum sd_result r;
	struct mail_result res;
};

static void *racer_run(void *arg)
{
	struct racer *rc = arg;
	struct mail_message msg = sample("tickets-race");

	pthread_barrier_wait(rc->start);
	rc->r = mail_send(rc->m, &msg, &rc->res);
	return NULL;
}

static void test_threads_same_key_one_message(void **state)
{
	struct tu_env *env = *state;
	struct racer rc[RACERS];
	pthread_t th[RACERS];
	pthread_barrier_t start;
	struct mailer *m;
	char dir[300];
	int i, round, fresh;

	/* a few rounds, each on a fresh maildir, for more chances to
	 * interleave */
	for (round = 0; round < 5; round++) {
		char url[400];

		snprintf(dir, sizeof dir, "%s/mail%d", env->dir, round);
		snprintf(url, sizeof url, "maildir:%s", dir);
		assert_int_equal(mail_open(url, &m), SD_OK);
		assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
		for (i = 0; i < RACERS; i++) {
			rc[i].m = m;
			rc[i].start = &start;
			assert_int_equal(pthread_create(&th[i], NULL, racer_run, &rc[i]), 0);
		}
		fresh = 0;
		for (i = 0; i < RACERS; i++) {
			pthread_join(th[i], NULL);
			assert_int_equal(rc[i].r, SD_OK);
			assert_string_equal(rc[i].res.message_id, "tickets-race@stagedoor.invalid");
			fresh += !rc[i].res.duplicate;
		}
		pthread_barrier_destroy(&start);
		assert_int_equal(fresh, 1);
		assert_int_equal(count_sub(dir, "new"), 1);
		assert_int_equal(count_sub(dir, "tmp"), 0);
		assert_int_equal(count_sub(dir, ".idem"), 1);
		mail_close(m);
	}
}

static void test_processes_same_key_one_message(void **state)
{
	struct tu_env *env = *state;
	char dir[300], url[400];
	pid_t kids[4];
	int i, fresh = 0;

	snprintf(dir, sizeof dir, "%s/mail", env->dir);
	snprintf(url, sizeof url, "maildir:%s", dir);
	for (i = 0; i < 4; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			struct mail_message msg = sample("tickets-procs");
			struct mail_result res;
			struct mailer *m;

			/* exit 10: sent, 11: duplicate, 1: failed */
			if (mail_open(url, &m) != SD_OK || mail_send(m, &msg, &res) != SD_OK)
				_exit(1);
			mail_close(m);
			_exit(res.duplicate ? 11 : 10);
		}
	}
	for (i = 0; i < 4; i++) {
		int rc = tu_wait(kids[i], 10000);

		assert_true(rc == 10 || rc == 11);
		fresh += rc == 10;
	}
	assert_int_equal(fresh, 1);
	assert_int_equal(count_sub(dir, "new"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_format_headers_and_crlf),
		cmocka_unit_test(test_format_attachment_decodes_back),
		cmocka_unit_test(test_format_is_deterministic_and_boundary_avoids_text),
		cmocka_unit_test(test_format_text_line_ends),
		cmocka_unit_test(test_format_names_and_subjects),
		cmocka_unit_test(test_address_valid),
		cmocka_unit_test_setup_teardown(test_header_injection_refused, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_open_urls, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_send_twice_one_message, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_different_keys_separate_files, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_keys_that_name_folders_refused, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_threads_same_key_one_message, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_processes_same_key_one_message, tu_setup_nodb,
						tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
