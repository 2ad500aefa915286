/*
 * cert.c: the box's certificate authority and its server certificates
 * (cert.h), with mbedTLS.  This file, cert_nc.c (the CA's name
 * constraints), cert_conn.c and code.c are the project's mbedTLS wrapper;
 * no other module includes mbedTLS.
 *
 * Sections: the random generator and files; names; reading a certificate
 * (the subjectAltName is read from the extensions' DER, because mbedTLS
 * 2.28 lists no iPAddress entries); the extensions mbedTLS 2.28 cannot write
 * itself (subjectAltName with addresses, extendedKeyUsage), as DER; issuing;
 * and cert_init, what `tls init` does.
 *
 * Invariants (see cert.h for the files):
 *  - a key is generated, written (mode 0600 from creation) and wiped here;
 *    no message ever quotes its bytes; a key file is read only when its mode
 *    gives no group or other bit;
 *  - a certificate is written only after it was parsed back and, for a
 *    server certificate, verified against the CA that signed it: a file this
 *    module makes always chains;
 *  - cert_init holds an exclusive flock(2) on tls/lock from before it looks
 *    at the files until it is done, so two inits never interleave; every
 *    file it writes is put whole (fsio_put, rename).
 */
#define _GNU_SOURCE
#include "cert.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/ecp.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/md.h>
#include <mbedtls/oid.h>
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/x509_crt.h>

#include "cert_nc.h"
#include "fsio.h"

#define CERT_FILE_MAX (256 * 1024)	/* a longer certificate or key file is refused */
#define CERT_PEM_MAX 16384		/* one certificate we write, as PEM */
#define CERT_KEY_PEM_MAX 2048		/* one P-256 key, as PEM */
#define CERT_ORG "Stagedoor Box"
#define CERT_DAY_S 86400LL

static const char cert_pers[] = "stagedoor tls";

/* ======================== random, files ================================= */

struct cert_rng {
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
};

/* mbedTLS's reason for rc, into a caller's buffer. */
static const char *cert_why(int rc, char *buf, size_t size)
{
	mbedtls_strerror(rc, buf, size);
	return buf;
}

/* cert_rng_start: CTR_DRBG seeded from the platform; cert_rng_end frees it
 * whatever this returned. */
static enum sd_result cert_rng_start(struct cert_rng *g)
{
	char why[128];
	int rc;

	mbedtls_entropy_init(&g->entropy);
	mbedtls_ctr_drbg_init(&g->drbg);
	rc = mbedtls_ctr_drbg_seed(&g->drbg, mbedtls_entropy_func, &g->entropy,
				   (const unsigned char *)cert_pers, strlen(cert_pers));
	if (rc != 0)
		return err_set(SD_IO, "cannot seed the random generator: %s",
			       cert_why(rc, why, sizeof why));
	return SD_OK;
}

static void cert_rng_end(struct cert_rng *g)
{
	mbedtls_ctr_drbg_free(&g->drbg);
	mbedtls_entropy_free(&g->entropy);
}

/*
 * cert_file_read: the whole file at path into a malloc'd buffer with a NUL
 * after it.  [in] what: "certificate" or "key" for the messages; private: 1
 * refuses a file whose mode has group or other bits.  [out] *buf (free,
 * after wiping a key), *len (without the NUL).
 */
static enum sd_result cert_file_read(const char *path, const char *what, int private,
				     unsigned char **buf, size_t *len)
{
	enum sd_result r = SD_OK;
	struct stat st;
	int fd;

	*buf = NULL;
	*len = 0;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0) {
		if (errno == ENOENT)
			return err_set(SD_NOT_FOUND, "no %s file at %s", what, path);
		return err_set(SD_IO, "cannot open %s file %s: %s", what, path, strerror(errno));
	}
	/* the file we opened, not the name: no window for a swap */
	if (fstat(fd, &st) != 0) {
		r = err_set(SD_IO, "cannot check %s file %s: %s", what, path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = err_set(SD_INVALID, "%s file %s is not a regular file", what, path);
		goto out;
	}
	if (private && (st.st_mode & 077)) {
		r = err_set(SD_INVALID, "%s file %s may be read by others (mode %04o): refusing "
			    "it; run chmod 600 on it", what, path, (unsigned)(st.st_mode & 07777));
		goto out;
	}
	if (st.st_size <= 0 || st.st_size > CERT_FILE_MAX) {
		r = err_set(SD_INVALID, "%s file %s holds %lld bytes: not a %s", what, path,
			    (long long)st.st_size, what);
		goto out;
	}
	if (!(*buf = malloc((size_t)st.st_size + 1))) {
		r = err_set(SD_NOMEM, "out of memory reading %s", path);
		goto out;
	}
	if ((r = fsio_read_all(fd, *buf, (size_t)st.st_size, path)) != SD_OK) {
		mbedtls_platform_zeroize(*buf, (size_t)st.st_size);
		free(*buf);
		*buf = NULL;
		goto out;
	}
	(*buf)[st.st_size] = '\0';
	*len = (size_t)st.st_size;
out:
	close(fd);
	return r;
}

/* PEM or DER: mbedTLS takes PEM with its NUL counted, DER without. */
static size_t cert_parse_len(const unsigned char *buf, size_t len)
{
	return strstr((const char *)buf, "-----BEGIN ") ? len + 1 : len;
}

/* cert_exists: [out] *yes 1 when path names something, 0 when nothing. */
static enum sd_result cert_exists(const char *path, int *yes)
{
	struct stat st;

	*yes = lstat(path, &st) == 0;
	if (!*yes && errno != ENOENT)
		return err_set(SD_IO, "cannot check %s: %s", path, strerror(errno));
	return SD_OK;
}

/* cert_put: path holds data, whole, mode mode (fsio_put, rename). */
static enum sd_result cert_put(const char *path, const void *data, size_t len, mode_t mode)
{
	char head[PATH_MAX];

	if ((size_t)snprintf(head, sizeof head, "%s.tmp-", path) >= sizeof head)
		return err_set(SD_INVALID, "path too long: %s", path);
	return fsio_put(path, data, len, head, "", mode, FSIO_RENAME, NULL);
}

