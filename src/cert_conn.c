/*
 * cert_conn.c: a TLS client connection with mbedTLS (cert.h), for the
 * benchmarks that drive the box's HTTPS server and for anything else that
 * must talk TLS to a server the box CA vouches for.  Part of the project's
 * mbedTLS wrapper with cert.c and code.c.
 *
 * Invariants:
 *  - TLS 1.2 or later, the server's certificate always verified
 *    (MBEDTLS_SSL_VERIFY_REQUIRED) against the one CA file the client was
 *    made with, and its name checked against the host asked for;
 *  - a client (CA, settings, random generator) is read-only once made and
 *    shared by connections on any thread (mbedTLS is built with
 *    MBEDTLS_THREADING_C: the generator locks itself); a connection belongs
 *    to one thread;
 *  - the socket is the caller's: it is read and written through plain
 *    send(2)/recv(2) (MSG_NOSIGNAL), so its SO_RCVTIMEO/SO_SNDTIMEO bound
 *    every step, and a timeout is SD_TIMEOUT, never a retry forever.
 */
#define _GNU_SOURCE
#include "cert.h"
#include "cert_nc.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <mbedtls/ctr_drbg.h>
#include <mbedtls/entropy.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>

static const char conn_pers[] = "stagedoor tls client";

/* the key exchanges offered, most preferred first */
static const mbedtls_ecp_group_id conn_curves[] = {
	MBEDTLS_ECP_DP_CURVE25519, MBEDTLS_ECP_DP_SECP256R1, MBEDTLS_ECP_DP_SECP384R1,
	MBEDTLS_ECP_DP_NONE
};

struct cert_client {
	mbedtls_x509_crt ca;		/* the only trusted root */
	mbedtls_entropy_context entropy;
	mbedtls_ctr_drbg_context drbg;
	mbedtls_ssl_config conf;	/* read-only once cert_client_new returns */
};

struct cert_conn {
	mbedtls_ssl_context ssl;
	int fd;				/* the caller's socket */
	int sys_errno;			/* errno of the failed send/recv, 0: none */
};

/* ======================== the socket under TLS =========================== */

static int conn_send(void *ctx, const unsigned char *buf, size_t len)
{
	struct cert_conn *t = ctx;
	ssize_t n;

	if (len > INT_MAX)
		len = INT_MAX;
	for (;;) {
		n = send(t->fd, buf, len, MSG_NOSIGNAL);
		if (n >= 0)
			return (int)n;
		if (errno == EINTR)
			continue;
		t->sys_errno = errno;
		return errno == EAGAIN || errno == EWOULDBLOCK ? MBEDTLS_ERR_SSL_TIMEOUT
							       : MBEDTLS_ERR_NET_SEND_FAILED;
	}
}

static int conn_recv(void *ctx, unsigned char *buf, size_t len)
{
	struct cert_conn *t = ctx;
	ssize_t n;

	if (len > INT_MAX)
		len = INT_MAX;
	for (;;) {
		n = recv(t->fd, buf, len, 0);
		if (n >= 0)
			return (int)n;	/* 0: EOF, which mbedTLS reports as such */
		if (errno == EINTR)
			continue;
		t->sys_errno = errno;
		return errno == EAGAIN || errno == EWOULDBLOCK ? MBEDTLS_ERR_SSL_TIMEOUT
							       : MBEDTLS_ERR_NET_RECV_FAILED;
	}
}

/* conn_fail: the error for mbedTLS's rc, what naming the step. */
static enum sd_result conn_fail(const struct cert_conn *t, int rc, const char *what)
{
	char why[160];

	if (rc == MBEDTLS_ERR_SSL_TIMEOUT)
		return err_set(SD_TIMEOUT, "TLS %s: timed out", what);
	if (t->sys_errno && (rc == MBEDTLS_ERR_NET_SEND_FAILED || rc == MBEDTLS_ERR_NET_RECV_FAILED))
		return err_set(SD_IO, "TLS %s: %s", what, strerror(t->sys_errno));
	mbedtls_strerror(rc, why, sizeof why);
	return err_set(SD_IO, "TLS %s: %s (-0x%04x)", what, why, (unsigned)-rc);
}

/* ======================== the client ===================================== */

enum sd_result cert_client_new(const char *ca_path, struct cert_client **out)
{
	struct cert_client *c;
	struct cert_info info;
	enum sd_result r;
	char why[160];
	int rc;

