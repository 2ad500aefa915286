/*
 * cert_nc.c: the box CA's name constraints (cert_nc.h).
 *
 * Invariants: the extension lists permitted subtrees of both kinds this box
 * signs for, dNSName and iPAddress (RFC 5280: a kind with no permitted
 * subtree would be unconstrained); a name matches a dNSName subtree when it
 * is the subtree's name or ends with "." and it, as OpenSSL, GnuTLS and
 * browsers match; an address matches when it has the subtree's length and
 * is equal under its mask.
 */
#define _GNU_SOURCE
#include "cert_nc.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <mbedtls/asn1write.h>
#include <mbedtls/oid.h>
#include <mbedtls/pem.h>

/* Names nobody can own on the internet (RFC 6761, 6762, 8375; ICANN's
 * .internal): a box may be called so without a new CA. */
static const char *const private_names[] = { "localhost", "local", "internal", "home.arpa" };

/* Ranges a box on a venue's network may be given: private (RFC 1918, 4193),
 * loopback, link-local and shared (RFC 6598) addresses. */
static const struct {
	const char *base;
	int bits;
} private_ranges[] = {
	{ "10.0.0.0", 8 },	  { "172.16.0.0", 12 }, { "192.168.0.0", 16 }, { "127.0.0.0", 8 },
	{ "169.254.0.0", 16 }, { "100.64.0.0", 10 }, { "::1", 128 },	      { "fc00::", 7 },
	{ "fe80::", 10 },
};

#define TAG_DNS (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 2)
#define TAG_IP (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7)
#define TAG_SEQ (MBEDTLS_ASN1_CONSTRUCTED | MBEDTLS_ASN1_SEQUENCE)
#define TAG_PERMITTED (MBEDTLS_ASN1_CONTEXT_SPECIFIC | MBEDTLS_ASN1_CONSTRUCTED | 0)

/* ip_of: text to 4 or 16 bytes; [out] *len, 0 when it is no address */
static void ip_of(const char *text, unsigned char out[16], size_t *len)
{
	*len = inet_pton(AF_INET, text, out) == 1 ? 4 : inet_pton(AF_INET6, text, out) == 1 ? 16 : 0;
}

/* mask_of: the first bits of len bytes set */
static void mask_of(int bits, size_t len, unsigned char *mask)
{
	size_t i;

	for (i = 0; i < len; i++, bits -= 8)
		mask[i] = bits >= 8 ? 0xff : bits <= 0 ? 0 : (unsigned char)(0xff << (8 - bits));
}

static int ip_in(const unsigned char *ip, size_t len, const unsigned char *base,
		 const unsigned char *mask, size_t base_len)
{
	size_t i;

	if (len != base_len)
		return 0;
	for (i = 0; i < len; i++)
		if ((ip[i] & mask[i]) != (base[i] & mask[i]))
			return 0;
	return 1;
}

static int dns_in(const char *name, const char *base, size_t base_len)
{
	size_t n = strlen(name);

	if (n == base_len)
		return strncasecmp(name, base, n) == 0;
	return n > base_len && name[n - base_len - 1] == '.' &&
	       strncasecmp(name + n - base_len, base, base_len) == 0;
}

/* ======================== writing ======================================== */

/* subtree: GeneralSubtree ::= SEQUENCE { base GeneralName } before *p */
static int subtree(unsigned char **p, unsigned char *start, unsigned char tag,
		   const unsigned char *v, size_t len)
{
	int a, b, c, d;

	if ((a = mbedtls_asn1_write_raw_buffer(p, start, v, len)) < 0 ||
	    (b = mbedtls_asn1_write_len(p, start, len)) < 0 ||
	    (c = mbedtls_asn1_write_tag(p, start, tag)) < 0)
		return -1;
	if ((d = mbedtls_asn1_write_len(p, start, (size_t)(a + b + c))) < 0 ||
	    mbedtls_asn1_write_tag(p, start, TAG_SEQ) < 0)
		return -1;
	return a + b + c + d + 1;
}

/* ip_subtree: base/bits as an iPAddress subtree (address then mask) */
static int ip_subtree(unsigned char **p, unsigned char *start, const char *base, int bits)
{
	unsigned char v[32];
	size_t len;

	ip_of(base, v, &len);
	if (!len)
		return -1;
	mask_of(bits, len, v + len);
	for (size_t i = 0; i < len; i++)
		v[i] &= v[len + i];
	return subtree(p, start, TAG_IP, v, 2 * len);
}

