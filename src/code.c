/*
 * code.c: signed ticket codes and their key; with cert.c and cert_conn.c (the
 * box's certificates, the benchmarks' TLS client) the module that uses mbedTLS.
 *
 * A code is 32 bytes written in base32 (RFC 4648, upper case, no padding):
 *
 *     code_id (8 bytes, big-endian) || event_id (8 bytes, big-endian)
 *       || first 16 bytes of HMAC-SHA256(key, the 16 bytes before)
 *
 * 256 bits make 52 base32 characters; the last one carries 1 bit and 4 zero
 * bits.  Invariants:
 *  - decoding is strict: exactly 52 characters of the alphabet and the unused
 *    low bits zero, so every accepted text maps to one byte string and a
 *    changed character can never decode to the same bytes;
 *  - the MAC is compared in constant time, and every failure after decoding
 *    is the same SD_INVALID with the same message, so a forger learns nothing
 *    from timing or wording;
 *  - the key never reaches a log line, an error message or the database;
 *    buffers that held it are wiped before they go;
 *  - an existing key file is never replaced: the key is published with
 *    link(2), which fails when another process made the file first.  (A
 *    rename would silently swap the key under codes already printed.)
 */
#define _GNU_SOURCE
#include "code.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <mbedtls/base64.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/md.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/version.h>

#include "fsio.h"

#define CODE_ID_BYTES 16	/* code_id || event_id */
#define CODE_MAC_BYTES 16	/* truncated HMAC-SHA256 */
#define CODE_BYTES (CODE_ID_BYTES + CODE_MAC_BYTES)
#define CODE_CHARS ((CODE_BYTES * 8 + 4) / 5)	/* 52 */

static const char code_alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
static const char code_pers[] = "stagedoor ticket key";

/* ======================== the MAC ======================================= */

/* HMAC-SHA256 over the 16 id bytes, truncated.  Returns 0 on success; mbedTLS
 * fails only on bad arguments, but a failure must never pass as a MAC. */
static int code_mac(const unsigned char key[CODE_KEY_LEN], const unsigned char ids[CODE_ID_BYTES],
		    unsigned char mac[CODE_MAC_BYTES])
{
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
	unsigned char full[32];
	int rc;

	if (!md)
		return -1;
	rc = mbedtls_md_hmac(md, key, CODE_KEY_LEN, ids, CODE_ID_BYTES, full);
	if (rc == 0)
		memcpy(mac, full, CODE_MAC_BYTES);
	mbedtls_platform_zeroize(full, sizeof full);
	return rc;
}

/* Constant-time equality: the time depends on n only, never on where the
 * bytes differ.  (mbedtls_ct_memcmp is not public in mbedTLS 2.28.) */
