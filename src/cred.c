/*
 * cred.c: secrets in files and systemd's credentials (cred.h has the rules).
 */
#define _GNU_SOURCE
#include "cred.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* cred_dir: $CREDENTIALS_DIRECTORY, or NULL when unset or empty. */
static const char *cred_dir(void)
{
	const char *d = getenv("CREDENTIALS_DIRECTORY");

	return d && *d ? d : NULL;
}

int cred_find(const char *name, char *path, size_t size)
{
	const char *d = cred_dir();
	struct stat st;
	int n;

	if (!d)
		return 0;
	n = snprintf(path, size, "%s/%s", d, name);
	if (n < 0 || (size_t)n >= size)
		return 0;
	return stat(path, &st) == 0;
}

/* inside: path names a file directly in $CREDENTIALS_DIRECTORY. */
static int inside(const char *path)
{
	const char *d = cred_dir();
	size_t n;

	if (!d)
		return 0;
	n = strlen(d);
	while (n > 1 && d[n - 1] == '/')
		n--;
	return strncmp(path, d, n) == 0 && path[n] == '/' && path[n + 1] &&
	       !strchr(path + n + 1, '/');
}

int cred_mode_ok(const char *path, const struct stat *st)
{
	if (!inside(path))
		return (st->st_mode & 077) == 0;
	if (st->st_uid != 0 && st->st_uid != geteuid())
		return 0;
	return (st->st_mode & 027) == 0;
}