enum sd_result cert_paths(const char *state_dir, struct cert_paths *out)
{
	char dir[PATH_MAX];
	int bad;

	memset(out, 0, sizeof *out);
	if (!state_dir || !*state_dir)
		return err_set(SD_INVALID, "no state folder given for the TLS files");
	/* "/tls/server.pem" is the longest tail */
	if (strlen(state_dir) + 16 >= sizeof dir)
		return err_set(SD_INVALID, "state folder path too long: %s", state_dir);
	snprintf(dir, sizeof dir, "%s/tls", state_dir);
	bad = (size_t)snprintf(out->dir, sizeof out->dir, "%s", dir) >= sizeof out->dir;
	bad |= (size_t)snprintf(out->ca_cert, PATH_MAX, "%s/ca.pem", dir) >= PATH_MAX;
	bad |= (size_t)snprintf(out->ca_key, PATH_MAX, "%s/ca.key", dir) >= PATH_MAX;
	bad |= (size_t)snprintf(out->server_cert, PATH_MAX, "%s/server.pem", dir) >= PATH_MAX;
	bad |= (size_t)snprintf(out->server_key, PATH_MAX, "%s/server.key", dir) >= PATH_MAX;
	bad |= (size_t)snprintf(out->lock, PATH_MAX, "%s/lock", dir) >= PATH_MAX;
	if (bad)
		return err_set(SD_INVALID, "state folder path too long: %s", state_dir);
	return SD_OK;
}

/* ======================== names ========================================= */

/* cert_dns_problem: NULL when name is a host name cert_names_add_dns
 * takes, else what is wrong with it. */
static const char *cert_dns_problem(const char *name)
{
	size_t len = strlen(name), label = 0, i;
	int all_digits = 1;

	if (len == 0)
		return "it is empty";
	if (len > CERT_DNS_MAX - 1)
		return "it is longer than 253 characters";
	for (i = 0; i <= len; i++) {
		unsigned char c = (unsigned char)name[i];

		if (c == '.' || c == '\0') {
			if (label == 0)
				return "it has an empty label";
			if (label > 63)
				return "a label is longer than 63 characters";
			if (name[i - 1] == '-')
				return "a label ends with '-'";
			if (c == '\0' && all_digits)
				return "its last label is a number (an address? use --ip)";
			label = 0;
			all_digits = 1;
			continue;
		}
		if (!isalnum(c) && c != '-')
			return "only letters, digits, '-' and '.' may be in a DNS name";
		if (label == 0 && c == '-')
			return "a label starts with '-'";
		if (!isdigit(c))
			all_digits = 0;
		label++;
	}
	return NULL;
}

enum sd_result cert_names_add_dns(struct cert_names *n, const char *name)
{
	const char *why = name ? cert_dns_problem(name) : "it is missing";
	char low[CERT_DNS_MAX];
	int i;

	if (why)
		return err_set(SD_INVALID, "'%.80s' is not a DNS name: %s", name ? name : "", why);
	for (i = 0; name[i]; i++)
		low[i] = (char)tolower((unsigned char)name[i]);
	low[i] = '\0';
	for (i = 0; i < n->n_dns; i++)
		if (strcmp(n->dns[i], low) == 0)
			return SD_OK;
	if (n->n_dns == CERT_NAMES_MAX)
		return err_set(SD_INVALID, "more than %d DNS names", CERT_NAMES_MAX);
	memcpy(n->dns[n->n_dns++], low, strlen(low) + 1);
	return SD_OK;
}

/* cert_ip_bytes: addr as 4 or 16 bytes; [out] *len, 0 when not an address. */
static void cert_ip_bytes(const char *addr, unsigned char out[16], size_t *len)
{
	*len = 0;
	if (inet_pton(AF_INET, addr, out) == 1)
		*len = 4;
	else if (inet_pton(AF_INET6, addr, out) == 1)
		*len = 16;
}

enum sd_result cert_names_add_ip(struct cert_names *n, const char *addr)
{
	unsigned char b[16];
	char text[CERT_IP_MAX];
	size_t len;
	int i;

	cert_ip_bytes(addr ? addr : "", b, &len);
	if (!len)
		return err_set(SD_INVALID, "'%.80s' is not an IPv4 or IPv6 address",
			       addr ? addr : "");
	if (!inet_ntop(len == 4 ? AF_INET : AF_INET6, b, text, sizeof text))
		return err_set(SD_INVALID, "'%.80s' is not an address", addr);
	for (i = 0; i < n->n_ip; i++)
		if (strcmp(n->ip[i], text) == 0)
			return SD_OK;
	if (n->n_ip == CERT_NAMES_MAX)
		return err_set(SD_INVALID, "more than %d IP addresses", CERT_NAMES_MAX);
	memcpy(n->ip[n->n_ip++], text, strlen(text) + 1);
	return SD_OK;
}

/* cert_hostname: this machine's name, or "" when it has none that is a DNS
 * name. */
static void cert_hostname(char *buf, size_t size)
{
	char h[256];

	buf[0] = '\0';
	if (gethostname(h, sizeof h) != 0)
		return;
	h[sizeof h - 1] = '\0';
	if (!cert_dns_problem(h) && strlen(h) < size)
		memcpy(buf, h, strlen(h) + 1);
}

enum sd_result cert_names_default(struct cert_names *n)
{
	char host[CERT_DNS_MAX - 8], local[CERT_DNS_MAX];
	enum sd_result r = SD_OK;

	memset(n, 0, sizeof *n);
	cert_hostname(host, sizeof host);
	if (host[0] && strcmp(host, "localhost") != 0) {
		snprintf(local, sizeof local, "%s.local", host);
		if ((r = cert_names_add_dns(n, host)) != SD_OK)
			return r;
		/* "box.lan.local" is no mDNS name, but harmless: keep it simple */
		if (!strchr(host, '.') && (r = cert_names_add_dns(n, local)) != SD_OK)
			return r;
	}
	if ((r = cert_names_add_dns(n, "localhost")) != SD_OK ||
	    (r = cert_names_add_ip(n, "127.0.0.1")) != SD_OK ||
	    (r = cert_names_add_ip(n, "::1")) != SD_OK)
		return r;
	return SD_OK;
}

