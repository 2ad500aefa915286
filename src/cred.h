/*
 * cred.h: secrets in files: the box's own (mail_password_file, http_tls_key)
 * and systemd's credentials (LoadCredential= in dist/stagedoor.service), which
 * the service manager puts in $CREDENTIALS_DIRECTORY, a folder on a memory
 * file system that only the service's user may read.
 *
 * The two come with different modes.  A file of the box's own must be the
 * box user's alone: no group or other bit (0600, 0400).  A credential is
 * 0400, owned by root, and systemd gives the service's user read access by
 * an ACL entry, whose mask shows as the group bits: 0440.  So inside
 * $CREDENTIALS_DIRECTORY a file owned by root or by this user, with no bit
 * for others and no group write bit, is accepted; anything else is refused.
 */
#ifndef SD_CRED_H
#define SD_CRED_H

#include <stddef.h>
#include <sys/stat.h>

#include "result.h"

/* cred_find: $CREDENTIALS_DIRECTORY/name when the variable is set and that
 * file exists.  [out] path (size bytes).  1: found; 0: not. */
int cred_find(const char *name, char *path, size_t size);

/* cred_tls_key: a listener's TLS key file: key as the settings give it,
 * or, when they give a certificate (cert) and no key, systemd's credential
 * name (LoadCredential=name) when there is one, its path in buf (size
 * bytes).  The key's path, or key itself (NULL or empty) for none. */
const char *cred_tls_key(const char *cert, const char *key, const char *name, char *buf,
			 size_t size);

/* cred_mode_ok: may the secret file at path, whose fstat is st, be used
 * (the rules above)?  1: yes; 0: others may read or change it.  The caller
 * says why in its own words. */
int cred_mode_ok(const char *path, const struct stat *st);

/*
 * cred_read: the secret in the file at path, a regular file no group or
 * other may read (cred_mode_ok), of at most max bytes in at most lines_max
 * lines (a final LF or CRLF is dropped; no empty line, no CR).  [out] *out,
 * NUL-terminated: the caller wipes (explicit_bzero) and frees it.  what
 * ("mail password file") and the path may be named in messages; the
 * content never is.
 */
enum sd_result cred_read(const char *path, const char *what, size_t max, int lines_max,
			 char **out);

#endif
