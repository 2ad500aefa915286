/*
 * sigv4.c: AWS Signature Version 4 (sigv4.h), hashing through code.h.
 */
#define _GNU_SOURCE
#include "sigv4.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "code.h"

#define ALGORITHM "AWS4-HMAC-SHA256"
#define CANON_MAX (64 * 1024)	/* the canonical request without the body */

/* ---- a growing string ------------------------------------------------------- */

struct sbuf {
	char *p;
	size_t len, cap;
	int full;
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
	if (b->full || b->len + n + 1 > b->cap) {
		b->full = 1;
		return;
	}
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s)
{
	sb_putn(b, s, strlen(s));
}

static int unreserved(unsigned char c)
{
	return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~';
}

/* s[0..n) percent-encoded (RFC 3986; '/' kept when keep_slash) */
static void sb_uri(struct sbuf *b, const char *s, size_t n, int keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t i;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[3] = { '%', hex[c >> 4], hex[c & 15] };

		if (unreserved(c) || (keep_slash && c == '/'))
			sb_putn(b, (const char *)&s[i], 1);
		else
			sb_putn(b, e, 3);
	}
}

/* ---- the Authorization header -------------------------------------------------- */

/* the value of "name=" in the header's list (up to ',' or the end) */
static const char *part(const char *h, const char *name, size_t *n)
{
	size_t len = strlen(name);
	const char *p = h;

	while ((p = strstr(p, name))) {
		if ((p == h || p[-1] == ' ' || p[-1] == ',') && p[len] == '=') {
			p += len + 1;
			*n = strcspn(p, ", ");
			return p;
		}
		p += len;
	}
	return NULL;
}

static enum sd_result copy_part(const char *h, const char *name, char *out, size_t size)
{
	size_t n = 0;
	const char *p = part(h, name, &n);

	if (!p || n == 0)
		return err_set(SD_INVALID, "the Authorization header has no %s", name);
	if (n >= size)
		return err_set(SD_INVALID, "the Authorization header's %s is too long", name);
	memcpy(out, p, n);
	out[n] = '\0';
	return SD_OK;
}

/* Credential=KEY/DAY/REGION/SERVICE/aws4_request */
static enum sd_result scope(const char *cred, struct sigv4_auth *a)
{
	char *f[5], *save = NULL, buf[SIGV4_KEY_ID_MAX + 128];
	int n = 0;
	size_t i;

	snprintf(buf, sizeof buf, "%s", cred);
	for (char *t = strtok_r(buf, "/", &save); t && n < 5; t = strtok_r(NULL, "/", &save))
		f[n++] = t;
	if (n != 5 || strtok_r(NULL, "/", &save) || strcmp(f[4], "aws4_request") != 0 ||
	    strlen(f[0]) > SIGV4_KEY_ID_MAX || strlen(f[1]) != 8 ||
	    strlen(f[2]) > SIGV4_SCOPE_PART_MAX || strlen(f[3]) > SIGV4_SCOPE_PART_MAX)
		return err_set(SD_INVALID, "the credential must be KEY/YYYYMMDD/REGION/SERVICE/"
			       "aws4_request");
	for (i = 0; i < 8; i++)
		if (!isdigit((unsigned char)f[1][i]))
			return err_set(SD_INVALID, "the credential's date must be YYYYMMDD");
	snprintf(a->key_id, sizeof a->key_id, "%s", f[0]);
	memcpy(a->date, f[1], 9);
	snprintf(a->region, sizeof a->region, "%s", f[2]);
	snprintf(a->service, sizeof a->service, "%s", f[3]);
	return SD_OK;
}

/* lower case, sorted, no empty name, host among them */
static enum sd_result signed_list_ok(const char *list)
{
	const char *p = list, *prev = NULL;
	size_t prev_n = 0;
	int host = 0;

	while (*p) {
		size_t n = strcspn(p, ";"), i;

		if (n == 0)
			return err_set(SD_INVALID, "SignedHeaders has an empty name");
		for (i = 0; i < n; i++)
			if (isupper((unsigned char)p[i]) || (unsigned char)p[i] <= ' ')
				return err_set(SD_INVALID, "SignedHeaders must be lower case");
		if (prev) {
			int c = strncmp(prev, p, prev_n < n ? prev_n : n);

			if (c > 0 || (c == 0 && prev_n >= n))
				return err_set(SD_INVALID, "SignedHeaders must be sorted, each once");
		}
		host |= n == 4 && strncmp(p, "host", 4) == 0;
		prev = p;
		prev_n = n;
		p += n;
		if (*p == ';')
			p++;
	}
	return host ? SD_OK : err_set(SD_INVALID, "SignedHeaders must include host");
}