int cert_names_equal(const struct cert_names *a, const struct cert_names *b)
{
	int i;

	if (a->n_dns != b->n_dns || a->n_ip != b->n_ip)
		return 0;
	for (i = 0; i < a->n_dns; i++)
		if (strcmp(a->dns[i], b->dns[i]) != 0)
			return 0;
	for (i = 0; i < a->n_ip; i++)
		if (strcmp(a->ip[i], b->ip[i]) != 0)
			return 0;
	return 1;
}

/* ======================== reading a certificate ========================= */

/* cert_crt_load: parse the certificate file at path into crt (initialised
 * by the caller, who frees it). */
static enum sd_result cert_crt_load(const char *path, mbedtls_x509_crt *crt)
{
	unsigned char *buf;
	char why[128];
	enum sd_result r;
	size_t len;
	int rc;

	if ((r = cert_file_read(path, "certificate", 0, &buf, &len)) != SD_OK)
		return r;
	rc = cert_nc_parse(crt, buf, cert_parse_len(buf, len));
	free(buf);
	/* > 0: some of several certificates did not parse; the first must */
	if (rc < 0 || !crt->raw.p)
		return err_set(SD_INVALID, "%s holds no certificate: %s", path,
			       rc < 0 ? cert_why(rc, why, sizeof why) : "none parsed");
	return SD_OK;
}

/* cert_key_load: parse the private key file at path (private mode only)
 * into pk (initialised by the caller, who frees it). */
static enum sd_result cert_key_load(const char *path, mbedtls_pk_context *pk)
{
	unsigned char *buf;
	char why[128];
	enum sd_result r;
	size_t len;
	int rc;

	if ((r = cert_file_read(path, "key", 1, &buf, &len)) != SD_OK)
		return r;
	rc = mbedtls_pk_parse_key(pk, buf, cert_parse_len(buf, len), NULL, 0);
	mbedtls_platform_zeroize(buf, len);
	free(buf);
	if (rc != 0)
		return err_set(SD_INVALID, "%s holds no private key mbedTLS can read: %s", path,
			       cert_why(rc, why, sizeof why));
	return SD_OK;
}

static int64_t cert_time_ms(const mbedtls_x509_time *t)
{
	struct tm tm;

	memset(&tm, 0, sizeof tm);
	tm.tm_year = t->year - 1900;
	tm.tm_mon = t->mon - 1;
	tm.tm_mday = t->day;
	tm.tm_hour = t->hour;
	tm.tm_min = t->min;
	tm.tm_sec = t->sec;
	return (int64_t)timegm(&tm) * 1000;
}

/* cert_san_entry: one GeneralName of tag with value v[0..len) into n;
 * kinds other than dNSName and iPAddress are skipped. */
static void cert_san_entry(unsigned char tag, const unsigned char *v, size_t len,
			   struct cert_names *n, int *more)
{
	if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME)) {
		if (n->n_dns == CERT_NAMES_MAX || len >= CERT_DNS_MAX || memchr(v, 0, len)) {
			(*more)++;
			return;
		}
		memcpy(n->dns[n->n_dns], v, len);
		n->dns[n->n_dns++][len] = '\0';
	} else if (tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS)) {
		if (n->n_ip == CERT_NAMES_MAX || (len != 4 && len != 16) ||
		    !inet_ntop(len == 4 ? AF_INET : AF_INET6, v, n->ip[n->n_ip], CERT_IP_MAX)) {
			(*more)++;
			return;
		}
		n->n_ip++;
	}
}

/* cert_san_read: the subjectAltName's DNS names and addresses, walked in
 * its DER (mbedTLS 2.28 lists no addresses) */
static enum sd_result cert_san_read(const mbedtls_x509_crt *crt, struct cert_names *n, int *more,
				    const char *path)
{
	unsigned char *p, *san_end;
	size_t len;
	int rc;

	memset(n, 0, sizeof *n);
	*more = 0;
	rc = cert_ext_find(crt, MBEDTLS_OID_SUBJECT_ALT_NAME,
			   MBEDTLS_OID_SIZE(MBEDTLS_OID_SUBJECT_ALT_NAME), &p, &len);
	if (rc == 1)
		return SD_OK;
	san_end = p + len;
	if (rc < 0 || mbedtls_asn1_get_tag(&p, san_end, &len,
					   MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE))
		goto bad;
	for (san_end = p + len; p < san_end; p += len) {
		unsigned char tag = *p++;

		if (mbedtls_asn1_get_len(&p, san_end, &len))
			goto bad;
		cert_san_entry(tag, p, len, n, more);
	}
	return SD_OK;
bad:
	return err_set(SD_INVALID, "%s: malformed certificate extensions", path);
}

/* cert_hex: bytes as upper-case hex, sep between them ('\0': none). */
static void cert_hex(const unsigned char *b, size_t n, char sep, char *out, size_t size)
{
	size_t i, o = 0;

	out[0] = '\0';
	/* each byte: 2 digits, its separator when one follows, room for the NUL */
	for (i = 0; i < n && o + 3 + (sep && i + 1 < n) <= size; i++) {
		o += (size_t)snprintf(out + o, size - o, "%02X", b[i]);
		if (sep && i + 1 < n)
			out[o++] = sep;
	}
	out[o] = '\0';
}

/* cert_info_of: crt (read from path) as a struct cert_info. */
static enum sd_result cert_info_of(const mbedtls_x509_crt *crt, const char *path,
				   struct cert_info *info)
{
	const mbedtls_md_info_t *md = mbedtls_md_info_from_type(MBEDTLS_MD_SHA256);
	const unsigned char *serial = crt->serial.p;
	size_t serial_len = crt->serial.len;
	unsigned char h[32];

