/*
 * cert.h: the box's TLS certificates and a TLS client connection, with
 * mbedTLS.  cert.c (making and reading certificates), cert_nc.c (the CA's
 * name constraints), cert_conn.c (the TLS client) and code.c (ticket codes)
 * are the project's mbedTLS wrapper: no other module includes an mbedTLS
 * header.
 *
 * The box is its own small certificate authority.  `stagedoor tls init`
 * makes, in <state dir>/tls/ (mode 0700):
 *
 *   ca.key       the box CA's private key (ECDSA P-256), mode 0600; absent
 *                when it is kept off the box (tls init --ca-key-out FILE;
 *                tls renew --ca-key FILE brings it for a renewal)
 *   ca.pem       the box CA's self-signed certificate, mode 0644: the file
 *                devices are given to trust (the box serves it at
 *                GET /ca.pem); valid CERT_CA_DAYS days; path length 0 and
 *                critical name constraints (cert_nc.h): it signs for the
 *                box's names and private names and addresses only
 *   server.key   the HTTPS server's private key (ECDSA P-256), mode 0600
 *   server.pem   the HTTPS server's certificate, signed by the CA for the
 *                box's DNS names and IP addresses; valid CERT_SERVER_DAYS
 *                days, the most that browsers, iOS and Android accept
 *   lock         an empty file, held with flock(2) while init runs
 *
 * Invariants:
 *  - every file is written whole or not at all (fsio_put: temp file, fsync,
 *    rename, fsync of the folder); a key is mode 0600 from its creation on,
 *    and no key's bytes reach a log line, a message or a file but its own;
 *    buffers that held one are wiped;
 *  - an existing CA is replaced only when asked (devices already trust it):
 *    init makes one when ca.pem and ca.key are both missing or new_ca is
 *    set, and makes ca.pem again from ca.key when only the certificate is
 *    missing; a CA key is never written over an existing file;
 *  - no certificate is signed for a name outside the CA's constraints;
 *  - a server certificate is replaced only when asked (renew), by a new key
 *    and certificate under the same CA;
 *  - a key file is read only when no group or other permission bit is set;
 *  - signatures are ECDSA with SHA-256; serial numbers are 16 random bytes;
 *    every certificate is valid from an hour before it was made (clock
 *    skew) for exactly its number of days.
 */
#ifndef SD_CERT_H
#define SD_CERT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "result.h"

#define CERT_CA_DAYS 3650		/* the box CA: ten years */
#define CERT_SERVER_DAYS 398		/* a server certificate: the CA/Browser limit */
#define CERT_RENEW_WARN_DAYS 30		/* `run` warns this long before server.pem expires */
#define CERT_SKEW_S 3600		/* notBefore is this far before the making */

#define CERT_NAMES_MAX 16		/* DNS names, and IP addresses, per certificate */
#define CERT_DNS_MAX 254		/* a DNS name (253 characters) and its NUL */
#define CERT_IP_MAX 46			/* an address as text (INET6_ADDRSTRLEN) */
#define CERT_FPR_MAX 96			/* "AB:CD:...": 32 bytes, 95 characters, NUL */
#define CERT_SERIAL_MAX 72		/* a serial in hex, up to 20 bytes, and a NUL */
#define CERT_DN_MAX 256			/* a subject or issuer as text */

/* ======================== where the files are =========================== */

struct cert_paths {
	char dir[PATH_MAX];		/* <state dir>/tls */
	char ca_cert[PATH_MAX];		/* .../ca.pem */
	char ca_key[PATH_MAX];		/* .../ca.key */
	char server_cert[PATH_MAX];	/* .../server.pem */
	char server_key[PATH_MAX];	/* .../server.key */
	char lock[PATH_MAX];		/* .../lock */
};

/*
 * cert_paths: the TLS files of the box whose state folder is state_dir (the
 * resolved folder, as statedir_path gives it; not NULL).  Makes
 * nothing.  [out] *out.  SD_INVALID when a path would pass PATH_MAX.
 */
enum sd_result cert_paths(const char *state_dir, struct cert_paths *out);

/* ======================== names ========================================= */

/* The names a server certificate is for: its subjectAltName entries. */
struct cert_names {
	int n_dns;			/* dns[0..n_dns) */
	int n_ip;			/* ip[0..n_ip) */
	char dns[CERT_NAMES_MAX][CERT_DNS_MAX];	/* lower case, no trailing dot */
	char ip[CERT_NAMES_MAX][CERT_IP_MAX];	/* inet_ntop's form ("::1") */
};