	*out = NULL;
	/* the same checks and messages as every other certificate read */
	if ((r = cert_info_load(ca_path, &info)) != SD_OK)
		return r;
	if (!(c = calloc(1, sizeof *c)))
		return err_set(SD_NOMEM, "out of memory");
	mbedtls_x509_crt_init(&c->ca);
	mbedtls_entropy_init(&c->entropy);
	mbedtls_ctr_drbg_init(&c->drbg);
	mbedtls_ssl_config_init(&c->conf);
	if ((rc = cert_nc_parse_file(&c->ca, ca_path)) < 0) {
		mbedtls_strerror(rc, why, sizeof why);
		r = err_set(SD_INVALID, "%s holds no certificate: %s", ca_path, why);
		goto out;
	}
	if ((rc = mbedtls_ctr_drbg_seed(&c->drbg, mbedtls_entropy_func, &c->entropy,
					(const unsigned char *)conn_pers, strlen(conn_pers))) != 0 ||
	    (rc = mbedtls_ssl_config_defaults(&c->conf, MBEDTLS_SSL_IS_CLIENT,
					      MBEDTLS_SSL_TRANSPORT_STREAM,
					      MBEDTLS_SSL_PRESET_DEFAULT)) != 0) {
		mbedtls_strerror(rc, why, sizeof why);
		r = err_set(SD_IO, "cannot set up TLS: %s", why);
		goto out;
	}
	mbedtls_ssl_conf_min_version(&c->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
				     MBEDTLS_SSL_MINOR_VERSION_3);	/* TLS 1.2 */
	/* mbedTLS 2.28 offers its curves largest first (P-521 leads), and a
	 * server may take the first: a handshake then costs the client several
	 * times the CPU.  X25519 and P-256 first, as browsers offer them. */
	mbedtls_ssl_conf_curves(&c->conf, conn_curves);
	mbedtls_ssl_conf_authmode(&c->conf, MBEDTLS_SSL_VERIFY_REQUIRED);
	mbedtls_ssl_conf_ca_chain(&c->conf, &c->ca, NULL);
	mbedtls_ssl_conf_rng(&c->conf, mbedtls_ctr_drbg_random, &c->drbg);
	*out = c;
	c = NULL;
out:
	cert_client_free(c);
	return r;
}

void cert_client_free(struct cert_client *c)
{
	if (!c)
		return;
	mbedtls_ssl_config_free(&c->conf);
	mbedtls_ctr_drbg_free(&c->drbg);
	mbedtls_entropy_free(&c->entropy);
	mbedtls_x509_crt_free(&c->ca);
	free(c);
}

/* ======================== a connection =================================== */

/* conn_verify_fail: why the server's certificate was refused. */
static enum sd_result conn_verify_fail(const struct cert_conn *t, const char *host)
{
	uint32_t flags = mbedtls_ssl_get_verify_result(&t->ssl);
	char why[256];
	char *c;

	if (mbedtls_x509_crt_verify_info(why, sizeof why, "", flags) < 0)
		snprintf(why, sizeof why, "flags 0x%x", (unsigned)flags);
	/* one line: each reason ends with a newline */
	for (c = why; *c; c++)
		if (*c == '\n')
			*c = c[1] ? ';' : '\0';
	return err_set(SD_IO, "TLS handshake with %s: the server's certificate was refused: %s",
		       host, why);
}

enum sd_result cert_conn_open(struct cert_client *c, int fd, const char *host,
			      struct cert_conn **out)
{
	struct cert_conn *t;
	enum sd_result r = SD_OK;
	char why[160];
	int rc;

	*out = NULL;
	if (!(t = calloc(1, sizeof *t)))
		return err_set(SD_NOMEM, "out of memory");
	t->fd = fd;
	mbedtls_ssl_init(&t->ssl);
	if ((rc = mbedtls_ssl_setup(&t->ssl, &c->conf)) != 0 ||
	    (rc = mbedtls_ssl_set_hostname(&t->ssl, host)) != 0) {
		mbedtls_strerror(rc, why, sizeof why);
		r = err_set(rc == MBEDTLS_ERR_SSL_ALLOC_FAILED ? SD_NOMEM : SD_INVALID,
			    "cannot start TLS to %s: %s", host, why);
		goto out;
	}
	mbedtls_ssl_set_bio(&t->ssl, t, conn_send, conn_recv, NULL);
	while ((rc = mbedtls_ssl_handshake(&t->ssl)) != 0) {
		if (rc == MBEDTLS_ERR_SSL_WANT_READ || rc == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		r = rc == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED ? conn_verify_fail(t, host)
							     : conn_fail(t, rc, "handshake");
		goto out;
	}
	*out = t;
	t = NULL;
out:
	if (t) {
		mbedtls_ssl_free(&t->ssl);
		free(t);
	}
	return r;
}

enum sd_result cert_conn_write(struct cert_conn *t, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len) {
		int n = mbedtls_ssl_write(&t->ssl, p, len);

		if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (n < 0)
			return conn_fail(t, n, "write");
		p += n;
		len -= (size_t)n;
	}
	return SD_OK;
}

enum sd_result cert_conn_read(struct cert_conn *t, void *buf, size_t size, size_t *got)
{
	int n;

	*got = 0;
	for (;;) {
		n = mbedtls_ssl_read(&t->ssl, buf, size);
		if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE)
			continue;
		if (n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY || n == MBEDTLS_ERR_SSL_CONN_EOF || n == 0)
			return SD_OK;
		if (n < 0)
			return conn_fail(t, n, "read");
		*got = (size_t)n;
		return SD_OK;
	}
}

void cert_conn_close(struct cert_conn *t)
{
	if (!t)
		return;
	/* best effort: the socket may be gone already */
	(void)mbedtls_ssl_close_notify(&t->ssl);
	mbedtls_ssl_free(&t->ssl);
	free(t);
}

const char *cert_conn_version(const struct cert_conn *t)
{
	return mbedtls_ssl_get_version(&t->ssl);
}