	memset(info, 0, sizeof *info);
	info->not_before_ms = cert_time_ms(&crt->valid_from);
	info->not_after_ms = cert_time_ms(&crt->valid_to);
	if (!md || mbedtls_md(md, crt->raw.p, crt->raw.len, h) != 0)
		return err_set(SD_IO, "cannot hash %s", path);
	cert_hex(h, sizeof h, ':', info->fingerprint, sizeof info->fingerprint);
	/* as openssl prints a serial: the integer, without a sign byte */
	while (serial_len > 1 && serial[0] == 0) {
		serial++;
		serial_len--;
	}
	cert_hex(serial, serial_len, '\0', info->serial, sizeof info->serial);
	if (mbedtls_x509_dn_gets(info->subject, sizeof info->subject, &crt->subject) < 0)
		info->subject[0] = '\0';
	if (mbedtls_x509_dn_gets(info->issuer, sizeof info->issuer, &crt->issuer) < 0)
		info->issuer[0] = '\0';
	info->is_ca = crt->ca_istrue != 0;
	info->name_constrained = cert_ext_find(crt, MBEDTLS_OID_NAME_CONSTRAINTS,
					       MBEDTLS_OID_SIZE(MBEDTLS_OID_NAME_CONSTRAINTS),
					       &(unsigned char *){ NULL }, &(size_t){ 0 }) == 0;
	info->server_auth = (crt->ext_types & MBEDTLS_X509_EXT_EXTENDED_KEY_USAGE) &&
			    mbedtls_x509_crt_check_extended_key_usage(
				    crt, MBEDTLS_OID_SERVER_AUTH,
				    MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH)) == 0;
	return cert_san_read(crt, &info->names, &info->names_more, path);
}

enum sd_result cert_info_load(const char *path, struct cert_info *info)
{
	mbedtls_x509_crt crt;
	enum sd_result r;

	memset(info, 0, sizeof *info);
	mbedtls_x509_crt_init(&crt);
	if ((r = cert_crt_load(path, &crt)) == SD_OK)
		r = cert_info_of(&crt, path, info);
	mbedtls_x509_crt_free(&crt);
	return r;
}

enum sd_result cert_days_left(const char *path, int64_t now_ms, int64_t *days)
{
	const int64_t day_ms = CERT_DAY_S * 1000;
	struct cert_info info;
	enum sd_result r;
	int64_t left;

	*days = 0;
	if ((r = cert_info_load(path, &info)) != SD_OK)
		return r;
	left = info.not_after_ms - now_ms;
	/* rounded down, also below zero: 1 ms past the end is day -1 */
	*days = left >= 0 ? left / day_ms : -((-left + day_ms - 1) / day_ms);
	return SD_OK;
}

enum sd_result cert_key_check(const char *cert_path, const char *key_path)
{
	mbedtls_x509_crt crt;
	mbedtls_pk_context pk;
	enum sd_result r;

	mbedtls_x509_crt_init(&crt);
	mbedtls_pk_init(&pk);
	if ((r = cert_crt_load(cert_path, &crt)) != SD_OK || (r = cert_key_load(key_path, &pk)))
		goto out;
	if (mbedtls_pk_check_pair(&crt.pk, &pk) != 0)
		r = err_set(SD_INVALID, "%s is not the key of %s", key_path, cert_path);
out:
	mbedtls_pk_free(&pk);
	mbedtls_x509_crt_free(&crt);
	return r;
}

/* cert_chains: crt is signed by ca (a trusted root) and fit for its use;
 * being outside its validity is not counted (a certificate made for a past
 * or future clock is still made right). */
static enum sd_result cert_chains(mbedtls_x509_crt *crt, mbedtls_x509_crt *ca, const char *what)
{
	char why[256];
	uint32_t flags = 0;

	mbedtls_x509_crt_verify(crt, ca, NULL, NULL, &flags, NULL, NULL);
	flags &= ~(uint32_t)(MBEDTLS_X509_BADCERT_EXPIRED | MBEDTLS_X509_BADCERT_FUTURE);
	if (flags == 0)
		return SD_OK;
	if (mbedtls_x509_crt_verify_info(why, sizeof why, "", flags) < 0)
		snprintf(why, sizeof why, "flags 0x%x", (unsigned)flags);
	/* one line: verify_info ends each reason with a newline */
	for (char *c = why; *c; c++)
		if (*c == '\n')
			*c = c[1] ? ';' : '\0';
	return err_set(SD_INVALID, "%s does not verify against the box CA: %s", what, why);
}

/* ======================== extensions as DER ============================== */

/* cert_der_tlv: tag, length and v[0..len) written backwards before *p;
 * the bytes written, or an mbedTLS error (< 0). */
static int cert_der_tlv(unsigned char **p, unsigned char *start, unsigned char tag,
			const unsigned char *v, size_t len)
{
	int a, b, c;

	if ((a = mbedtls_asn1_write_raw_buffer(p, start, v, len)) < 0)
		return a;
	if ((b = mbedtls_asn1_write_len(p, start, len)) < 0)
		return b;
	if ((c = mbedtls_asn1_write_tag(p, start, tag)) < 0)
		return c;
	return a + b + c;
}

/* cert_der_seq: wrap the len bytes at *p in a SEQUENCE; the total, or < 0. */
static int cert_der_seq(unsigned char **p, unsigned char *start, size_t len)
{
	int b, c;

	if ((b = mbedtls_asn1_write_len(p, start, len)) < 0)
		return b;
	if ((c = mbedtls_asn1_write_tag(p, start, MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE)) <
	    0)
		return c;
	return (int)len + b + c;
}

/*
 * cert_der_san: GeneralNames ::= SEQUENCE OF GeneralName for every DNS
 * name ([2] IA5String) and then every address ([7] OCTET STRING of 4 or 16
 * bytes), written at the end of buf.  [out] *der, *len.
 */
