/*
 * cred.c: secrets in files and systemd's credentials (cred.h has the rules).
 */
#define _GNU_SOURCE
#include "cred.h"

#include <errno.h>
#include <fcntl.h>
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

const char *cred_tls_key(const char *cert, const char *key, const char *name, char *buf,
			 size_t size)
{
	if (!cert || !*cert || (key && *key))
		return key;
	return cred_find(name, buf, size) ? buf : key;
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

/* read_all: up to size - 1 bytes of fd into buf.  [out] *got. */
static enum sd_result read_all(int fd, const char *what, const char *path, char *buf,
			       size_t size, size_t *got)
{
	ssize_t n;

	*got = 0;
	while (*got < size - 1) {
		n = read(fd, buf + *got, size - 1 - *got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_set(SD_IO, "%s %s: %s", what, path, strerror(errno));
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	return SD_OK;
}

/* lines_ok: buf holds at most lines_max lines, none empty, each without CR */
static int lines_ok(const char *buf, int lines_max)
{
	const char *p = buf;
	int lines = 1;

	if (strchr(buf, '\r'))
		return 0;
	for (; (p = strchr(p, '\n')); p++, lines++)
		if (p == buf || p[-1] == '\n' || !p[1])
			return 0;
	return lines <= lines_max;
}

enum sd_result cred_read(const char *path, const char *what, size_t max, int lines_max,
			 char **out)
{
	char *buf;
	struct stat st;
	size_t got = 0;
	enum sd_result r = SD_OK;
	int fd;

	*out = NULL;
	if (!(buf = calloc(1, max + 2)))
		return err_set(SD_NOMEM, "out of memory reading %s", what);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		free(buf);
		return err_set(SD_INVALID, "%s %s: %s", what, path, strerror(errno));
	}
	if (fstat(fd, &st) != 0)
		r = err_set(SD_IO, "%s %s: %s", what, path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		r = err_set(SD_INVALID, "%s %s is not a regular file", what, path);
	else if (!cred_mode_ok(path, &st))
		r = err_set(SD_INVALID, "%s %s has mode %04o: others may read it; refused (chmod "
			    "600 it)", what, path, (unsigned)(st.st_mode & 07777));
	else
		r = read_all(fd, what, path, buf, max + 2, &got);
	close(fd);
	if (r == SD_OK && got > max)
		r = err_set(SD_INVALID, "%s %s is longer than %zu bytes", what, path, max);
	if (r == SD_OK) {
		if (got > 0 && buf[got - 1] == '\n')
			got--;
		if (got > 0 && buf[got - 1] == '\r')
			got--;
		buf[got] = '\0';
		if (got == 0)
			r = err_set(SD_INVALID, "%s %s is empty", what, path);
		else if (strlen(buf) != got || !lines_ok(buf, lines_max))
			r = err_set(SD_INVALID, "%s %s must hold %s", what, path,
				    lines_max == 1 ? "one line" : "one secret a line, no empty line");
	}
	if (r == SD_OK)
		*out = buf;
	else {
		explicit_bzero(buf, max + 2);
		free(buf);
	}
	return r;
}
