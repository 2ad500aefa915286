/*
 * boxmove.c: copy a box from SQLite to PostgreSQL (see boxmove.h).
 *
 * The tables are copied parents first (events before orders before
 * tickets), column by column as the target names them, every value as
 * text and cast on the target to its column's type (bytea as bytes), so
 * one INSERT per table serves every row whatever SQLite's dynamic types
 * held.  event_totals is not copied: the target's triggers build it from
 * the rows as they arrive, and it is then compared with the source's, row
 * by row, which checks both.
 *
 * SQL here names tables from the fixed list below, never from input; every
 * value is a bound parameter.
 */
#define _GNU_SOURCE
#include "boxmove.h"

#include <stdlib.h>
#include <string.h>

#include "blob.h"
#include "check.h"
#include "clock.h"
#include "db.h"
#include "statedir.h"
#include "token.h"

/* parents before children; event_totals is the target triggers' own;
 * identity_marks the target's migration made, for an empty box: the
 * source's marks replace them, since the rows keep their ids */
static const char *const tables[BOXMOVE_TABLES] = {
	"events", "orders", "tickets", "email_sends", "processed_jobs", "sales_counters",
	"stream", "done_jobs", "dead_jobs", "done_totals", "outbox", "api_keys", "done_times",
	"blobs", "api_tokens", "order_changes", "scans", "scan_minutes", "queue_history",
	"holds", "refunds", "effects", "event_runs", "event_run_orders",
	"event_totals", "identity_marks",
};
#define DERIVED "event_totals"
#define MARKS "identity_marks"
static const char SQL_MARKS_CLEAR[] = "DELETE FROM identity_marks";

#define COLS_MAX 32
#define SQL_MAX 4096

/* One table's statements, alive as long as the connections (db_stmt's
 * cache is keyed by the text's address). */
struct table_sql {
	char count[128];
	char select[SQL_MAX];		/* on the source, the target's columns */
	char insert[SQL_MAX];		/* on the target, each value cast */
	char setval[256];		/* "" when the table has no identity */
	int ncols;
	char is_blob[COLS_MAX];
};

struct move {
	struct db *src, *dst;
	struct table_sql sql[BOXMOVE_TABLES];
	FILE *progress;
	struct boxmove_report *rep;
};

static const char SQL_COLUMNS[] =
	"SELECT column_name, data_type, is_identity FROM information_schema.columns "
	"WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position";

/* append: printf onto buf, SD_INVALID when it does not fit */
static enum sd_result append(char *buf, size_t size, const char *fmt, const char *a,
			     const char *b)
{
	size_t n = strlen(buf);
	int k = snprintf(buf + n, size - n, fmt, a, b);

	if (k < 0 || (size_t)k >= size - n)
		return err_set(SD_INVALID, "a table with too many columns to copy");
	return SD_OK;
}

/* The statements of table i, from the target's columns. */
static enum sd_result table_prepare(struct move *m, int i)
{
	struct table_sql *t = &m->sql[i];
	struct db_stmt *st;
	enum sd_result r;
	char num[16];

