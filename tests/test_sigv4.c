/*
 * test_sigv4.c: AWS Signature Version 4 as the box verifies it (sigv4.h):
 * a published vector, requests signed by Debian's botocore (the SDK's own
 * signer, tests/sigv4_sign.py), and every change to a signed request
 * refused.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sigv4.h"

#define VEC_SECRET "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
#define VEC_BODY "Action=ListQueues&Version=2012-11-05"
#define VEC_AUTH                                                                               \
	"AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20240102/us-east-1/sqs/aws4_request, "        \
	"SignedHeaders=content-type;host;x-amz-date, "                                         \
	"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d"

/* botocore 1.29's ListQueues to http://localhost:9324 at 2024-01-02 03:04:05 */
static struct sigv4_header vec_headers[] = {
	{ "Content-Type", "application/x-www-form-urlencoded; charset=utf-8" },
	{ "Host", "localhost:9324" },
	{ "X-Amz-Date", "20240102T030405Z" },
	{ "Authorization", VEC_AUTH },
	{ "User-Agent", "Boto3/1.26.27 Python/3.11.2 Linux/6.1" },	/* not signed */
};

static struct sigv4_request vec(void)
{
	struct sigv4_request rq = { "POST", "/", "", vec_headers, 5, VEC_BODY,
				    sizeof VEC_BODY - 1 };

	return rq;
}

static enum sd_result check(const struct sigv4_request *rq, const char *secret)
{
	struct sigv4_auth a;
	unsigned char key[32];
	enum sd_result r = sigv4_parse(sigv4_header(rq, "authorization"), &a);

	if (r != SD_OK)
		return r;
	sigv4_key(secret, strlen(secret), a.date, a.region, a.service, key);
	return sigv4_verify(rq, &a, key);
}

static void test_published_vector(void **state)
{
	struct sigv4_request rq = vec();
	struct sigv4_auth a;
	char auth[600];
	int64_t ms = 0;

	(void)state;
	assert_int_equal(check(&rq, VEC_SECRET), SD_OK);
	assert_int_equal(sigv4_parse(VEC_AUTH, &a), SD_OK);
	assert_string_equal(a.key_id, "AKIDEXAMPLE");
	assert_string_equal(a.region, "us-east-1");
	assert_string_equal(a.service, "sqs");
	assert_int_equal(sigv4_time(&rq, &a, &ms), SD_OK);
	assert_int_equal(ms, 1704164645000LL);
	/* the client's side makes the very same header */
	assert_int_equal(sigv4_sign(&rq, "AKIDEXAMPLE", VEC_SECRET, "us-east-1", "sqs",
				    "20240102T030405Z", "content-type;host;x-amz-date", auth,
				    sizeof auth), SD_OK);
	assert_string_equal(auth, VEC_AUTH);
}

/* each change to what was signed makes another signature */
static void test_any_change_is_refused(void **state)
{
	struct sigv4_header h[5];
	struct sigv4_request rq;

	(void)state;
	rq = vec();
	assert_int_equal(check(&rq, VEC_SECRET "x"), SD_DENIED);
	rq.body = "Action=ListQueues&Version=2012-11-06";
	assert_int_equal(check(&rq, VEC_SECRET), SD_DENIED);
	rq = vec();
	rq.method = "GET";
	assert_int_equal(check(&rq, VEC_SECRET), SD_DENIED);
	rq = vec();
	rq.path = "/000000000000/other";
	assert_int_equal(check(&rq, VEC_SECRET), SD_DENIED);
	rq = vec();
	rq.query = "Action=DeleteQueue";
	assert_int_equal(check(&rq, VEC_SECRET), SD_DENIED);
	memcpy(h, vec_headers, sizeof h);
	rq.query = "";
	rq.headers = h;
	h[1].value = "evil.example:9324";
	assert_int_equal(check(&rq, VEC_SECRET), SD_DENIED);
	memcpy(h, vec_headers, sizeof h);
	h[2].value = "20240102T030406Z";
	assert_int_equal(check(&rq, VEC_SECRET), SD_DENIED);
	/* a header not signed may change */
	memcpy(h, vec_headers, sizeof h);
	h[4].value = "curl/7.88";
	assert_int_equal(check(&rq, VEC_SECRET), SD_OK);
	/* a signed header left out */
	memcpy(h, vec_headers, sizeof h);
	h[0].name = "X-Other";
	assert_int_equal(check(&rq, VEC_SECRET), SD_INVALID);
}

static void test_body_hash_header(void **state)
{
	struct sigv4_header h[6];
	struct sigv4_request rq = vec();

	(void)state;
	memcpy(h, vec_headers, sizeof vec_headers);
	rq.headers = h;
	rq.n_headers = 6;
	h[5].name = "X-Amz-Content-Sha256";
	h[5].value = "UNSIGNED-PAYLOAD";
	assert_int_equal(check(&rq, VEC_SECRET), SD_INVALID);
	h[5].value = "0000000000000000000000000000000000000000000000000000000000000000";
	assert_int_equal(check(&rq, VEC_SECRET), SD_INVALID);
	/* the body's own hash, unsigned as a header here: the same signature */
	h[5].value = "48a38266faf90970d6c7fea9b15e6ba366e5f6397c2970fc893f8a7b5e207bd0";
	assert_int_equal(check(&rq, VEC_SECRET), SD_OK);
}

