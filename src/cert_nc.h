/*
 * cert_nc.h: the box CA's name constraints (RFC 5280 4.2.1.10), inside the
 * cert module (cert.c, cert_conn.c): no other module includes it.
 *
 * A device that trusts the box CA trusts whatever it signs.  So the CA
 * carries a critical nameConstraints extension: it may sign only for the
 * box's names and addresses as `tls init` was given them, the private
 * names (localhost, .local, .internal, .home.arpa) and the private and
 * local address ranges a box on a venue's network may be given.  A
 * certificate minted with a stolen CA key for any other name (a bank's, a
 * mail provider's) fails every client that checks constraints (OpenSSL,
 * GnuTLS, browsers, phones), and this box refuses to sign one.
 *
 * mbedTLS 2.28 parses no nameConstraints and refuses a certificate with a
 * critical extension it does not know: cert_nc_parse parses with a
 * callback that accepts this one, and cert_nc_check applies it to the
 * names this box signs for.
 */
#ifndef SD_CERT_NC_H
#define SD_CERT_NC_H

#include <stddef.h>

#include <mbedtls/x509_crt.h>

#include "cert.h"

#define CERT_NC_DER_MAX 8192	/* the extension's value, at most */

/* cert_nc_der: NameConstraints permitting names and the private names and
 * ranges, written at the end of buf.  [out] *der, *len. */
enum sd_result cert_nc_der(const struct cert_names *names, unsigned char *buf, size_t size,
			   unsigned char **der, size_t *len);

/* cert_nc_parse: every certificate of buf (PEM with its NUL counted in
 * len, or one DER) into chain, nameConstraints accepted.  As
 * mbedtls_x509_crt_parse: 0, < 0 (nothing parsed), or > 0 (that many
 * PEM blocks did not parse). */
int cert_nc_parse(mbedtls_x509_crt *chain, const unsigned char *buf, size_t len);

/* cert_nc_parse_file: cert_nc_parse of the file at path (a CA bundle, at
 * most CERT_NC_FILE_MAX bytes); MBEDTLS_ERR_X509_FILE_IO_ERROR when it
 * cannot be read. */
#define CERT_NC_FILE_MAX (8 * 1024 * 1024)
int cert_nc_parse_file(mbedtls_x509_crt *chain, const char *path);

/* cert_ext_find: the value (the OCTET STRING's content) of crt's extension
 * oid: [out] *p, *len; 0, 1 when crt has none, -1 when its extensions are
 * malformed. */
int cert_ext_find(const mbedtls_x509_crt *crt, const char *oid, size_t oid_len,
		  unsigned char **p, size_t *len);

/* cert_nc_check: [out] *has: ca carries name constraints; then every name
 * must be within them, else SD_INVALID naming the first that is not. */
enum sd_result cert_nc_check(const mbedtls_x509_crt *ca, const struct cert_names *names,
			     int *has);

#endif