	snprintf(t->count, sizeof t->count, "SELECT count(*) FROM %s", tables[i]);
	snprintf(t->select, sizeof t->select, "SELECT ");
	snprintf(t->insert, sizeof t->insert, "INSERT INTO %s (", tables[i]);
	if (!(st = db_stmt(m->dst, SQL_COLUMNS)))
		return SD_DB;
	db_bind_text(st, 1, tables[i]);
	while (db_next(st, &r)) {
		const char *col = db_col_text(st, 0), *type = db_col_text(st, 1);
		const char *sep = t->ncols ? ", " : "";

		if (t->ncols == COLS_MAX) {
			r = err_set(SD_INVALID, "table %s has too many columns", tables[i]);
			break;
		}
		t->is_blob[t->ncols] = strcmp(type, "bytea") == 0;
		if (strcmp(db_col_text(st, 2), "YES") == 0)
			snprintf(t->setval, sizeof t->setval,
				 "SELECT setval(pg_get_serial_sequence('%s', '%s'), "
				 "coalesce((SELECT max(%s) FROM %s), 0) + 1, false)", tables[i], col,
				 col, tables[i]);
		if ((r = append(t->select, sizeof t->select, "%s%s", sep, col)) != SD_OK ||
		    (r = append(t->insert, sizeof t->insert, "%s%s", sep, col)) != SD_OK)
			break;
		t->ncols++;
	}
	db_reset(st);
	if (r != SD_OK)
		return r;
	if (t->ncols == 0)
		return err_set(SD_SCHEMA, "the target has no table %s", tables[i]);
	if ((r = append(t->select, sizeof t->select, " FROM %s%s", tables[i], "")) != SD_OK ||
	    (r = append(t->insert, sizeof t->insert, ") VALUES (%s%s", "", "")) != SD_OK)
		return r;
	/* the types again, in order, for the casts */
	if (!(st = db_stmt(m->dst, SQL_COLUMNS)))
		return SD_DB;
	db_bind_text(st, 1, tables[i]);
	for (int c = 0; db_next(st, &r); c++) {
		snprintf(num, sizeof num, "%d", c + 1);
		if ((r = append(t->insert, sizeof t->insert, c ? ", CAST(?%s AS %s)" :
				"CAST(?%s AS %s)", num, db_col_text(st, 1))) != SD_OK)
			break;
	}
	db_reset(st);
	if (r != SD_OK)
		return r;
	return append(t->insert, sizeof t->insert, ")%s%s", "", "");
}

static enum sd_result count_rows(struct db *db, const char *sql, int64_t *n)
{
	struct db_stmt *st = db_stmt(db, sql);
	enum sd_result r;

	*n = 0;
	if (!st)
		return SD_DB;
	if (db_next(st, &r))
		*n = db_col_int(st, 0);
	db_reset(st);
	return r;
}

/* Every row of table i from the source into the target. */
static enum sd_result table_copy(struct move *m, int i, int64_t *copied)
{
	struct table_sql *t = &m->sql[i];
	struct db_stmt *in, *out;
	enum sd_result r;
	int row = 0, c;

	*copied = 0;
	if (!(in = db_stmt(m->src, t->select)))
		return err_set(SD_SCHEMA, "the source's table %s lacks a column of the target's",
			       tables[i]);
	if (!(out = db_stmt(m->dst, t->insert))) {
		db_reset(in);
		return SD_DB;
	}
	while ((r = db_step(in, &row)) == SD_OK && row) {
		for (c = 0; c < t->ncols; c++) {
			size_t len = 0;
			const void *p;

			if (db_col_is_null(in, c)) {
				db_bind_null(out, c + 1);
			} else if (t->is_blob[c]) {
				p = db_col_blob(in, c, &len);
				db_bind_blob(out, c + 1, p, len);
			} else {
				db_bind_text(out, c + 1, db_col_text(in, c));
			}
		}
		if ((r = db_run(out)) != SD_OK)
			break;
		++*copied;
	}
	db_reset(in);
	db_reset(out);
	return r;
}

static const char SQL_PDF_KEYS[] =
	"SELECT DISTINCT pdf_key FROM tickets WHERE pdf_key IS NOT NULL ORDER BY pdf_key";
static const char SQL_BLOB_HAS[] = "SELECT count(*) FROM blobs WHERE key = ?1";
static const char SQL_BLOB_ADD[] =
	"INSERT INTO blobs (key, data, bytes, created_at) VALUES (?1, ?2, ?3, ?4)";

/* The PDFs a file store holds (blob_store = files: the source's default). */
static enum sd_result pdfs_copy(struct move *m, const char *from, const char *from_state)
{
	struct blob_store *bs = NULL;
	struct db_stmt *keys, *has, *add;
	enum sd_result r;
	int row = 0;