enum sd_result sigv4_parse(const char *h, struct sigv4_auth *a)
{
	char cred[SIGV4_KEY_ID_MAX + 128];
	enum sd_result r;
	size_t i;

	memset(a, 0, sizeof *a);
	if (!h || strncmp(h, ALGORITHM " ", sizeof ALGORITHM) != 0)
		return err_set(SD_INVALID, "the Authorization header must be " ALGORITHM);
	if ((r = copy_part(h, "Credential", cred, sizeof cred)) != SD_OK ||
	    (r = scope(cred, a)) != SD_OK ||
	    (r = copy_part(h, "SignedHeaders", a->signed_headers, sizeof a->signed_headers)) !=
	    SD_OK || (r = signed_list_ok(a->signed_headers)) != SD_OK ||
	    (r = copy_part(h, "Signature", a->signature, sizeof a->signature)) != SD_OK)
		return r;
	for (i = 0; a->signature[i]; i++)
		if (!isxdigit((unsigned char)a->signature[i]) || isupper((unsigned char)a->signature[i]))
			break;
	if (i != SIGV4_HEX || a->signature[i])
		return err_set(SD_INVALID, "the signature must be 64 lower-case hex digits");
	return SD_OK;
}

/* ---- the request ---------------------------------------------------------------- */

const char *sigv4_header(const struct sigv4_request *rq, const char *name)
{
	size_t i;

	for (i = 0; i < rq->n_headers; i++)
		if (strcasecmp(rq->headers[i].name, name) == 0)
			return rq->headers[i].value;
	return NULL;
}

enum sd_result sigv4_time(const struct sigv4_request *rq, const struct sigv4_auth *a,
			  int64_t *ms)
{
	const char *d = sigv4_header(rq, "x-amz-date");
	struct tm tm;
	char *end;

	memset(&tm, 0, sizeof tm);
	if (!d || strlen(d) != 16 || !(end = strptime(d, "%Y%m%dT%H%M%SZ", &tm)) || *end)
		return err_set(SD_INVALID, "X-Amz-Date must be YYYYMMDDTHHMMSSZ");
	if (strncmp(d, a->date, 8) != 0)
		return err_set(SD_INVALID, "X-Amz-Date's day is not the credential's");
	*ms = (int64_t)timegm(&tm) * 1000;
	return SD_OK;
}

/* a header's value: trimmed, inner runs of blanks as one space */
static void sb_value(struct sbuf *b, const char *v)
{
	int space = 0;

	while (*v == ' ' || *v == '\t')
		v++;
	for (; *v; v++) {
		if (*v == ' ' || *v == '\t') {
			space = 1;
			continue;
		}
		if (space)
			sb_putn(b, " ", 1);
		space = 0;
		sb_putn(b, v, 1);
	}
}

static enum sd_result canon_headers(struct sbuf *b, const struct sigv4_request *rq,
				    const char *list)
{
	const char *p = list;

	while (*p) {
		size_t n = strcspn(p, ";"), i;
		int found = 0;

		sb_putn(b, p, n);
		sb_putn(b, ":", 1);
		for (i = 0; i < rq->n_headers; i++) {
			if (strlen(rq->headers[i].name) != n ||
			    strncasecmp(rq->headers[i].name, p, n) != 0)
				continue;
			if (found++)
				sb_putn(b, ",", 1);
			sb_value(b, rq->headers[i].value);
		}
		if (!found)
			return err_set(SD_INVALID, "the signed header %.*s is not in the request",
				       (int)n, p);
		sb_putn(b, "\n", 1);
		p += n;
		if (*p == ';')
			p++;
	}
	return SD_OK;
}

struct qpair {
	char *k, *v;		/* encoded as the canonical form wants */
};

static int qpair_cmp(const void *x, const void *y)
{
	const struct qpair *a = x, *b = y;
	int c = strcmp(a->k, b->k);

	return c ? c : strcmp(a->v, b->v);
}