static enum sd_result cert_der_san(const struct cert_names *n, unsigned char *buf, size_t size,
				   unsigned char **der, size_t *len)
{
	const unsigned char dns_tag = MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_DNS_NAME;
	const unsigned char ip_tag = MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_X509_SAN_IP_ADDRESS;
	unsigned char *p = buf + size, ip[16];
	size_t total = 0, ip_len;
	int i, w;

	/* backwards: the last name first */
	for (i = n->n_ip - 1; i >= 0; i--) {
		cert_ip_bytes(n->ip[i], ip, &ip_len);
		if (!ip_len)
			return err_set(SD_INVALID, "'%s' is not an address", n->ip[i]);
		if ((w = cert_der_tlv(&p, buf, ip_tag, ip, ip_len)) < 0)
			goto bad;
		total += (size_t)w;
	}
	for (i = n->n_dns - 1; i >= 0; i--) {
		if ((w = cert_der_tlv(&p, buf, dns_tag, (const unsigned char *)n->dns[i],
				      strlen(n->dns[i]))) < 0)
			goto bad;
		total += (size_t)w;
	}
	if ((w = cert_der_seq(&p, buf, total)) < 0)
		goto bad;
	*der = p;
	*len = (size_t)w;
	return SD_OK;
bad:
	return err_set(SD_INVALID, "the certificate's names do not fit in %zu bytes", size);
}

/* cert_ext_set: the extension oid (a literal) with value der[0..len) on crt,
 * critical or not; what names it in a refusal */
#define cert_ext_set(crt, oid, critical, der, len, what) \
	cert_ext_put((crt), (oid), MBEDTLS_OID_SIZE(oid), (critical), (der), (len), (what))
static enum sd_result cert_ext_put(mbedtls_x509write_cert *crt, const char *oid, size_t oid_len,
				   int critical, const unsigned char *der, size_t len,
				   const char *what)
{
	char why[128];
	int rc = mbedtls_x509write_crt_set_extension(crt, oid, oid_len, critical, der, len);

	if (rc != 0)
		return err_set(SD_INVALID, "cannot add %s: %s", what, cert_why(rc, why, sizeof why));
	return SD_OK;
}

/* cert_ext_eku: extendedKeyUsage serverAuth on crt (on the CA too: what it
 * signs is for servers only, as OpenSSL and browsers read it). */
static enum sd_result cert_ext_eku(mbedtls_x509write_cert *crt)
{
	unsigned char eku[32], *p = eku + sizeof eku;
	int w;

	/* ExtKeyUsageSyntax ::= SEQUENCE SIZE (1..MAX) OF KeyPurposeId */
	w = mbedtls_asn1_write_oid(&p, eku, MBEDTLS_OID_SERVER_AUTH,
				   MBEDTLS_OID_SIZE(MBEDTLS_OID_SERVER_AUTH));
	if (w < 0 || (w = cert_der_seq(&p, eku, (size_t)w)) < 0)
		return err_set(SD_INVALID, "cannot write extendedKeyUsage");
	return cert_ext_set(crt, MBEDTLS_OID_EXTENDED_KEY_USAGE, 0, p, (size_t)w,
			    "extendedKeyUsage");
}

/* cert_ext_server: subjectAltName and extendedKeyUsage serverAuth on crt. */
static enum sd_result cert_ext_server(mbedtls_x509write_cert *crt, const struct cert_names *n)
{
	unsigned char san[8192], *der = NULL;
	enum sd_result r;
	size_t len = 0;

	if ((r = cert_der_san(n, san, sizeof san, &der, &len)) != SD_OK ||
	    (r = cert_ext_set(crt, MBEDTLS_OID_SUBJECT_ALT_NAME, 0, der, len, "the names")) !=
		    SD_OK)
		return r;
	return cert_ext_eku(crt);
}

/* cert_ext_ca: the CA's critical nameConstraints for n (cert_nc.h) and
 * extendedKeyUsage serverAuth on crt. */
static enum sd_result cert_ext_ca(mbedtls_x509write_cert *crt, const struct cert_names *n)
{
	unsigned char nc[CERT_NC_DER_MAX], *der = NULL;
	enum sd_result r;
	size_t len = 0;

	if ((r = cert_nc_der(n, nc, sizeof nc, &der, &len)) != SD_OK ||
	    (r = cert_ext_set(crt, MBEDTLS_OID_NAME_CONSTRAINTS, 1, der, len,
			      "the name constraints")) != SD_OK)
		return r;
	return cert_ext_eku(crt);
}

/* ======================== issuing ======================================== */

/* What one certificate is: who, by whom, how long, for what. */
struct cert_issue {
	mbedtls_pk_context *subject_key;
	mbedtls_pk_context *issuer_key;
	const char *subject;		/* "CN=...,O=..." */
	const char *issuer;		/* the issuer's subject, as text */
	int64_t now_ms;
	int days;
	int is_ca;			/* a CA (pathlen 0), else a server */
	const struct cert_names *names;	/* a server's names; a CA's: what it may sign for */
};

/* cert_validity_text: "YYYYMMDDhhmmss" (UTC) of s seconds since the epoch. */
static enum sd_result cert_validity_text(int64_t s, char *out, size_t size)
{
	time_t t = (time_t)s;
	struct tm tm;

	if (!gmtime_r(&t, &tm) || tm.tm_year + 1900 < 1950 || tm.tm_year + 1900 > 9999)
		return err_set(SD_INVALID, "a validity date outside 1950..9999");
	snprintf(out, size, "%04d%02d%02d%02d%02d%02d", tm.tm_year + 1900, tm.tm_mon + 1,
		 tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
	return SD_OK;
}

/* cert_serial: 16 random bytes, positive, the first never 0 (so 16 bytes). */
static enum sd_result cert_serial(struct cert_rng *g, mbedtls_mpi *serial)
{
	unsigned char b[16];