/*
 * cert_names_add_dns: add a DNS name after checking it: RFC 1123 labels
 * (letters, digits, '-' inside), each 1..63 characters, 253 in all, the last
 * label not all digits (an address belongs in cert_names_add_ip).  Stored
 * in lower case; a name already there is not added again.  SD_INVALID naming
 * the name and what is wrong with it; n is then unchanged.
 */
enum sd_result cert_names_add_dns(struct cert_names *n, const char *name);

/* cert_names_add_ip: add an IPv4 or IPv6 address (inet_pton), stored in
 * inet_ntop's form; a duplicate is not added again.  SD_INVALID otherwise. */
enum sd_result cert_names_add_ip(struct cert_names *n, const char *addr);

/*
 * cert_names_default: the names of this machine: its host name (when it is
 * a valid DNS name), "<host name>.local" (mDNS), "localhost", 127.0.0.1 and
 * ::1.  [out] *n (cleared first).
 */
enum sd_result cert_names_default(struct cert_names *n);

/* cert_names_equal: 1 when a and b hold the same names in the same order. */
int cert_names_equal(const struct cert_names *a, const struct cert_names *b);

/* ======================== reading a certificate ========================= */

struct cert_info {
	int64_t not_before_ms;		/* validity, ms since the epoch (UTC) */
	int64_t not_after_ms;
	char fingerprint[CERT_FPR_MAX];	/* SHA-256 of the DER, "AB:CD:..." as
					 * `openssl x509 -fingerprint -sha256` */
	char serial[CERT_SERIAL_MAX];	/* hex, upper case, as openssl prints it */
	char subject[CERT_DN_MAX];	/* "CN=..., O=..." */
	char issuer[CERT_DN_MAX];
	int is_ca;			/* basicConstraints CA:TRUE */
	int name_constrained;		/* a CA that carries nameConstraints (cert_nc.h) */
	int server_auth;		/* extendedKeyUsage holds serverAuth */
	struct cert_names names;	/* its subjectAltName: DNS names, addresses */
	int names_more;			/* entries past CERT_NAMES_MAX (of either
					 * kind), not listed in names */
};

/*
 * cert_info_load: read the first certificate of the PEM (or DER) file at
 * path.  [out] *info.  SD_NOT_FOUND when there is no file, SD_IO when it
 * cannot be read, SD_INVALID when it holds no certificate mbedTLS can parse;
 * each message names the path.
 */
enum sd_result cert_info_load(const char *path, struct cert_info *info);

/*
 * cert_days_left: whole days from now_ms until the certificate at path
 * expires (rounded down; negative once it has expired).  [out] *days.
 * Errors as cert_info_load.  `run` warns when this is below
 * CERT_RENEW_WARN_DAYS for server.pem.
 */
enum sd_result cert_days_left(const char *path, int64_t now_ms, int64_t *days);

/* ======================== making certificates =========================== */


/*
 * cert_server_make: a new P-256 key into key_path (0600) and a certificate
 * for it into cert_path (0644), signed by the CA at ca_cert/ca_key: subject
 * "CN=<first name>, O=Stagedoor Box", subjectAltName with every dNSName and
 * iPAddress of names (at least one), keyUsage digitalSignature (critical),
 * extendedKeyUsage serverAuth, basicConstraints CA:FALSE, subject and
 * authority key identifiers, valid `days` days from now_ms - CERT_SKEW_S
 * (0: CERT_SERVER_DAYS).  SD_INVALID naming a name outside the CA's
 * constraints.  The key is written first, then the certificate:
 * a crash between leaves a pair that cert_init --renew repairs.
 */
enum sd_result cert_server_make(const char *ca_cert, const char *ca_key,
				const struct cert_names *names, int days, const char *cert_path,
				const char *key_path, int64_t now_ms);

/*
 * cert_key_check: the key file at key_path is private (mode without group
 * or other bits), parses, and is the key of the certificate at cert_path.
 * SD_NOT_FOUND (no file), SD_IO, SD_INVALID, naming the file.
 */
enum sd_result cert_key_check(const char *cert_path, const char *key_path);