	if (blob_where_db(from))
		return SD_OK;	/* the blobs table held them */
	if ((r = statedir_blobs_open(from, from_state, &bs)) != SD_OK)
		return r;
	if (!(keys = db_stmt(m->src, SQL_PDF_KEYS))) {
		blob_close(bs);
		return SD_DB;
	}
	while ((r = db_step(keys, &row)) == SD_OK && row) {
		const char *key = db_col_text(keys, 0);
		unsigned char *pdf = NULL;
		size_t len = 0;
		int got = 0;

		if (!(has = db_stmt(m->dst, SQL_BLOB_HAS))) {
			r = SD_DB;
			break;
		}
		db_bind_text(has, 1, key);
		r = db_step(has, &got);
		got = r == SD_OK && got && db_col_int(has, 0) > 0;
		db_reset(has);
		if (r != SD_OK)
			break;
		if (got)
			continue;
		if ((r = blob_get(bs, key, &pdf, &len)) == SD_NOT_FOUND) {
			if (m->progress)
				fprintf(m->progress, "  warning: %s is not in the state folder's "
					"blobs/ (check will name its order)\n", key);
			r = SD_OK;
			continue;
		}
		if (r != SD_OK)
			break;
		if (!(add = db_stmt(m->dst, SQL_BLOB_ADD))) {
			free(pdf);
			r = SD_DB;
			break;
		}
		db_bind_text(add, 1, key);
		db_bind_blob(add, 2, pdf, len);
		db_bind_int(add, 3, (int64_t)len);
		db_bind_int(add, 4, clock_now_ms());
		r = db_run(add);
		free(pdf);
		if (r != SD_OK)
			break;
		m->rep->pdfs_from_files++;
	}
	db_reset(keys);
	blob_close(bs);
	return r;
}

/* The target's event_totals, as its triggers built them, against the
 * source's, row by row and column by column. */
static enum sd_result derived_compare(struct move *m, int i)
{
	struct table_sql *t = &m->sql[i];
	static char ordered[SQL_MAX + sizeof " ORDER BY event_id"];
	struct db_stmt *a, *b;
	enum sd_result r;
	int ra = 0, rb = 0, c;

	snprintf(ordered, sizeof ordered, "%s ORDER BY event_id", t->select);
	if (!(a = db_stmt(m->src, ordered)) || !(b = db_stmt(m->dst, ordered)))
		return SD_DB;
	for (;;) {
		if ((r = db_step(a, &ra)) != SD_OK || (r = db_step(b, &rb)) != SD_OK)
			break;
		if (ra != rb) {
			r = err_set(SD_DB, "%s: the source and the target hold different events",
				    tables[i]);
			break;
		}
		if (!ra)
			break;
		for (c = 0; c < t->ncols; c++)
			if (db_col_int(a, c) != db_col_int(b, c)) {
				r = err_set(SD_DB, "%s of event %lld: column %d is %lld on the "
					    "source, %lld as rebuilt from the copied rows", tables[i],
					    (long long)db_col_int(a, 0), c + 1,
					    (long long)db_col_int(a, c), (long long)db_col_int(b, c));
				break;
			}
		if (r != SD_OK)
			break;
	}
	db_reset(a);
	db_reset(b);
	return r;
}

/* Refuse a target with any row: the copy keeps every id as it was. */
static enum sd_result target_empty(struct move *m)
{
	enum sd_result r;
	int64_t n;
	int i;

	for (i = 0; i < BOXMOVE_TABLES; i++) {
		if (strcmp(tables[i], MARKS) == 0)
			continue;
		if ((r = count_rows(m->dst, m->sql[i].count, &n)) != SD_OK)
			return r;
		if (n > 0)
			return err_set(SD_INVALID, "the target already holds %lld row%s in %s: "
				       "migrate copies a box into an empty database only; nothing "
				       "was written", (long long)n, n == 1 ? "" : "s", tables[i]);
	}
	return SD_OK;
}