	if (mbedtls_ctr_drbg_random(&g->drbg, b, sizeof b) != 0)
		return err_set(SD_IO, "cannot draw a serial number");
	b[0] &= 0x7f;
	if (b[0] == 0)
		b[0] = 1;
	if (mbedtls_mpi_read_binary(serial, b, sizeof b) != 0)
		return err_set(SD_NOMEM, "out of memory");
	return SD_OK;
}

/* cert_issue_pem: the certificate is describes, signed, as PEM into pem. */
static enum sd_result cert_issue_pem(const struct cert_issue *is, struct cert_rng *g,
				     unsigned char *pem, size_t size)
{
	mbedtls_x509write_cert crt;
	char from[64], to[64], why[128];
	int64_t start = is->now_ms / 1000 - CERT_SKEW_S;
	mbedtls_mpi serial;
	enum sd_result r;
	int rc;

	mbedtls_x509write_crt_init(&crt);
	mbedtls_mpi_init(&serial);
	if ((r = cert_validity_text(start, from, sizeof from)) != SD_OK ||
	    (r = cert_validity_text(start + is->days * CERT_DAY_S, to, sizeof to)) != SD_OK ||
	    (r = cert_serial(g, &serial)) != SD_OK)
		goto out;
	mbedtls_x509write_crt_set_version(&crt, MBEDTLS_X509_CRT_VERSION_3);
	mbedtls_x509write_crt_set_md_alg(&crt, MBEDTLS_MD_SHA256);
	mbedtls_x509write_crt_set_subject_key(&crt, is->subject_key);
	mbedtls_x509write_crt_set_issuer_key(&crt, is->issuer_key);
	if ((rc = mbedtls_x509write_crt_set_serial(&crt, &serial)) != 0 ||
	    (rc = mbedtls_x509write_crt_set_validity(&crt, from, to)) != 0 ||
	    (rc = mbedtls_x509write_crt_set_subject_name(&crt, is->subject)) != 0 ||
	    (rc = mbedtls_x509write_crt_set_issuer_name(&crt, is->issuer)) != 0 ||
	    (rc = mbedtls_x509write_crt_set_basic_constraints(&crt, is->is_ca,
							      is->is_ca ? 0 : -1)) != 0 ||
	    (rc = mbedtls_x509write_crt_set_key_usage(
		     &crt, is->is_ca ? MBEDTLS_X509_KU_KEY_CERT_SIGN | MBEDTLS_X509_KU_CRL_SIGN
				     : MBEDTLS_X509_KU_DIGITAL_SIGNATURE)) != 0 ||
	    (rc = mbedtls_x509write_crt_set_subject_key_identifier(&crt)) != 0 ||
	    (rc = mbedtls_x509write_crt_set_authority_key_identifier(&crt)) != 0) {
		r = err_set(SD_INVALID, "cannot describe the certificate for %s: %s", is->subject,
			    cert_why(rc, why, sizeof why));
		goto out;
	}
	if ((r = is->is_ca ? cert_ext_ca(&crt, is->names) : cert_ext_server(&crt, is->names)) !=
	    SD_OK)
		goto out;
	rc = mbedtls_x509write_crt_pem(&crt, pem, size, mbedtls_ctr_drbg_random, &g->drbg);
	if (rc != 0)
		r = err_set(SD_IO, "cannot sign the certificate for %s: %s", is->subject,
			    cert_why(rc, why, sizeof why));
out:
	mbedtls_mpi_free(&serial);
	mbedtls_x509write_crt_free(&crt);
	return r;
}

/* cert_key_new: a fresh P-256 key in pk (initialised by the caller). */
static enum sd_result cert_key_new(mbedtls_pk_context *pk, struct cert_rng *g)
{
	char why[128];
	int rc;

	if ((rc = mbedtls_pk_setup(pk, mbedtls_pk_info_from_type(MBEDTLS_PK_ECKEY))) != 0 ||
	    (rc = mbedtls_ecp_gen_key(MBEDTLS_ECP_DP_SECP256R1, mbedtls_pk_ec(*pk),
				      mbedtls_ctr_drbg_random, &g->drbg)) != 0)
		return err_set(SD_IO, "cannot make a P-256 key: %s", cert_why(rc, why, sizeof why));
	return SD_OK;
}

/* cert_key_put: pk as PEM into path, mode 0600; the PEM is wiped after. */
static enum sd_result cert_key_put(mbedtls_pk_context *pk, const char *path)
{
	unsigned char pem[CERT_KEY_PEM_MAX];
	enum sd_result r;