static void test_malformed_headers(void **state)
{
	static const char *const bad[] = {
		NULL,
		"",
		"AWS4-HMAC-SHA1 Credential=A/20240102/r/sqs/aws4_request, SignedHeaders=host, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d",
		"AWS4-HMAC-SHA256 SignedHeaders=host, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d",
		"AWS4-HMAC-SHA256 Credential=A/20240102/r/sqs, SignedHeaders=host, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d",
		"AWS4-HMAC-SHA256 Credential=A/2024012/r/sqs/aws4_request, SignedHeaders=host, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d",
		"AWS4-HMAC-SHA256 Credential=A/20240102/r/sqs/aws4_request, SignedHeaders=Host, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d",
		"AWS4-HMAC-SHA256 Credential=A/20240102/r/sqs/aws4_request, "
		"SignedHeaders=x-amz-date;host, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d",
		"AWS4-HMAC-SHA256 Credential=A/20240102/r/sqs/aws4_request, "
		"SignedHeaders=content-type;x-amz-date, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19d",
		"AWS4-HMAC-SHA256 Credential=A/20240102/r/sqs/aws4_request, SignedHeaders=host, "
		"Signature=8a52db3498a76de5dc688f1325a43ec6f6ae5ec37eddccdfa75d972707e5c19",
		"AWS4-HMAC-SHA256 Credential=A/20240102/r/sqs/aws4_request, SignedHeaders=host, "
		"Signature=8A52DB3498A76DE5DC688F1325A43EC6F6AE5EC37EDDCCDFA75D972707E5C19D",
	};
	struct sigv4_auth a;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (sigv4_parse(bad[i], &a) != SD_INVALID)
			fail_msg("taken: %s", bad[i] ? bad[i] : "(none)");
}

static void test_date_must_match_the_scope(void **state)
{
	struct sigv4_header h[5];
	struct sigv4_request rq = vec();
	struct sigv4_auth a;
	int64_t ms;

	(void)state;
	memcpy(h, vec_headers, sizeof h);
	rq.headers = h;
	assert_int_equal(sigv4_parse(VEC_AUTH, &a), SD_OK);
	h[2].value = "20240103T030405Z";
	assert_int_equal(sigv4_time(&rq, &a, &ms), SD_INVALID);
	h[2].value = "2024-01-02T03:04:05Z";
	assert_int_equal(sigv4_time(&rq, &a, &ms), SD_INVALID);
	h[2].name = "Date";
	assert_int_equal(sigv4_time(&rq, &a, &ms), SD_INVALID);
}

/* ---- the SDK's own signer ---------------------------------------------------- */

static char *run_signer(const char *key_id, const char *secret)
{
	char cmd[512], *out = NULL;
	size_t len = 0, cap = 0, n;
	char buf[4096];
	FILE *p;

	snprintf(cmd, sizeof cmd, "/usr/bin/python3 tests/sigv4_sign.py %s '%s'", key_id,
		 secret);
	if (!(p = popen(cmd, "r")))
		fail_msg("cannot run %s", cmd);
	while ((n = fread(buf, 1, sizeof buf, p)) > 0) {
		if (len + n + 1 > cap) {
			cap = (len + n + 1) * 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		memcpy(out + len, buf, n);
		len += n;
	}
	if (pclose(p) != 0 || !out)
		fail_msg("%s failed (python3-botocore installed?)", cmd);
	out[len] = '\0';
	return out;
}

static size_t b64dec(const char *in, unsigned char *out)
{
	static const char tab[] =
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	unsigned v = 0;
	int bits = 0;
	size_t n = 0;

	for (; *in && *in != '='; in++) {
		const char *p = strchr(tab, *in);

		assert_non_null(p);
		v = (v << 6) | (unsigned)(p - tab);
		if ((bits += 6) >= 8) {
			bits -= 8;
			out[n++] = (unsigned char)(v >> bits);
		}
	}
	return n;
}

/* one signed request from the signer's line: verified, then one byte of
 * its body changed and refused */
static void verify_line(const char *line, const char *secret)
{
	struct sigv4_header h[16];
	struct sigv4_request rq;
	json_error_t e;
	json_t *o = json_loads(line, 0, &e), *hs;
	const char *url, *k, *p, *q;
	char path[512], query[512], host[256];
	unsigned char body[4096];
	size_t n = 0, blen;
	json_t *v;

	assert_non_null(o);
	url = json_string_value(json_object_get(o, "url"));
	hs = json_object_get(o, "headers");
	p = strchr(url + strlen("http://"), '/');
	snprintf(host, sizeof host, "%.*s", (int)(p - url - 7), url + 7);
	q = strchr(p, '?');
	snprintf(path, sizeof path, "%.*s", (int)(q ? q - p : (long)strlen(p)), p);
	snprintf(query, sizeof query, "%s", q ? q + 1 : "");
	h[n++] = (struct sigv4_header){ "Host", host };
	json_object_foreach(hs, k, v)
		h[n++] = (struct sigv4_header){ k, json_string_value(v) };
	blen = b64dec(json_string_value(json_object_get(o, "body")), body);
	rq = (struct sigv4_request){ json_string_value(json_object_get(o, "method")), path, query, h,
				     n, body, blen };
	if (check(&rq, secret) != SD_OK)
		fail_msg("botocore's request refused: %s: %s", err_msg(), line);
	if (blen) {
		body[blen / 2] ^= 1;
		assert_int_equal(check(&rq, secret), SD_DENIED);
	}
	json_decref(o);
}

static void test_botocore_signs_what_the_box_verifies(void **state)
{
	const char *secret = "k9/Secret+With/Slashes==";
	char *out = run_signer("AKIDSTAGEDOOR", secret), *line, *save = NULL;
	int n = 0;

	(void)state;
	for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save), n++)
		verify_line(line, secret);
	assert_int_equal(n, 4);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_vector),
		cmocka_unit_test(test_any_change_is_refused),
		cmocka_unit_test(test_body_hash_header),
		cmocka_unit_test(test_malformed_headers),
		cmocka_unit_test(test_date_must_match_the_scope),
		cmocka_unit_test(test_botocore_signs_what_the_box_verifies),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