static enum sd_result move_all(struct move *m, const char *from, const char *from_state)
{
	struct boxmove_report *rep = m->rep;
	enum sd_result r;
	int i;

	for (i = 0; i < BOXMOVE_TABLES; i++)
		if ((r = table_prepare(m, i)) != SD_OK)
			return r;
	if ((r = target_empty(m)) != SD_OK)
		return r;
	for (i = 0; i < BOXMOVE_TABLES; i++) {
		int64_t n = 0;

		rep->table[i].name = tables[i];
		rep->n_tables = i + 1;
		if (strcmp(tables[i], MARKS) == 0 && (r = db_exec(m->dst, SQL_MARKS_CLEAR)) != SD_OK)
			return r;
		if (strcmp(tables[i], DERIVED) != 0 && (r = table_copy(m, i, &n)) != SD_OK)
			return r;
		if (strcmp(tables[i], "blobs") == 0 && (r = pdfs_copy(m, from, from_state)) != SD_OK)
			return r;
		if (m->sql[i].setval[0] && (r = db_exec(m->dst, m->sql[i].setval)) != SD_OK)
			return r;
		if ((r = count_rows(m->src, m->sql[i].count, &rep->table[i].source)) != SD_OK ||
		    (r = count_rows(m->dst, m->sql[i].count, &rep->table[i].target)) != SD_OK)
			return r;
		if (strcmp(tables[i], "blobs") == 0)
			rep->table[i].source += rep->pdfs_from_files;
		if (rep->table[i].source != rep->table[i].target)
			return err_set(SD_DB, "%s: %lld rows on the source, %lld on the target; "
				       "nothing was committed", tables[i],
				       (long long)rep->table[i].source,
				       (long long)rep->table[i].target);
		if (strcmp(tables[i], DERIVED) == 0 && (r = derived_compare(m, i)) != SD_OK)
			return r;
		if (m->progress)
			fprintf(m->progress, "  %-16s %lld rows\n", tables[i],
				(long long)rep->table[i].target);
	}
	return SD_OK;
}

enum sd_result boxmove_run(const char *from, const char *from_state, const char *to,
			   FILE *progress, struct boxmove_report *rep)
{
	struct move *m;
	char state[4096];
	int64_t t0 = clock_mono_us();
	enum sd_result r;

	memset(rep, 0, sizeof *rep);
	if (db_target_is_pg(from))
		return err_set(SD_INVALID, "--from must be a box's SQLite file, not a PostgreSQL "
			       "URI");
	if (!db_target_is_pg(to))
		return err_set(SD_INVALID, "--to must be a postgresql:// URI");
	if ((r = statedir_path(from, from_state, state, sizeof state)) != SD_OK)
		return r;
	if (!(m = calloc(1, sizeof *m)))
		return err_set(SD_NOMEM, "out of memory");
	m->progress = progress;
	m->rep = rep;
	if ((r = db_open(from, 0, DB_SYNC_FULL, &m->src)) != SD_OK ||
	    (r = db_open(to, DB_OPEN_CREATE, DB_SYNC_FULL, &m->dst)) != SD_OK)
		goto out;
	if (db_schema_version(m->src) != db_schema_version(m->dst)) {
		r = err_set(SD_SCHEMA, "the source is at schema %d, the target at %d",
			    db_schema_version(m->src), db_schema_version(m->dst));
		goto out;
	}
	/* the source's write lock: one snapshot, nothing changes under it */
	if ((r = db_begin(m->src)) != SD_OK)
		goto out;
	if ((r = db_begin(m->dst)) != SD_OK) {
		db_rollback(m->src);
		goto out;
	}
	r = move_all(m, from, state);
	r = db_end(m->dst, r);
	db_rollback(m->src);
	if (r != SD_OK)
		goto out;
	/* the operator's token file of the box, recorded on the target too */
	r = token_ensure(to, state);
out:
	db_close(m->src);
	db_close(m->dst);
	free(m);
	rep->ms = (clock_mono_us() - t0) / 1000;
	return r;
}