	if (mbedtls_pk_write_key_pem(pk, pem, sizeof pem) != 0)
		r = err_set(SD_INVALID, "cannot write the key for %s", path);
	else
		r = cert_put(path, pem, strlen((const char *)pem), 0600);
	mbedtls_platform_zeroize(pem, sizeof pem);
	return r;
}

/* cert_check_pem: pem parses back into crt (initialised by the caller). */
static enum sd_result cert_check_pem(const unsigned char *pem, mbedtls_x509_crt *crt,
				     const char *what)
{
	char why[128];
	int rc = cert_nc_parse(crt, pem, strlen((const char *)pem) + 1);

	if (rc != 0)
		return err_set(SD_INVALID, "the new %s does not parse back: %s", what,
			       cert_why(rc, why, sizeof why));
	return SD_OK;
}

/*
 * cert_ca_make: a box CA: a new P-256 key into key_path (mode 0600), unless
 * reuse_key and key_path holds one already, which then signs; and its
 * self-signed certificate into cert_path (0644): subject "CN=Stagedoor Box
 * CA <host>, O=Stagedoor Box" (host: the machine's name when NULL),
 * basicConstraints CA:TRUE pathlen 0 (critical), keyUsage keyCertSign and
 * cRLSign (critical), nameConstraints permitting names and the private
 * names and ranges (critical, cert_nc.h), extendedKeyUsage serverAuth,
 * subject key identifier, valid CERT_CA_DAYS days from now_ms -
 * CERT_SKEW_S.  Both files replace what they named (rename).
 */
static enum sd_result cert_ca_make(const char *cert_path, const char *key_path, const char *host,
			    int reuse_key, const struct cert_names *names, int64_t now_ms)
{
	unsigned char pem[CERT_PEM_MAX];
	char name[CERT_DNS_MAX], subject[CERT_DN_MAX + 64];
	struct cert_rng g;
	mbedtls_pk_context key;
	mbedtls_x509_crt back;
	struct cert_issue is;
	enum sd_result r;

	mbedtls_pk_init(&key);
	mbedtls_x509_crt_init(&back);
	if (host && !cert_dns_problem(host))
		snprintf(name, sizeof name, "%s", host);
	else
		cert_hostname(name, sizeof name);
	snprintf(subject, sizeof subject, "CN=Stagedoor Box CA%s%s, O=" CERT_ORG,
		 name[0] ? " " : "", name);
	if ((r = cert_rng_start(&g)) != SD_OK)
		goto out;
	if (reuse_key)
		r = cert_key_load(key_path, &key);
	else
		r = cert_key_new(&key, &g);
	if (r != SD_OK)
		goto out;
	is = (struct cert_issue){ &key, &key, subject, subject, now_ms, CERT_CA_DAYS, 1, names };
	if ((r = cert_issue_pem(&is, &g, pem, sizeof pem)) != SD_OK ||
	    (r = cert_check_pem(pem, &back, "CA certificate")) != SD_OK)
		goto out;
	/* the key first: a certificate on disk always has its key beside it */
	if (!reuse_key && (r = cert_key_put(&key, key_path)) != SD_OK)
		goto out;
	r = cert_put(cert_path, pem, strlen((const char *)pem), 0644);
out:
	mbedtls_x509_crt_free(&back);
	mbedtls_pk_free(&key);
	cert_rng_end(&g);
	return r;
}

/* cert_ca_open: the CA's certificate and key, checked to belong together. */
static enum sd_result cert_ca_open(const char *ca_cert, const char *ca_key, mbedtls_x509_crt *crt,
				   mbedtls_pk_context *key)
{
	enum sd_result r;

	if ((r = cert_crt_load(ca_cert, crt)) != SD_OK)
		return r;
	if (!crt->ca_istrue)
		return err_set(SD_INVALID, "%s is not a CA certificate", ca_cert);
	if ((r = cert_key_load(ca_key, key)) != SD_OK)
		return r;
	if (mbedtls_pk_check_pair(&crt->pk, key) != 0)
		return err_set(SD_INVALID, "%s is not the key of %s", ca_key, ca_cert);
	return SD_OK;
}

enum sd_result cert_server_make(const char *ca_cert, const char *ca_key,
				const struct cert_names *names, int days, const char *cert_path,
				const char *key_path, int64_t now_ms)
{
	unsigned char pem[CERT_PEM_MAX];
	char issuer[CERT_DN_MAX], subject[CERT_DNS_MAX + 32];
	mbedtls_x509_crt ca, back;
	mbedtls_pk_context ca_pk, key;
	struct cert_issue is;
	struct cert_rng g;
	enum sd_result r;

	mbedtls_x509_crt_init(&ca);
	mbedtls_x509_crt_init(&back);
	mbedtls_pk_init(&ca_pk);
	mbedtls_pk_init(&key);
	memset(&g, 0, sizeof g);
	if ((r = cert_rng_start(&g)) != SD_OK)
		goto out;
	if (names->n_dns + names->n_ip == 0) {
		r = err_set(SD_INVALID, "a server certificate needs a DNS name or an address");
		goto out;
	}
	if ((r = cert_ca_open(ca_cert, ca_key, &ca, &ca_pk)) != SD_OK ||
	    (r = cert_nc_check(&ca, names, &(int){ 0 })) != SD_OK)
		goto out;
	if (mbedtls_x509_dn_gets(issuer, sizeof issuer, &ca.subject) < 0) {
		r = err_set(SD_INVALID, "%s: the CA's name is too long", ca_cert);
		goto out;
	}
	snprintf(subject, sizeof subject, "CN=%s, O=" CERT_ORG,
		 names->n_dns ? names->dns[0] : names->ip[0]);
	if ((r = cert_key_new(&key, &g)) != SD_OK)
		goto out;
	is = (struct cert_issue){ &key, &ca_pk, subject, issuer, now_ms,
				  days > 0 ? days : CERT_SERVER_DAYS, 0, names };
	if ((r = cert_issue_pem(&is, &g, pem, sizeof pem)) != SD_OK ||
	    (r = cert_check_pem(pem, &back, "server certificate")) != SD_OK ||
	    (r = cert_chains(&back, &ca, "the new server certificate")) != SD_OK)
		goto out;
	if ((r = cert_key_put(&key, key_path)) != SD_OK)
		goto out;
	r = cert_put(cert_path, pem, strlen((const char *)pem), 0644);
out:
	mbedtls_pk_free(&key);
	mbedtls_pk_free(&ca_pk);
	mbedtls_x509_crt_free(&back);
	mbedtls_x509_crt_free(&ca);
	cert_rng_end(&g);
	return r;
}

/* ======================== tls init ======================================= */

/* cert_dir_make: <state>/tls, mode 0700 (made so, or made so now). */
static enum sd_result cert_dir_make(const char *dir)
{
	struct stat st;
	enum sd_result r;

	if ((r = fsio_mkdirs(dir, 0)) != SD_OK)
		return r;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return err_set(SD_IO, "%s is not a folder", dir);
	if ((st.st_mode & 07777) != 0700 && chmod(dir, 0700) != 0)
		return err_set(SD_IO, "cannot make %s private (chmod 700): %s", dir,
			       strerror(errno));
	return SD_OK;
}

/* cert_init_names: the names a new server certificate (and a new CA's
 * constraints) are for: those given, else the kept certificate's, else the
 * machine's */
static enum sd_result cert_init_names(const struct cert_paths *p, const struct cert_names *given,
				      struct cert_names *use)
{
	struct cert_info old;

	if (given && given->n_dns + given->n_ip > 0) {
		*use = *given;
		return SD_OK;
	}
	if (cert_info_load(p->server_cert, &old) == SD_OK && old.names.n_dns + old.names.n_ip > 0) {
		*use = old.names;
		return SD_OK;
	}
	return cert_names_default(use);
}

/* cert_key_move: the CA's key from the box (from) to a file off it (to,
 * which must not exist): written, read back, then removed from the box */
static enum sd_result cert_key_move(const char *from, const char *to, const char *dir)
{
	mbedtls_pk_context pk, back;
	enum sd_result r;
	int there = 0;

