/*
 * sig.c: Stripe's webhook signature, both ways.
 *
 *   Stripe-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256>[,v1=<hex>]
 *
 * The HMAC is keyed with the whole secret string ("whsec_..." included, as
 * Stripe and its libraries do) over the bytes "<t>.<payload>".  A receiver
 * accepts when t is within the tolerance of its own clock and any v1 in the
 * header matches (several during a secret's rotation, in either case);
 * other schemes (v0) are ignored, and a second t makes the header bad.
 * sig_verify is the rule the box uses (src/stripe_hook.c's
 * stripe_hook_verify, written apart so that paysink leans on none of src/),
 * and what POST /_paysink/verify answers with.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mbedtls/md.h>

#include "paysink.h"

/* hex HMAC-SHA256 of "t.payload" keyed with secret, into hex[65] */
static void sig_hmac(char hex[65], int64_t t, const char *payload, size_t len, const char *secret)
{
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
	mbedtls_md_context_t ctx;
	unsigned char mac[32];
	char head[32];
	int i, n = snprintf(head, sizeof head, "%" PRId64 ".", t);

	mbedtls_md_init(&ctx);
	memset(mac, 0, sizeof mac);
	if (mbedtls_md_setup(&ctx, md, 1) == 0 &&
	    mbedtls_md_hmac_starts(&ctx, (const unsigned char *)secret, strlen(secret)) == 0 &&
	    mbedtls_md_hmac_update(&ctx, (const unsigned char *)head, (size_t)n) == 0 &&
	    mbedtls_md_hmac_update(&ctx, (const unsigned char *)payload, len) == 0)
		mbedtls_md_hmac_finish(&ctx, mac);
	mbedtls_md_free(&ctx);
	for (i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

void sig_header(char *out, size_t size, int64_t t, const char *payload, size_t len,
		const char *secret, const char *secret2)
{
	char a[65], b[65];

	sig_hmac(a, t, payload, len, secret);
	if (secret2) {
		sig_hmac(b, t, payload, len, secret2);
		snprintf(out, size, "t=%" PRId64 ",v1=%s,v1=%s", t, a, b);
	} else {
		snprintf(out, size, "t=%" PRId64 ",v1=%s", t, a);
	}
}

/* constant-time equality of our lower-case hex a and the header's b, in
 * either case */
static int same64(const char *a, const char *b)
{
	unsigned char d = 0;
	int i;

	for (i = 0; i < 64; i++) {
		unsigned char c = (unsigned char)b[i];

		if (c >= 'A' && c <= 'F')
			c = (unsigned char)(c + ('a' - 'A'));
		d |= (unsigned char)(a[i] ^ c);
	}
	return d == 0;
}

/* the next "k=v" item of a header from *p: key and value spans; 0 at the end */
static int next_item(const char **p, const char **k, size_t *klen, const char **v, size_t *vlen)
{
	while (**p) {
		const char *s = *p, *end = strchr(s, ','), *eq;
		size_t item = end ? (size_t)(end - s) : strlen(s);

		*p = s + item + (end ? 1 : 0);
		while (item > 0 && *s == ' ') {
			s++;
			item--;
		}
		eq = memchr(s, '=', item);
		if (!eq)
			continue;
		*k = s;
		*klen = (size_t)(eq - s);
		*v = eq + 1;
		*vlen = item - *klen - 1;
		return 1;
	}
	return 0;
}

int sig_verify(const char *header, const char *payload, size_t len, const char *secret,
	       int64_t now, int64_t tolerance, const char **why)
{
	const char *p, *k, *v;
	size_t klen, vlen;
	char want[65], num[24], *stop;
	int64_t t = -1;
	int n_v1 = 0, match = 0;

	if (!header || !*header || !secret || !*secret) {
		*why = header && *header ? "no secret" : "no Stripe-Signature header";
		return 0;
	}
	for (p = header; next_item(&p, &k, &klen, &v, &vlen);) {
		if (klen == 1 && k[0] == 't') {
			if (vlen == 0 || vlen >= sizeof num || t >= 0) {
				*why = "a bad timestamp";
				return 0;
			}
			memcpy(num, v, vlen);
			num[vlen] = '\0';
			errno = 0;
			t = strtoll(num, &stop, 10);
			if (errno || *stop || t < 0) {
				*why = "a bad timestamp";
				return 0;
			}
		}
	}
	if (t < 0) {
		*why = "no timestamp in the header";
		return 0;
	}
	sig_hmac(want, t, payload, len, secret);
	for (p = header; next_item(&p, &k, &klen, &v, &vlen);) {
		if (klen == 2 && k[0] == 'v' && k[1] == '1') {
			n_v1++;
			if (vlen == 64)
				match |= same64(want, v);
		}
	}
	if (n_v1 == 0) {
		*why = "no v1 signature in the header";
		return 0;
	}
	if (!match) {
		*why = "no v1 signature matches the payload";
		return 0;
	}
	if (now - t > tolerance || t - now > tolerance) {
		*why = "the timestamp is outside the tolerance";
		return 0;
	}
	*why = "";
	return 1;
}