/* the encoded form of the decoded s[0..n) */
static char *requote(const char *s, size_t n)
{
	char *dec = malloc(n + 1), *out = malloc(3 * n + 1);
	struct sbuf b = { out, 0, 3 * n + 1, 0 };
	size_t i, j = 0;

	if (!dec || !out) {
		free(dec);
		free(out);
		return NULL;
	}
	for (i = 0; i < n; i++) {
		unsigned int c;

		/* '+' is itself: the SDKs encode a space as %20 */
		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
		    isxdigit((unsigned char)s[i + 2]) && sscanf(s + i + 1, "%2x", &c) == 1) {
			dec[j++] = (char)c;
			i += 2;
		} else {
			dec[j++] = s[i];
		}
	}
	out[0] = '\0';
	sb_uri(&b, dec, j, 0);
	free(dec);
	return out;
}

/* the query's pairs, decoded, encoded again and sorted */
static enum sd_result canon_query(struct sbuf *b, const char *q)
{
	struct qpair *pairs = NULL;
	size_t n = 0, cap = 0, i;
	const char *p = q;
	enum sd_result r = SD_OK;

	while (p && *p) {
		size_t len = strcspn(p, "&"), klen = strcspn(p, "=");

		if (klen > len)
			klen = len;
		if (len) {
			if (n == cap) {
				struct qpair *m = realloc(pairs, (cap = cap ? 2 * cap : 8) *
							  sizeof *m);
				if (!m) {
					r = err_set(SD_NOMEM, "out of memory");
					break;
				}
				pairs = m;
			}
			pairs[n].k = requote(p, klen);
			pairs[n].v = requote(p + klen + (klen < len), len - klen - (klen < len));
			if (!pairs[n].k || !pairs[n].v) {
				free(pairs[n].k);
				free(pairs[n].v);
				r = err_set(SD_NOMEM, "out of memory");
				break;
			}
			if (strcmp(pairs[n].k, "X-Amz-Algorithm") == 0)
				r = err_set(SD_INVALID, "a presigned URL is not taken: sign the "
					    "Authorization header");
			n++;
		}
		p += len;
		if (*p == '&')
			p++;
	}
	if (r == SD_OK && n > 0) {
		qsort(pairs, n, sizeof *pairs, qpair_cmp);
		for (i = 0; i < n; i++) {
			if (i)
				sb_putn(b, "&", 1);
			sb_puts(b, pairs[i].k);
			sb_putn(b, "=", 1);
			sb_puts(b, pairs[i].v);
		}
	}
	for (i = 0; i < n; i++) {
		free(pairs[i].k);
		free(pairs[i].v);
	}
	free(pairs);
	return r;
}

/* the body's hash as signed: the header's when sent (and then it must be
 * the body's), else the body's own */
static enum sd_result payload_hash(const struct sigv4_request *rq, char out[SIGV4_HEX + 1])
{
	const char *h = sigv4_header(rq, "x-amz-content-sha256");

	code_sha256_hex(rq->body ? rq->body : "", rq->body_len, out);
	if (h && strcmp(h, "UNSIGNED-PAYLOAD") == 0)
		return err_set(SD_INVALID, "UNSIGNED-PAYLOAD is not taken: sign the body");
	if (h && strcasecmp(h, out) != 0)
		return err_set(SD_INVALID, "X-Amz-Content-Sha256 is not the body's hash");
	return SD_OK;
}

static enum sd_result canonical(const struct sigv4_request *rq, const char *signed_headers,
				struct sbuf *b)
{
	char hash[SIGV4_HEX + 1];
	enum sd_result r;
	const char *path = rq->path && *rq->path ? rq->path : "/";

	sb_puts(b, rq->method);
	sb_putn(b, "\n", 1);
	sb_uri(b, path, strlen(path), 1);
	sb_putn(b, "\n", 1);
	if ((r = canon_query(b, rq->query)) != SD_OK)
		return r;
	sb_putn(b, "\n", 1);
	if ((r = canon_headers(b, rq, signed_headers)) != SD_OK)
		return r;
	sb_putn(b, "\n", 1);
	sb_puts(b, signed_headers);
	sb_putn(b, "\n", 1);
	if ((r = payload_hash(rq, hash)) != SD_OK)
		return r;
	sb_puts(b, hash);
	return b->full ? err_set(SD_INVALID, "the request is too large to sign") : SD_OK;
}