	mbedtls_pk_init(&pk);
	mbedtls_pk_init(&back);
	if ((r = cert_exists(to, &there)) != SD_OK)
		goto out;
	if (there) {
		r = err_set(SD_INVALID, "%s exists: the CA's key is never written over a file", to);
		goto out;
	}
	if ((r = cert_key_load(from, &pk)) != SD_OK || (r = cert_key_put(&pk, to)) != SD_OK ||
	    (r = cert_key_load(to, &back)) != SD_OK)
		goto out;
	if (unlink(from) != 0) {
		r = err_set(SD_IO, "cannot remove %s: %s", from, strerror(errno));
		goto out;
	}
	r = fsio_sync_dir(dir);
out:
	mbedtls_pk_free(&back);
	mbedtls_pk_free(&pk);
	return r;
}

/* cert_init_ca: the CA as the module invariants say, its key where o says;
 * [out] key: where the CA's key is now */
static enum sd_result cert_init_ca(const struct cert_paths *p, const struct cert_init_opts *o,
				   const struct cert_names *names, int64_t now_ms,
				   struct cert_init_report *rep)
{
	const char *key = o->ca_key ? o->ca_key : p->ca_key;
	struct cert_info info;
	enum sd_result r;
	int have_crt, have_key;

	snprintf(rep->ca_key_path, sizeof rep->ca_key_path, "%s", key);
	if ((r = cert_exists(p->ca_cert, &have_crt)) != SD_OK ||
	    (r = cert_exists(key, &have_key)) != SD_OK)
		return r;
	if (have_crt && !o->new_ca) {
		if ((r = cert_info_load(p->ca_cert, &info)) != SD_OK)
			return r;
		if (!info.is_ca)
			return err_set(SD_INVALID, "%s is not a CA certificate", p->ca_cert);
		if (!o->ca_key_out)
			return SD_OK;
		if (!have_key || o->ca_key)
			return err_set(SD_INVALID, "the box CA's key is not in %s: it is kept off "
				       "the box already", p->dir);
		if ((r = cert_key_move(key, o->ca_key_out, p->dir)) == SD_OK) {
			rep->ca_key_moved = 1;
			snprintf(rep->ca_key_path, sizeof rep->ca_key_path, "%s", o->ca_key_out);
		}
		return r;
	}
	if (o->ca_key_out || o->new_ca) {
		/* a new CA: its key where asked, never over a file */
		key = o->ca_key_out ? o->ca_key_out : p->ca_key;
		snprintf(rep->ca_key_path, sizeof rep->ca_key_path, "%s", key);
		if (o->ca_key_out && ((r = cert_exists(key, &have_key)) != SD_OK || have_key))
			return r != SD_OK ? r : err_set(SD_INVALID, "%s exists: the CA's key is "
							"never written over a file", key);
		have_key = 0;
	}
	/* no certificate but a key: made again from it (nobody can trust a
	 * certificate that is not there) */
	if ((r = cert_ca_make(p->ca_cert, key, NULL, have_key, names, now_ms)) != SD_OK)
		return r;
	if (have_key)
		rep->ca_remade = 1;
	else
		rep->ca_made = 1;
	rep->ca_replaced = have_crt;
	return SD_OK;
}

/* cert_server_sound: a kept server.pem: its key matches and it chains to
 * ca.pem; SD_INVALID telling to renew otherwise. */
static enum sd_result cert_server_sound(const struct cert_paths *p)
{
	mbedtls_x509_crt ca, crt;
	enum sd_result r;

	mbedtls_x509_crt_init(&ca);
	mbedtls_x509_crt_init(&crt);
	if ((r = cert_key_check(p->server_cert, p->server_key)) != SD_OK ||
	    (r = cert_crt_load(p->ca_cert, &ca)) != SD_OK ||
	    (r = cert_crt_load(p->server_cert, &crt)) != SD_OK ||
	    (r = cert_chains(&crt, &ca, p->server_cert)) != SD_OK)
		r = err_set(r, "%s (stagedoor tls renew makes a new server certificate)",
			    err_msg());
	mbedtls_x509_crt_free(&crt);
	mbedtls_x509_crt_free(&ca);
	return r;
}

/* cert_init_server: server.pem and server.key, kept or made, signed by the
 * CA's key at rep->ca_key_path. */
static enum sd_result cert_init_server(const struct cert_paths *p, const struct cert_init_opts *o,
				       const struct cert_names *use, int64_t now_ms,
				       struct cert_init_report *rep)
{
	int given = o->names && o->names->n_dns + o->names->n_ip > 0, have, key;
	struct cert_info old;
	enum sd_result r;

	if ((r = cert_exists(p->server_cert, &have)) != SD_OK)
		return r;
	if (have && !o->renew && !rep->ca_made) {
		if ((r = cert_server_sound(p)) != SD_OK)
			return r;
		if (given && cert_info_load(p->server_cert, &old) == SD_OK &&
		    !cert_names_equal(&old.names, o->names))
			rep->names_ignored = 1;
		return SD_OK;
	}
	if ((r = cert_exists(rep->ca_key_path, &key)) != SD_OK)
		return r;
	if (!key)
		return err_set(SD_NOT_FOUND, "the box CA's key is not on this box (no %s): give the "
			       "file it is kept in with --ca-key FILE", rep->ca_key_path);
	if ((r = cert_server_make(p->ca_cert, rep->ca_key_path, use, CERT_SERVER_DAYS,
				  p->server_cert, p->server_key, now_ms)) != SD_OK)
		return r;
	if (have)
		rep->server_renewed = 1;
	else
		rep->server_made = 1;
	return SD_OK;
}

enum sd_result cert_init(const char *state_dir, const struct cert_init_opts *o, int64_t now_ms,
			 struct cert_init_report *rep)
{
	struct cert_names use;
	struct cert_paths p;
	enum sd_result r;
	int fd = -1;

	memset(rep, 0, sizeof *rep);
	if ((r = cert_paths(state_dir, &p)) != SD_OK || (r = cert_dir_make(p.dir)) != SD_OK)
		return r;
	if ((fd = open(p.lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return err_set(SD_IO, "cannot open %s: %s", p.lock, strerror(errno));
	while (flock(fd, LOCK_EX) != 0)
		if (errno != EINTR) {
			r = err_set(SD_IO, "cannot lock %s: %s", p.lock, strerror(errno));
			goto out;
		}
	if ((r = cert_init_names(&p, o->names, &use)) != SD_OK ||
	    (r = cert_init_ca(&p, o, &use, now_ms, rep)) != SD_OK)
		goto out;
	r = cert_init_server(&p, o, &use, now_ms, rep);
out:
	close(fd);	/* and with it the lock */
	return r;
}
