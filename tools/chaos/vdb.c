/*
 * vdb.c: the verdict's read-only view of the box's database, SQLite or
 * PostgreSQL (chaos.h), with neither the appliance's code nor its SQL.
 *
 * A row reaches the caller as text, one string a column (NULL for SQL
 * NULL), which is all the checks need.  The SQLite file is opened
 * read-only; the PostgreSQL session is made read-only.
 */
#include "chaos.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct vdb {
	sqlite3 *lite;
	PGconn *pg;
};

int vdb_is_pg(const char *target)
{
	return strncmp(target, "postgresql://", 13) == 0 || strncmp(target, "postgres://", 11) == 0;
}

int vdb_open(const char *target, struct vdb **out, char *err, size_t size)
{
	struct vdb *d = calloc(1, sizeof *d);

	*out = NULL;
	if (!d) {
		snprintf(err, size, "out of memory");
		return -1;
	}
	if (vdb_is_pg(target)) {
		PGresult *res;

		d->pg = PQconnectdb(target);
		if (!d->pg || PQstatus(d->pg) != CONNECTION_OK) {
			snprintf(err, size, "cannot connect: %s",
				 d->pg ? PQerrorMessage(d->pg) : "out of memory");
			vdb_close(d);
			return -1;
		}
		res = PQexec(d->pg, "SET default_transaction_read_only = on");
		PQclear(res);
	} else if (sqlite3_open_v2(target, &d->lite, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		snprintf(err, size, "cannot open %s read-only: %s", target,
			 d->lite ? sqlite3_errmsg(d->lite) : "out of memory");
		vdb_close(d);
		return -1;
	} else {
		sqlite3_busy_timeout(d->lite, 10000);
	}
	*out = d;
	return 0;
}

void vdb_close(struct vdb *d)
{
	if (!d)
		return;
	if (d->pg)
		PQfinish(d->pg);
	sqlite3_close(d->lite);
	free(d);
}

int vdb_pg(const struct vdb *d)
{
	return d->pg != NULL;
}

static int each_pg(struct vdb *d, const char *sql, const char *param, vdb_row_fn fn, void *arg,
		   char *err, size_t size)
{
	const char *vals[VDB_COLS_MAX];
	PGresult *res = PQexecParams(d->pg, sql, param ? 1 : 0, NULL, &param, NULL, NULL, 0);
	int i, c, n, rc = 0;

	if (PQresultStatus(res) != PGRES_TUPLES_OK) {
		snprintf(err, size, "%s", PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	n = PQnfields(res) < VDB_COLS_MAX ? PQnfields(res) : VDB_COLS_MAX;
	for (i = 0; i < PQntuples(res) && rc == 0; i++) {
		for (c = 0; c < n; c++)
			vals[c] = PQgetisnull(res, i, c) ? NULL : PQgetvalue(res, i, c);
		rc = fn(arg, n, vals);
	}
	PQclear(res);
	return 0;
}

static int each_lite(struct vdb *d, const char *sql, const char *param, vdb_row_fn fn,
		     void *arg, char *err, size_t size)
{
	const char *vals[VDB_COLS_MAX];
	sqlite3_stmt *st = NULL;
	int c, n, rc = 0, s;

	if (sqlite3_prepare_v2(d->lite, sql, -1, &st, NULL) != SQLITE_OK) {
		snprintf(err, size, "%s", sqlite3_errmsg(d->lite));
		return -1;
	}
	if (param)
		sqlite3_bind_text(st, 1, param, -1, SQLITE_TRANSIENT);
	n = sqlite3_column_count(st) < VDB_COLS_MAX ? sqlite3_column_count(st) : VDB_COLS_MAX;
	while (rc == 0 && (s = sqlite3_step(st)) == SQLITE_ROW) {
		for (c = 0; c < n; c++)
			vals[c] = (const char *)sqlite3_column_text(st, c);
		rc = fn(arg, n, vals);
	}
	if (rc == 0 && s != SQLITE_DONE) {
		snprintf(err, size, "%s", sqlite3_errmsg(d->lite));
		sqlite3_finalize(st);
		return -1;
	}
	sqlite3_finalize(st);
	return 0;
}

int vdb_each(struct vdb *d, const char *sql, const char *param, vdb_row_fn fn, void *arg,
	     char *err, size_t size)
{
	return d->pg ? each_pg(d, sql, param, fn, arg, err, size)
		     : each_lite(d, sql, param, fn, arg, err, size);
}

int vdb_blob_to_file(struct vdb *d, const char *key, const char *path, char *err, size_t size)
{
	const char *sql = "SELECT data FROM blobs WHERE key = $1";
	PGresult *res;
	unsigned char *bytes = NULL;
	size_t len = 0;
	FILE *f;
	int rc = -1;

	if (!d->pg) {
		snprintf(err, size, "the PDFs of an SQLite box are files");
		return -1;
	}
	res = PQexecParams(d->pg, sql, 1, NULL, &key, NULL, NULL, 0);
	if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
		snprintf(err, size, "blobs: no row for %s %s", key, PQresultErrorMessage(res));
		PQclear(res);
		return -1;
	}
	bytes = PQunescapeBytea((const unsigned char *)PQgetvalue(res, 0, 0), &len);
	PQclear(res);
	if (!bytes || len == 0) {
		snprintf(err, size, "blobs: %s is empty", key);
	} else if (!(f = fopen(path, "w"))) {
		snprintf(err, size, "cannot write %s", path);
	} else {
		rc = fwrite(bytes, 1, len, f) == len ? 0 : -1;
		if (fclose(f) != 0 || rc != 0) {
			snprintf(err, size, "cannot write %s", path);
			rc = -1;
		}
	}
	if (bytes)
		PQfreemem(bytes);
	return rc;
}

struct one_text {
	char *out;
	size_t size;
};

static int one_text(void *arg, int ncols, const char *const *vals)
{
	struct one_text *o = arg;

	snprintf(o->out, o->size, "%s", ncols > 0 && vals[0] ? vals[0] : "");
	return 1;
}

int vdb_one(struct vdb *d, const char *sql, char *out, size_t size)
{
	struct one_text o = { out, size };
	char err[200];

	out[0] = '\0';
	return vdb_each(d, sql, NULL, one_text, &o, err, sizeof err);
}