/* What `tls init` and `tls renew` ask for. */
struct cert_init_opts {
	const struct cert_names *names;	/* NULL or empty: the kept certificate's,
					 * else cert_names_default's */
	int renew;			/* a new server certificate under the same CA */
	int new_ca;			/* a new CA (and server certificate) in place of
					 * the old one, which devices must stop trusting */
	const char *ca_key;		/* the CA's key kept off the box; NULL: tls/ca.key */
	const char *ca_key_out;		/* a new CA's key goes here, not into tls/; a kept
					 * CA's key in tls/ is moved here.  Never written
					 * over a file. */
};

/* What cert_init found and did. */
struct cert_init_report {
	int ca_made;			/* a new CA: key and certificate */
	int ca_replaced;		/* ... in place of an old one (new_ca) */
	int ca_remade;			/* ca.pem made again from the existing ca.key */
	int ca_key_moved;		/* ca.key moved off the box to ca_key_out */
	char ca_key_path[PATH_MAX];	/* where the CA's key is now */
	int server_made;		/* server.pem and server.key were missing: made */
	int server_renewed;		/* renew: a new server key and certificate */
	int names_ignored;		/* names were given but server.pem was kept */
};

/*
 * cert_init: what `stagedoor tls init` and `tls renew` do in
 * <state_dir>/tls, under an exclusive flock on its lock file: the folder
 * (0700), the CA when missing or asked for (module invariants; its name
 * constraints for o->names), the CA's key moved off the box when asked,
 * and the server certificate when it is missing, o->renew is set or the CA
 * is new.  A kept server certificate is never changed, whatever names says
 * (rep->names_ignored), but it must be sound: its key private and its own,
 * and signed by ca.pem.  [out] *rep.  SD_NOT_FOUND when the CA's key is
 * not there and a certificate must be signed; SD_INVALID when a file is not
 * what it should be (the message names it and, for server.pem, says
 * renew), or a name is outside the CA's constraints.
 */
enum sd_result cert_init(const char *state_dir, const struct cert_init_opts *o, int64_t now_ms,
			 struct cert_init_report *rep);

/* ======================== a TLS client (cert_conn.c) ===================== */

/* What every connection of a client shares: the trusted CA, the random
 * generator and the settings (TLS 1.2 or later, peer verified). */
struct cert_client;

/* One TLS connection over a connected socket. */
struct cert_conn;

/*
 * cert_client_new: a client that trusts the certificates in the PEM file
 * ca_path and nothing else.  [out] *out (cert_client_free).  SD_NOT_FOUND,
 * SD_IO, SD_INVALID (not a certificate), SD_NOMEM.  Thread-safe once made:
 * connections on several threads may share it.
 */
enum sd_result cert_client_new(const char *ca_path, struct cert_client **out);

/* cert_client_free: free c once its connections are closed; accepts NULL. */
void cert_client_free(struct cert_client *c);

/*
 * cert_conn_open: the TLS handshake as the client on the connected socket
 * fd (which stays the caller's to close, after cert_conn_close), verifying
 * that the server's certificate chains to c's CA and names host (a DNS
 * name, sent as SNI: mbedTLS 2.28 matches no iPAddress entry, so a client
 * of 127.0.0.1 asks for "localhost").  Key exchange X25519, then P-256.  Reads and writes block, and a socket timeout
 * (SO_RCVTIMEO / SO_SNDTIMEO) makes them fail as SD_TIMEOUT.  [out] *out.
 * SD_IO with mbedTLS's reason (and, for a failed verification, why the
 * certificate was refused).
 */
enum sd_result cert_conn_open(struct cert_client *c, int fd, const char *host,
			      struct cert_conn **out);

/*
 * cert_conn_write: send all len bytes.  cert_conn_read: up to size bytes
 * into buf, at least one; [out] *got, 0 when the server closed the
 * connection (close_notify or EOF).  SD_IO or SD_TIMEOUT with the reason.
 */
enum sd_result cert_conn_write(struct cert_conn *t, const void *data, size_t len);
enum sd_result cert_conn_read(struct cert_conn *t, void *buf, size_t size, size_t *got);

/* cert_conn_close: send close_notify (best effort) and free t; the socket
 * stays open.  Accepts NULL. */
void cert_conn_close(struct cert_conn *t);

/* cert_conn_version: the protocol the handshake settled on ("TLSv1.2"). */
const char *cert_conn_version(const struct cert_conn *t);

#endif