int code_ct_equal(const void *pa, const void *pb, size_t n)
{
	const unsigned char *a = pa, *b = pb;
	volatile unsigned char diff = 0;
	size_t i;

	for (i = 0; i < n; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

enum sd_result code_sha256_file(const char *path, char out[CODE_SHA256_HEX + 1], int64_t *size)
{
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
	mbedtls_md_context_t ctx;
	unsigned char buf[65536], h[32];
	enum sd_result r = SD_OK;
	ssize_t n;
	size_t i;
	int fd;

	out[0] = '\0';
	*size = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return err_set(SD_IO, "cannot read %s: %s", path, strerror(errno));
	mbedtls_md_init(&ctx);
	if (!md || mbedtls_md_setup(&ctx, md, 0) != 0 || mbedtls_md_starts(&ctx) != 0) {
		r = err_set(SD_NOMEM, "cannot start SHA-256");
		goto out;
	}
	while ((n = read(fd, buf, sizeof buf)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = err_set(SD_IO, "cannot read %s: %s", path, strerror(errno));
			goto out;
		}
		mbedtls_md_update(&ctx, buf, (size_t)n);
		*size += n;
	}
	mbedtls_md_finish(&ctx, h);
	for (i = 0; i < sizeof h; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
out:
	mbedtls_md_free(&ctx);
	close(fd);
	return r;
}

void code_sha256_hex(const void *data, size_t len, char out[CODE_SHA256_HEX + 1])
{
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
	unsigned char h[32];
	size_t i;

	/* mbedtls_md fails only on bad arguments: an empty string then, which
	 * matches no stored hash */
	if (!md || mbedtls_md(md, data, len, h) != 0) {
		out[0] = '\0';
		return;
	}
	for (i = 0; i < sizeof h; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

void code_hmac_sha256(const void *key, size_t klen, const void *data, size_t len,
		      unsigned char out[32])
{
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);

	if (!md || mbedtls_md_hmac(md, key, klen, data, len, out) != 0)
		memset(out, 0, 32);
}

void code_md5_hex(const void *data, size_t len, char out[33])
{
	unsigned char h[16];
	size_t i;
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_MD5);

	if (!md || mbedtls_md(md, data, len, h) != 0) {
		out[0] = '\0';
		return;
	}
	for (i = 0; i < sizeof h; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
}

void code_hmac_sha256_hex(const void *key, size_t klen, const char *prefix, const void *data,
			  size_t len, char out[CODE_SHA256_HEX + 1])
{
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
	mbedtls_md_context_t ctx;
	unsigned char h[32];
	size_t i;
	int rc;

	out[0] = '\0';	/* an empty string on failure: it matches no signature */
	if (!md)
		return;
	mbedtls_md_init(&ctx);
	rc = mbedtls_md_setup(&ctx, md, 1);
	if (rc == 0)
		rc = mbedtls_md_hmac_starts(&ctx, key, klen);
	if (rc == 0)
		rc = mbedtls_md_hmac_update(&ctx, (const unsigned char *)prefix, strlen(prefix));
	if (rc == 0)
		rc = mbedtls_md_hmac_update(&ctx, data, len);
	if (rc == 0)
		rc = mbedtls_md_hmac_finish(&ctx, h);
	mbedtls_md_free(&ctx);
	if (rc != 0)
		return;
	for (i = 0; i < sizeof h; i++)
		snprintf(out + 2 * i, 3, "%02x", h[i]);
	mbedtls_platform_zeroize(h, sizeof h);
}

static void code_put_be64(unsigned char *p, int64_t v)
{
	uint64_t u = (uint64_t)v;
	int i;

	for (i = 7; i >= 0; i--) {
		p[i] = (unsigned char)(u & 0xff);
		u >>= 8;
	}
}

static int64_t code_get_be64(const unsigned char *p)
{
	uint64_t u = 0;
	int i;

	for (i = 0; i < 8; i++)
		u = (u << 8) | p[i];
	return (int64_t)u;
}

/* ======================== base32 ======================================== */

static void code_b32_encode(const unsigned char *in, size_t len, char *out)
{
	uint32_t acc = 0;
	int bits = 0;
	size_t i, o = 0;

	for (i = 0; i < len; i++) {
		acc = (acc << 8) | in[i];
		bits += 8;
		while (bits >= 5) {
			out[o++] = code_alphabet[(acc >> (bits - 5)) & 31];
			bits -= 5;
		}
	}
	if (bits > 0)
		out[o++] = code_alphabet[(acc << (5 - bits)) & 31];
	out[o] = '\0';
}

/* The value of one base32 character, lower case forgiven; -1 when foreign. */
static int code_b32_value(unsigned char c)
{
	if (c >= 'a' && c <= 'z')
		c = (unsigned char)(c - 'a' + 'A');
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= '2' && c <= '7')
		return c - '2' + 26;
	return -1;
}

/* Strict decode of exactly CODE_CHARS characters into CODE_BYTES bytes;
 * returns -1 for a foreign character or non-zero unused bits. */
static int code_b32_decode(const char *in, unsigned char out[CODE_BYTES])
{
	uint32_t acc = 0;
	int bits = 0;
	size_t i, o = 0;

	for (i = 0; i < CODE_CHARS; i++) {
		int v = code_b32_value((unsigned char)in[i]);

		if (v < 0)
			return -1;
		acc = (acc << 5) | (uint32_t)v;
		bits += 5;
		if (bits >= 8) {
			out[o++] = (unsigned char)(acc >> (bits - 8));
			bits -= 8;
		}
	}
	/* the leftover bits are padding and must be zero, or two texts would
	 * name the same code */
	if (o != CODE_BYTES || (acc & ((1u << bits) - 1)) != 0)
		return -1;
	return 0;
}

/* ======================== codes ========================================= */

enum sd_result code_id_new(int64_t *out)
{
	uint64_t r;

	if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
		return err_set(SD_IO, "no random bytes for a ticket's code: %s", strerror(errno));
	*out = (int64_t)(CODE_ID_MIN | (r & (uint64_t)(CODE_ID_MIN - 1)));
	return SD_OK;
}

int code_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap,
		       size_t *out_len)
{
	return mbedtls_base64_decode(out, cap, out_len, (const unsigned char *)in, len) == 0 ? 0
											      : -1;
}

enum sd_result code_uuid4(char out[CODE_UUID_LEN + 1])
{
	unsigned char b[16];

	if (getrandom(b, sizeof b, 0) != (ssize_t)sizeof b)
		return err_set(SD_IO, "no random bytes for an id: %s", strerror(errno));
	b[6] = (unsigned char)((b[6] & 0x0f) | 0x40);	/* version 4 */
	b[8] = (unsigned char)((b[8] & 0x3f) | 0x80);	/* RFC 4122 variant */
	snprintf(out, CODE_UUID_LEN + 1,
		 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
		 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
		 b[14], b[15]);
	return SD_OK;
}

void code_make(const unsigned char key[CODE_KEY_LEN], int64_t code_id, int64_t event_id,
	       char *out)
{
	unsigned char raw[CODE_BYTES];

	code_put_be64(raw, code_id);
	code_put_be64(raw + 8, event_id);
	if (code_mac(key, raw, raw + CODE_ID_BYTES) != 0) {
		/* cannot happen with a valid key; an empty code verifies never */
		out[0] = '\0';
		return;
	}
	code_b32_encode(raw, sizeof raw, out);
}

enum sd_result code_verify(const unsigned char key[CODE_KEY_LEN], const char *text,
			   int64_t *code_id, int64_t *event_id)
{
	unsigned char raw[CODE_BYTES], mac[CODE_MAC_BYTES];
	const char *end;
	enum sd_result r = SD_INVALID;

	if (!text)
		return err_set(SD_INVALID, "no ticket code given");
	while (*text == ' ' || *text == '\t' || *text == '\r' || *text == '\n')
		text++;
	end = text + strlen(text);
	while (end > text && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r' ||
			      end[-1] == '\n'))
		end--;
	if ((size_t)(end - text) != CODE_CHARS || code_b32_decode(text, raw) != 0) {
		err_set(SD_INVALID, "not a ticket code (expected %d characters A-Z, 2-7)",
			CODE_CHARS);
		goto out;
	}
	if (code_mac(key, raw, mac) != 0 || !code_ct_equal(mac, raw + CODE_ID_BYTES, sizeof mac)) {
		err_set(SD_INVALID, "ticket code is not valid");
		goto out;
	}
	*code_id = code_get_be64(raw);
	*event_id = code_get_be64(raw + 8);
	r = SD_OK;
out:
	mbedtls_platform_zeroize(mac, sizeof mac);
	return r;
}

/* ======================== the key file ================================== */

/* ticket_key_file: the key every box is given, when set */
static char key_file[PATH_MAX];

enum sd_result code_key_file_set(const char *path)
{
	if (!path || !*path) {
		key_file[0] = '\0';
		return SD_OK;
	}
	if (strlen(path) >= sizeof key_file)
		return err_set(SD_INVALID, "ticket_key_file: the path is too long");
	snprintf(key_file, sizeof key_file, "%s", path);
	return SD_OK;
}

enum sd_result code_key_path(const char *db_path, const char *state_dir, char *buf, size_t size)
{
	const char *slash = strrchr(db_path, '/');
	int n;

	if (key_file[0])
		n = snprintf(buf, size, "%s", key_file);
	else if (state_dir && *state_dir)
		n = snprintf(buf, size, "%s/ticket.key", state_dir);
	/* a URI has no folder to take (and may hold a password) */
	else if (strstr(db_path, "://"))
		return err_set(SD_INVALID, "state_dir must be given with a PostgreSQL database: "
			       "the folder for this box's own files (ticket key, maildir, logs)");
	/* dirname(3) semantics without its habit of writing into its argument */
	else if (!slash)
		n = snprintf(buf, size, "./ticket.key");
	else if (slash == db_path)
		n = snprintf(buf, size, "/ticket.key");
	else
		n = snprintf(buf, size, "%.*s/ticket.key", (int)(slash - db_path), db_path);
	if (n < 0 || (size_t)n >= size)
		return err_set(SD_INVALID, "the ticket key's path is too long");
	return SD_OK;
}

/* 32 fresh bytes from CTR_DRBG seeded by the platform's entropy sources. */
static enum sd_result code_key_generate(unsigned char key[CODE_KEY_LEN])
{
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	enum sd_result r = SD_OK;
	int rc;

	mbedtls_entropy_init(&entropy);
	mbedtls_ctr_drbg_init(&drbg);
	rc = mbedtls_ctr_drbg_seed(&drbg, mbedtls_entropy_func, &entropy,
				   (const unsigned char *)code_pers, strlen(code_pers));
	if (rc != 0) {
		r = err_set(SD_IO, "cannot seed the random generator for the ticket key "
			    "(mbedTLS -0x%04x)", (unsigned)-rc);
		goto out;
	}
	rc = mbedtls_ctr_drbg_random(&drbg, key, CODE_KEY_LEN);
	if (rc != 0)
		r = err_set(SD_IO, "cannot draw the ticket key (mbedTLS -0x%04x)", (unsigned)-rc);
out:
	mbedtls_ctr_drbg_free(&drbg);
	mbedtls_entropy_free(&entropy);
	return r;
}

enum sd_result code_key_ensure(const char *path, int *created)
{
	unsigned char key[CODE_KEY_LEN];
	char head[PATH_MAX];
	struct stat st;
	enum sd_result r;
	int n;

	if (created)
		*created = 0;
	if (stat(path, &st) == 0)
		return SD_OK;
	if (errno != ENOENT)
		return err_set(SD_IO, "cannot check key file %s: %s", path, strerror(errno));

	if ((r = code_key_generate(key)) != SD_OK)
		goto out;
	n = snprintf(head, sizeof head, "%s.tmp-%ld-", path, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof head) {
		r = err_set(SD_INVALID, "key file path too long: %s", path);
		goto out;
	}
	/* mode 0600 from creation: the key is never readable by others, not
	 * even for the moment between creating and a chmod.  Link, not rename:
	 * when two processes race, the first key stays and the second process
	 * quietly uses it (created stays 0). */
	r = fsio_put(path, key, sizeof key, head, "", 0600, FSIO_LINK, created);
out:
	mbedtls_platform_zeroize(key, sizeof key);
	return r;
}

enum sd_result code_key_load(const char *path, unsigned char key[CODE_KEY_LEN])
{
	struct stat st;
	enum sd_result r = SD_OK;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return err_set(SD_NOT_FOUND, "no ticket key file at %s (run init)", path);
		return err_set(SD_IO, "cannot open key file %s: %s", path, strerror(errno));
	}
	/* check the file we opened, not the name: no window for a swap */
	if (fstat(fd, &st) != 0) {
		r = err_set(SD_IO, "cannot check key file %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = err_set(SD_INVALID, "key file %s is not a regular file", path);
		goto out;
	}
	if (st.st_mode & 077) {
		r = err_set(SD_INVALID, "key file %s may be read by others (mode %04o): "
			    "refusing it; run chmod 600 on it", path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if (st.st_size != CODE_KEY_LEN) {
		r = err_set(SD_INVALID, "key file %s holds %lld bytes, not %d", path,
			    (long long)st.st_size, CODE_KEY_LEN);
		goto out;
	}
	r = fsio_read_all(fd, key, CODE_KEY_LEN, path);
out:
	if (r != SD_OK)
		mbedtls_platform_zeroize(key, CODE_KEY_LEN);
	close(fd);
	return r;
}

void code_lib_version(char *buf, size_t size)
{
	char v[18];

	mbedtls_version_get_string(v);
	snprintf(buf, size, "%s", v);
}