void sigv4_key(const void *secret, size_t secret_len, const char *day, const char *region,
	       const char *service, unsigned char key[32])
{
	unsigned char k[32], *first = malloc(secret_len + 4);

	if (!first) {
		memset(key, 0, 32);
		return;
	}
	memcpy(first, "AWS4", 4);
	memcpy(first + 4, secret, secret_len);
	code_hmac_sha256(first, secret_len + 4, day, strlen(day), k);
	code_hmac_sha256(k, 32, region, strlen(region), key);
	code_hmac_sha256(key, 32, service, strlen(service), k);
	code_hmac_sha256(k, 32, "aws4_request", 12, key);
	memset(first, 0, secret_len + 4);
	memset(k, 0, sizeof k);
	free(first);
}

enum sd_result sigv4_signature(const struct sigv4_request *rq, const struct sigv4_auth *a,
			       const char *amz_date, const unsigned char key[32],
			       char out[SIGV4_HEX + 1])
{
	char *canon = malloc(CANON_MAX), chash[SIGV4_HEX + 1], sts[512];
	struct sbuf b = { canon, 0, CANON_MAX, 0 };
	unsigned char mac[32];
	enum sd_result r;
	int n, i;

	out[0] = '\0';
	if (!canon)
		return err_set(SD_NOMEM, "out of memory");
	canon[0] = '\0';
	r = canonical(rq, a->signed_headers, &b);
	if (r == SD_OK)
		code_sha256_hex(canon, b.len, chash);
	free(canon);
	if (r != SD_OK)
		return r;
	n = snprintf(sts, sizeof sts, ALGORITHM "\n%s\n%s/%s/%s/aws4_request\n%s", amz_date, a->date,
		     a->region, a->service, chash);
	if (n < 0 || (size_t)n >= sizeof sts)
		return err_set(SD_INVALID, "the credential scope is too long");
	code_hmac_sha256(key, 32, sts, (size_t)n, mac);
	for (i = 0; i < 32; i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	return SD_OK;
}

enum sd_result sigv4_verify(const struct sigv4_request *rq, const struct sigv4_auth *a,
			    const unsigned char key[32])
{
	const char *amz_date = sigv4_header(rq, "x-amz-date");
	char want[SIGV4_HEX + 1];
	enum sd_result r;

	if (!amz_date)
		return err_set(SD_INVALID, "X-Amz-Date is missing");
	if ((r = sigv4_signature(rq, a, amz_date, key, want)) != SD_OK)
		return r;
	if (!code_ct_equal(want, a->signature, SIGV4_HEX))
		return err_set(SD_DENIED, "The request signature we calculated does not match the "
			       "signature you provided. Check your AWS Secret Access Key and "
			       "signing method.");
	return SD_OK;
}

enum sd_result sigv4_sign(const struct sigv4_request *rq, const char *key_id, const char *secret,
			  const char *region, const char *service, const char *amz_date,
			  const char *signed_headers, char *buf, size_t size)
{
	struct sigv4_auth a;
	unsigned char key[32];
	enum sd_result r;
	int n;

	memset(&a, 0, sizeof a);
	if (strlen(amz_date) != 16 || strlen(key_id) > SIGV4_KEY_ID_MAX ||
	    strlen(region) > SIGV4_SCOPE_PART_MAX || strlen(service) > SIGV4_SCOPE_PART_MAX ||
	    strlen(signed_headers) > SIGV4_SIGNED_MAX)
		return err_set(SD_INVALID, "a signing input is too long or malformed");
	memcpy(a.date, amz_date, 8);
	snprintf(a.region, sizeof a.region, "%s", region);
	snprintf(a.service, sizeof a.service, "%s", service);
	snprintf(a.signed_headers, sizeof a.signed_headers, "%s", signed_headers);
	sigv4_key(secret, strlen(secret), a.date, region, service, key);
	r = sigv4_signature(rq, &a, amz_date, key, a.signature);
	memset(key, 0, sizeof key);
	if (r != SD_OK)
		return r;
	n = snprintf(buf, size, ALGORITHM " Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
		     "Signature=%s", key_id, a.date, region, service, signed_headers, a.signature);
	if (n < 0 || (size_t)n >= size)
		return err_set(SD_INVALID, "the Authorization header does not fit");
	return SD_OK;
}