/* covered: addr is within one of the private ranges already listed */
static int covered(const char *addr)
{
	unsigned char ip[16], base[16], mask[16];
	size_t len, blen, i;

	ip_of(addr, ip, &len);
	for (i = 0; i < sizeof private_ranges / sizeof private_ranges[0]; i++) {
		ip_of(private_ranges[i].base, base, &blen);
		mask_of(private_ranges[i].bits, blen, mask);
		if (ip_in(ip, len, base, mask, blen))
			return 1;
	}
	return 0;
}

enum sd_result cert_nc_der(const struct cert_names *names, unsigned char *buf, size_t size,
			   unsigned char **der, size_t *len)
{
	unsigned char *p = buf + size;
	size_t total = 0, i;
	int w, k;

	for (i = 0; i < sizeof private_ranges / sizeof private_ranges[0]; i++) {
		if ((w = ip_subtree(&p, buf, private_ranges[i].base, private_ranges[i].bits)) < 0)
			goto bad;
		total += (size_t)w;
	}
	for (k = 0; k < names->n_ip; k++) {
		if (covered(names->ip[k]))
			continue;
		if ((w = ip_subtree(&p, buf, names->ip[k], strchr(names->ip[k], ':') ? 128 : 32)) <
		    0)
			goto bad;
		total += (size_t)w;
	}
	for (i = 0; i < sizeof private_names / sizeof private_names[0]; i++) {
		if ((w = subtree(&p, buf, TAG_DNS, (const unsigned char *)private_names[i],
				 strlen(private_names[i]))) < 0)
			goto bad;
		total += (size_t)w;
	}
	for (k = 0; k < names->n_dns; k++) {
		if ((w = subtree(&p, buf, TAG_DNS, (const unsigned char *)names->dns[k],
				 strlen(names->dns[k]))) < 0)
			goto bad;
		total += (size_t)w;
	}
	/* NameConstraints ::= SEQUENCE { permittedSubtrees [0] GeneralSubtrees } */
	if ((w = mbedtls_asn1_write_len(&p, buf, total)) < 0 ||
	    mbedtls_asn1_write_tag(&p, buf, TAG_PERMITTED) < 0)
		goto bad;
	total += (size_t)w + 1;
	if ((w = mbedtls_asn1_write_len(&p, buf, total)) < 0 ||
	    mbedtls_asn1_write_tag(&p, buf, TAG_SEQ) < 0)
		goto bad;
	*der = p;
	*len = total + (size_t)w + 1;
	return SD_OK;
bad:
	return err_set(SD_INVALID, "the CA's name constraints do not fit in %zu bytes", size);
}

/* ======================== reading ======================================== */

/* accept_nc: the extension callback: nameConstraints is understood (by
 * cert_nc_check), any other extension mbedTLS does not know is not */
static int accept_nc(void *ctx, mbedtls_x509_crt const *crt, mbedtls_x509_buf const *oid,
		     int critical, const unsigned char *p, const unsigned char *end)
{
	(void)ctx;
	(void)crt;
	(void)critical;
	(void)p;
	(void)end;
	return MBEDTLS_OID_CMP(MBEDTLS_OID_NAME_CONSTRAINTS, oid) == 0
		       ? 0
		       : MBEDTLS_ERR_X509_INVALID_EXTENSIONS;
}

int cert_nc_parse(mbedtls_x509_crt *chain, const unsigned char *buf, size_t len)
{
	static const char begin[] = "-----BEGIN CERTIFICATE-----",
			  end[] = "-----END CERTIFICATE-----";
	int parsed = 0, failed = 0, rc = 0;
	mbedtls_pem_context pem;
	size_t used;

	if (len == 0 || buf[len - 1] != '\0' || !strstr((const char *)buf, "-----BEGIN "))
		return mbedtls_x509_crt_parse_der_with_ext_cb(chain, buf, len, 1, accept_nc, NULL);
	while (len > 1) {
		mbedtls_pem_init(&pem);
		rc = mbedtls_pem_read_buffer(&pem, begin, end, buf, NULL, 0, &used);
		if (rc == 0)
			rc = mbedtls_x509_crt_parse_der_with_ext_cb(chain, pem.buf, pem.buflen, 1,
								    accept_nc, NULL);
		mbedtls_pem_free(&pem);
		if (rc == MBEDTLS_ERR_PEM_NO_HEADER_FOOTER_PRESENT)
			break;
		if (rc == 0)
			parsed++;
		else if (used == 0 || used > len)
			break;	/* nothing more to read */
		else
			failed++;
		buf += used;
		len -= used;
	}
	if (parsed == 0)
		return rc ? rc : MBEDTLS_ERR_X509_CERT_UNKNOWN_FORMAT;
	return failed;
}

