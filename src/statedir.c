/*
 * statedir.c: the state folder and the box's files in it (statedir.h).
 */
#define _GNU_SOURCE
#include "statedir.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "code.h"
#include "db.h"
#include "fsio.h"

static void db_dir(const char *db_path, char *buf, size_t size)
{
	const char *slash = strrchr(db_path, '/');

	if (!slash)
		snprintf(buf, size, ".");
	else if (slash == db_path)
		snprintf(buf, size, "/");
	else
		snprintf(buf, size, "%.*s", (int)(slash - db_path), db_path);
}

enum sd_result statedir_path(const char *db_path, const char *state_dir, char *buf,
				 size_t size)
{
	if ((!state_dir || !*state_dir) && db_target_is_pg(db_path)) {
		snprintf(buf, size, ".");
		return err_set(SD_INVALID, "state_dir must be given with a PostgreSQL database: "
			       "the folder for this box's own files (ticket key, maildir, "
			       "logs)");
	}
	if (!state_dir || !*state_dir) {
		db_dir(db_path, buf, size);
		return SD_OK;
	}
	if ((size_t)snprintf(buf, size, "%s", state_dir) >= size)
		return err_set(SD_INVALID, "state_dir: the path is too long");
	return SD_OK;
}

enum sd_result statedir_init(const char *db_path, const char *state_dir)
{
	char path[PATH_MAX];
	enum sd_result r;

	if (state_dir && *state_dir && (r = fsio_mkdirs(state_dir, 0)) != SD_OK)
		return r;
	if ((r = code_key_path(db_path, state_dir, path, sizeof path)) != SD_OK)
		return r;
	return code_key_ensure(path, NULL);
}

enum sd_result statedir_blobs_open(const char *db_path, const char *state_dir,
				  struct blob_store **out)
{
	char dir[PATH_MAX], path[PATH_MAX + 8];
	enum sd_result r;

	*out = NULL;
	if (blob_where_db(db_path))
		return blob_open_db(db_path, out);
	if ((r = statedir_path(db_path, state_dir, dir, sizeof dir)) != SD_OK)
		return r;
	snprintf(path, sizeof path, "%s/blobs", dir);
	return blob_open(path, out);
}

void statedir_mail_url(const char *db_path, const char *state_dir, char *buf, size_t size)
{
	char dir[PATH_MAX];

	if (statedir_path(db_path, state_dir, dir, sizeof dir) != SD_OK)
		db_dir(db_path, dir, sizeof dir);
	snprintf(buf, size, "maildir:%s/maildir", dir);
}
