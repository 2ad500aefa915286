/*
 * bench_scratch.c: a scratch schema on a PostgreSQL server for a
 * benchmark's fresh box (`--db postgresql://...`), made and dropped on a
 * connection of its own.  The benchmark program's one user of libpq; the
 * box itself reaches PostgreSQL only through db_pg.c.
 */
#include <libpq-fe.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "db.h"
#include "text.h"

/* quiet: the cascade's list of dropped tables is not the bench's output */
static void quiet(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* scratch_admin: one command on a connection of its own to uri */
static enum sd_result scratch_admin(const char *uri, const char *sql)
{
	PGconn *c = PQconnectdb(uri);
	PGresult *res;
	char where[300];
	enum sd_result r = SD_OK;

	if (!c || PQstatus(c) != CONNECTION_OK) {
		text_redact_url(uri, where, sizeof where);
		r = err_set(SD_IO, "cannot connect to %s: %s", where,
			    c ? PQerrorMessage(c) : "out of memory");
		PQfinish(c);
		return r;
	}
	PQsetNoticeProcessor(c, quiet, NULL);
	res = PQexec(c, sql);
	if (PQresultStatus(res) != PGRES_COMMAND_OK)
		r = err_set(SD_DB, "%s", PQerrorMessage(c));
	PQclear(res);
	PQfinish(c);
	return r;
}

enum sd_result bench_scratch_make(const char *uri, char *out, size_t size, char *name,
				  size_t nsize)
{
	static unsigned n;
	char sql[200];
	enum sd_result r;

	if (!db_target_is_pg(uri))
		return err_set(SD_INVALID, "a scratch schema needs a postgresql:// URI");
	snprintf(name, nsize, "stagedoor_scratch_%ld_%u", (long)getpid(), ++n);
	snprintf(sql, sizeof sql, "CREATE SCHEMA %s", name);
	if ((r = scratch_admin(uri, sql)) != SD_OK)
		return r;
	if ((size_t)snprintf(out, size, "%s%coptions=-csearch_path%%3D%s", uri,
			     strchr(uri, '?') ? '&' : '?', name) >= size) {
		bench_scratch_drop(uri, name);
		return err_set(SD_INVALID, "the URI is too long");
	}
	return SD_OK;
}

enum sd_result bench_scratch_drop(const char *uri, const char *name)
{
	char sql[200];
	size_t i;

	/* only a name bench_scratch_make made */
	if (strncmp(name, "stagedoor_scratch_", 18) != 0)
		return err_set(SD_INVALID, "not a scratch schema");
	for (i = 18; name[i]; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || name[i] == '_'))
			return err_set(SD_INVALID, "not a scratch schema");
	snprintf(sql, sizeof sql, "DROP SCHEMA %s CASCADE", name);
	return scratch_admin(uri, sql);
}