int cert_nc_parse_file(mbedtls_x509_crt *chain, const char *path)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf = NULL;
	size_t n = 0;
	int rc = MBEDTLS_ERR_X509_FILE_IO_ERROR;

	if (!f)
		return rc;
	if ((buf = malloc(CERT_NC_FILE_MAX + 1))) {
		n = fread(buf, 1, CERT_NC_FILE_MAX + 1, f);
		if (!ferror(f) && n > 0 && n <= CERT_NC_FILE_MAX) {
			buf[n] = '\0';
			rc = cert_nc_parse(chain, buf, strstr((char *)buf, "-----BEGIN ") ? n + 1 : n);
		}
	}
	free(buf);
	fclose(f);
	return rc;
}

int cert_ext_find(const mbedtls_x509_crt *crt, const char *oid, size_t oid_len,
		  unsigned char **v, size_t *vlen)
{
	unsigned char *p = crt->v3_ext.p, *end, *ext_end;
	mbedtls_asn1_buf id;
	size_t len;
	int crit;

	if (!p || crt->v3_ext.len == 0)
		return 1;
	end = p + crt->v3_ext.len;
	if (mbedtls_asn1_get_tag(&p, end, &len, TAG_SEQ))
		return -1;
	for (end = p + len; p < end; p = ext_end) {
		/* Extension ::= SEQUENCE { extnID, critical BOOLEAN DEFAULT
		 * FALSE, extnValue OCTET STRING } */
		if (mbedtls_asn1_get_tag(&p, end, &len, TAG_SEQ))
			return -1;
		ext_end = p + len;
		if (mbedtls_asn1_get_tag(&p, ext_end, &id.len, MBEDTLS_ASN1_OID))
			return -1;
		id.p = p;
		p += id.len;
		(void)mbedtls_asn1_get_bool(&p, ext_end, &crit);	/* optional */
		if (mbedtls_asn1_get_tag(&p, ext_end, &len, MBEDTLS_ASN1_OCTET_STRING))
			return -1;
		if (id.len == oid_len && memcmp(id.p, oid, oid_len) == 0) {
			*v = p;
			*vlen = len;
			return 0;
		}
	}
	return 1;
}

/* permitted: name (DNS name or address text) is within one of the
 * permitted subtrees at p..end */
static int permitted(unsigned char *p, const unsigned char *end, const char *name)
{
	unsigned char ip[16], *sub_end;
	size_t len, ip_len;
	int is_ip;

	ip_of(name, ip, &ip_len);
	is_ip = ip_len > 0;
	for (; p < end; p = sub_end) {
		unsigned char tag;

		if (mbedtls_asn1_get_tag(&p, end, &len, TAG_SEQ))
			return 0;
		sub_end = p + len;
		tag = *p++;
		if (mbedtls_asn1_get_len(&p, sub_end, &len))
			return 0;
		if (is_ip && tag == TAG_IP && len == 2 * ip_len &&
		    ip_in(ip, ip_len, p, p + ip_len, ip_len))
			return 1;
		if (!is_ip && tag == TAG_DNS && dns_in(name, (const char *)p, len))
			return 1;
	}
	return 0;
}

enum sd_result cert_nc_check(const mbedtls_x509_crt *ca, const struct cert_names *names,
			     int *has)
{
	unsigned char *p, *end;
	size_t len;
	int i, rc;

	*has = 0;
	rc = cert_ext_find(ca, MBEDTLS_OID_NAME_CONSTRAINTS,
			   MBEDTLS_OID_SIZE(MBEDTLS_OID_NAME_CONSTRAINTS), &p, &len);
	if (rc == 1)
		return SD_OK;
	end = p + len;
	if (rc < 0 || mbedtls_asn1_get_tag(&p, end, &len, TAG_SEQ) ||
	    mbedtls_asn1_get_tag(&p, end, &len, TAG_PERMITTED))
		return err_set(SD_INVALID, "the box CA's name constraints do not parse");
	*has = 1;
	end = p + len;
	for (i = 0; i < names->n_dns + names->n_ip; i++) {
		const char *n = i < names->n_dns ? names->dns[i] : names->ip[i - names->n_dns];

		if (!permitted(p, end, n))
			return err_set(SD_INVALID, "the box CA may not sign for %s: it signs only for "
				       "the names and addresses it was made for, private names "
				       "(.local, .internal, .home.arpa, localhost) and private "
				       "addresses; stagedoor tls init --new-ca makes a CA for "
				       "new names (devices must then trust the new ca.pem)", n);
	}
	return SD_OK;
}
