/*
 * db_pg.c: the PostgreSQL engine, through libpq: connections, the schema
 * version (the stagedoor_schema table), transactions, statements and the
 * translation of the program's SQL to PostgreSQL's parameters.
 *
 * Invariants:
 *  - a struct db is one PGconn, used by one thread at a time;
 *  - the program's ?NNN and ? parameters become $NNN here, outside quoted
 *    text; values go as text, typed at PREPARE by what was bound first
 *    (an integer is int8, text is text, NULL is the server's guess from the
 *    statement), so PostgreSQL parses each value as its parameter's type;
 *  - a statement is prepared once per connection (a server-side prepared
 *    statement, named by the connection's counter) and again after a
 *    reconnect: a lost connection (a server restart, a standby promoted)
 *    fails the statement or transaction at hand with SD_IO, and the next
 *    call outside a transaction connects again (libpq walks a multi-host
 *    URI with target_session_attrs=read-write to the new primary);
 *  - inside a transaction each statement runs under a savepoint (sent in the
 *    same round trip), so that a failed one undoes itself alone, as in
 *    SQLite, instead of ending the transaction;
 *  - transactions are READ COMMITTED: the statements that must not race
 *    across boxes say so themselves (FOR UPDATE, SKIP LOCKED, a conditional
 *    UPDATE, a unique constraint), as the four techniques already do;
 *  - migrations take a transaction-scoped advisory lock, so boxes that
 *    start together migrate one database once.
 */
#define _POSIX_C_SOURCE 200809L
#include "db.h"
#include "db_engine.h"
#include "version.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "text.h"

/* The advisory lock keys (db_lock_try's and the boxes'): "StageBL" and the
 * key's number, each made the schema's own (PG_LOCK_KEY): the boxes of one
 * schema (search_path) are one installation, and those of another on the
 * same database neither lead nor block them. */
#define PG_LOCK_BASE 0x53746167654c0000LL
#define PG_LOCK_KEY "hashtextextended(current_schema(), %lld)"

/* The advisory lock key of migrations (any fixed 64-bit number). */
#define PG_LOCK_MIGRATE 0x5374616765444d31LL	/* "StageDM1" */

struct pg {
	PGconn *c;
	unsigned gen;			/* connection generation: bumped on reconnect */
	unsigned next_name;		/* statement names on this connection */
	int in_tx;			/* BEGIN sent, no COMMIT/ROLLBACK yet */
	enum db_sync sync;		/* the level asked for, kept across reconnects */
	int64_t changes;		/* rows of the last write */
	unsigned locks_gen;		/* the generation the held locks belong to */
	unsigned locks;			/* bit (1 << key): advisory locks held */
	char *channel;			/* the schema's wake-up channel, quoted */
	unsigned listen_gen;		/* the generation that LISTENs; 0: none */
	int box_lock;			/* run's shared box lock: taken again on a
					 * new connection (a failover) */
};

struct pg_stmt {
	struct db_stmt base;
	char *sql;			/* translated: $NNN parameters */
	int nparams;			/* the highest parameter number */
	unsigned gen;			/* prepared on this generation; 0: not yet */
	char name[24];
	char **vals;			/* bound values as text; NULL: SQL NULL */
	char *kind;			/* per parameter: 'i' int, 't' text, 'b' bytea,
					 * 'n' NULL, 0 unbound */
	unsigned char *blob;		/* db_col_blob's bytes of the current row */
	PGresult *res;			/* the rows of the current execution */
	int nrows, cur;			/* rows, and the row db_col_* read (-1: none) */
	int done;			/* every row read */
};

#define PG(db) ((struct pg *)(db)->e)
#define PG_ST(s) ((struct pg_stmt *)(s))

/* ======================== errors ========================================== */

/* pg_gone: the connection is no longer usable (the server went away) */
static int pg_gone(struct pg *p)
{
	return !p->c || PQstatus(p->c) != CONNECTION_OK;
}

/* pg_message: the server's message, one line */
static void pg_message(const PGresult *res, PGconn *c, char *buf, size_t size)
{
	const char *m = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
	char *nl;

	snprintf(buf, size, "%s", m ? m : (c ? PQerrorMessage(c) : "no connection"));
	while ((nl = strchr(buf, '\n')))
		*nl = ' ';
	nl = buf + strlen(buf);
	while (nl > buf && nl[-1] == ' ')
		*--nl = '\0';
}

/* pg_fail: our code for a failed result (res may be NULL: the connection) */
static enum sd_result pg_fail(struct pg *p, const PGresult *res, const char *what)
{
	const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	char msg[400];

	pg_message(res, p->c, msg, sizeof msg);
	if (pg_gone(p) || !state || strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0)
		return err_set(SD_IO, "the PostgreSQL connection failed: nothing was stored "
			       "(%s): %s", what, msg);
	if (strcmp(state, "P0001") == 0)	/* a trigger's RAISE EXCEPTION 'the rule' */
		return err_set(SD_REFUSED, "%s", PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
	if (strncmp(state, "23", 2) == 0 || strcmp(state, "22P02") == 0 ||
	    strcmp(state, "22003") == 0 || strcmp(state, "22001") == 0 ||
	    strcmp(state, "22021") == 0)
		return err_set(SD_INVALID, "refused by the database (%s): %s", what, msg);
	if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
	    strcmp(state, "55P03") == 0 || strcmp(state, "57014") == 0)
		return err_set(SD_BUSY, "database is busy (%s): %s", what, msg);
	if (strcmp(state, "53100") == 0)
		return err_set(SD_IO, "the database server's disk is full: nothing was stored "
			       "(%s)", what);
	if (strncmp(state, "53", 2) == 0)
		return err_set(SD_IO, "the database server is out of resources (%s): %s", what, msg);
	if (strcmp(state, "25006") == 0)
		return err_set(SD_IO, "the database is read-only (a standby?): nothing was stored "
			       "(%s)", what);
	return err_set(SD_DB, "database error (%s): %s [%s]", what, msg, state);
}

/* pg_ok: res succeeded (and is then the caller's to clear) */
static int pg_ok(const PGresult *res)
{
	ExecStatusType s = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;

	return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

/* Notices (a NOTICE from CREATE ... IF NOT EXISTS) are not errors. */
static void pg_notice(void *arg, const char *message)
{
	(void)arg;
	(void)message;
}

/* ======================== connections ===================================== */

/*
 * pg_channel: the wake-up channel of the connection's schema, so that two
 * schemas in one database (test runs, two venues) do not wake each other:
 * "stagedoor.<schema>", quoted as an identifier.
 */
static enum sd_result pg_channel(struct db *db)
{
	struct pg *p = PG(db);
	PGresult *res = PQexec(p->c, "SELECT 'stagedoor.' || current_schema()");
	char *q = NULL;
	enum sd_result r = SD_OK;

	if (!pg_ok(res) || PQntuples(res) < 1)
		r = pg_fail(p, res, "schema");
	else if (!(q = PQescapeIdentifier(p->c, PQgetvalue(res, 0, 0),
					  strlen(PQgetvalue(res, 0, 0)))))
		r = err_set(SD_NOMEM, "out of memory");
	PQclear(res);
	if (r != SD_OK)
		return r;
	free(p->channel);
	p->channel = strdup(q);
	PQfreemem(q);
	return p->channel ? SD_OK : err_set(SD_NOMEM, "out of memory");
}

static enum sd_result pg_connect(struct db *db)
{
	struct pg *p = PG(db);
	char where[300];

	if (p->c)
		PQfinish(p->c);
	p->c = PQconnectdb(db->path);
	p->gen++;
	p->next_name = 0;
	p->in_tx = 0;
	if (!p->c)
		return err_set(SD_NOMEM, "out of memory connecting to PostgreSQL");
	if (PQstatus(p->c) != CONNECTION_OK) {
		char msg[400];

		text_redact_url(db->path, where, sizeof where);
		pg_message(NULL, p->c, msg, sizeof msg);
		return err_set(SD_IO, "cannot connect to %s: %s", where, msg);
	}
	PQsetNoticeProcessor(p->c, pg_notice, NULL);
	return pg_channel(db);
}

/* pg_simple: run sql (no parameters, no rows wanted) */
static enum sd_result pg_simple(struct db *db, const char *sql, const char *what)
{
	struct pg *p = PG(db);
	PGresult *res = PQexec(p->c, sql);
	enum sd_result r = SD_OK;

	if (!pg_ok(res))
		r = pg_fail(p, res, what);
	PQclear(res);
	return r;
}

/* pg_int_value: an integer column's text, or a boolean's as 1 and 0 (as SQLite) */
static int64_t pg_int_value(const char *v)
{
	if (v[0] == 't' && !v[1])
		return 1;
	if (v[0] == 'f' && !v[1])
		return 0;
	return strtoll(v, NULL, 10);
}

/* pg_int: the first column of the first row of sql, or def when no row */
static enum sd_result pg_int(struct db *db, const char *sql, int64_t def, int64_t *out)
{
	struct pg *p = PG(db);
	PGresult *res = PQexec(p->c, sql);
	enum sd_result r = SD_OK;

	*out = def;
	if (!pg_ok(res))
		r = pg_fail(p, res, "schema version");
	else if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
		*out = pg_int_value(PQgetvalue(res, 0, 0));
	PQclear(res);
	return r;
}

static enum sd_result pg_session(struct db *db, enum db_sync sync);
static enum sd_result pg_migration_lock(struct db *db);

/*
 * Is this database ours, and not from a newer version?  A schema with
 * tables but no stagedoor_schema belongs to another program: we add
 * nothing to it.  A new one gets its version table (version 0) here.
 */
static enum sd_result pg_check_ours(struct db *db)
{
	char where[300];
	int64_t has, tables, v;
	enum sd_result r;

	text_redact_url(db->path, where, sizeof where);
	if ((r = pg_int(db, "SELECT to_regclass('stagedoor_schema') IS NOT NULL", 0, &has)) !=
	    SD_OK)
		return r;
	if (!has) {
		if ((r = pg_int(db, "SELECT count(*) FROM pg_tables WHERE schemaname = "
				"current_schema()", 0, &tables)) != SD_OK)
			return r;
		if (tables > 0)
			return err_set(SD_SCHEMA, "%s holds tables of another program (no "
				       "stagedoor_schema table); nothing was changed", where);
		if ((r = pg_simple(db, "BEGIN", "begin")) != SD_OK)
			return r;
		if ((r = pg_migration_lock(db)) != SD_OK ||
		    (r = pg_simple(db, "CREATE TABLE IF NOT EXISTS stagedoor_schema "
				   "(version BIGINT NOT NULL)", "schema version")) != SD_OK ||
		    (r = pg_simple(db, "INSERT INTO stagedoor_schema (version) SELECT 0 WHERE "
				   "NOT EXISTS (SELECT 1 FROM stagedoor_schema)",
				   "schema version")) != SD_OK) {
			pg_simple(db, "ROLLBACK", "rollback");
			return r;
		}
		if ((r = pg_simple(db, "COMMIT", "commit")) != SD_OK)
			return r;
	}
	if ((r = pg_int(db, "SELECT version FROM stagedoor_schema", 0, &v)) != SD_OK)
		return r;
	if (v > db_migration_count_pg)
		return db_newer_error(where, (int)v, db_migration_count_pg);
	db->version = (int)v;
	return SD_OK;
}

static enum sd_result pg_open(struct db *db, int flags, enum db_sync sync)
{
	struct pg *p;
	enum sd_result r;

	(void)flags;	/* the database is the server's to create */
	if (!(p = calloc(1, sizeof *p)))
		return err_set(SD_NOMEM, "out of memory opening PostgreSQL");
	db->e = p;
	if ((r = pg_connect(db)) != SD_OK || (r = pg_session(db, sync)) != SD_OK)
		return r;
	return pg_check_ours(db);
}

static void pg_close(struct db *db)
{
	struct pg *p = PG(db);

	if (p->c)
		PQfinish(p->c);
	free(p->channel);
	free(p);
	db->e = NULL;
}

/*
 * pg_session: the settings of a (new) connection.  DB_SYNC_QUEUE is the
 * queue's own bookkeeping (claims, acks, the relay's batches):
 * synchronous_commit = off, so such a commit may be lost to a server crash
 * or a failover, and that loss is harmless even when later commits lean on
 * it: a lost claim or publish makes the entry claimable or published again,
 * a lost ack re-runs an idempotent job.  DB_SYNC_NORMAL keeps the server's
 * own setting.  DB_SYNC_FULL, what a person is told is taken, is never
 * weaker than on, whatever the server or the role says: the commit is on
 * the primary's disk, and with a synchronous standby on the standby's,
 * before the server makes it visible to any other session (PostgreSQL
 * waits for the flush, and for the standby, before it ends the
 * transaction), so no box acts on an order a crash or a failover can take.
 * A server set to remote_apply keeps it (a reader on the standby then sees
 * the order once it is answered).
 *
 * Why not off for all but orders, as SQLite's NORMAL: in SQLite a commit
 * that a crash takes away takes every later commit with it, since the
 * processes that could lean on it die too.  A PostgreSQL server can crash
 * (or be replaced by its standby) while its clients live on: a handler's
 * "email sent" mark committed with off, then lost, while the worker's ack
 * made after it on the new primary stays, leaves a job done whose effect
 * was never recorded.  A handler's writes are effects, so they wait.
 */
static const char SQL_PG_FULL_SYNC[] =
	"SELECT set_config('synchronous_commit', 'on', false) "
	"WHERE current_setting('synchronous_commit') IN ('off', 'local', 'remote_write')";

static enum sd_result pg_session(struct db *db, enum db_sync sync)
{
	char sql[80];
	enum sd_result r;

	PG(db)->sync = sync;
	/* a writer waits for a row lock as long as an SQLite writer waits for
	 * the file's lock, then SD_BUSY (55P03) */
	snprintf(sql, sizeof sql, "SET lock_timeout = %lld", (long long)db_busy_timeout_ms());
	if ((r = pg_simple(db, sql, "session")) != SD_OK)
		return r;
	if ((r = pg_simple(db, sync == DB_SYNC_QUEUE ? "SET synchronous_commit = off"
						     : "SET synchronous_commit = DEFAULT", "session")) !=
	    SD_OK || sync != DB_SYNC_FULL)
		return r;
	return pg_simple(db, SQL_PG_FULL_SYNC, "session");
}

/* The boxes' lock: every `run` holds it shared for its life (taken again
 * on each new connection); a migration takes it exclusive for its
 * transaction, or refuses. */
#define PG_LOCK_BOXES (PG_LOCK_BASE + 31)

static enum sd_result pg_box_lock_take(struct db *db)
{
	char sql[160];

	snprintf(sql, sizeof sql, "SELECT pg_advisory_lock_shared(" PG_LOCK_KEY ")",
		 (long long)PG_LOCK_BOXES);
	return pg_simple(db, sql, "box lock");
}

/* pg_ready: connected, or connected again when the last connection broke
 * outside a transaction (inside one, the transaction is lost: its caller
 * sees the failure and begins again) */
static enum sd_result pg_ready(struct db *db)
{
	struct pg *p = PG(db);
	enum sd_result r;

	if (!pg_gone(p))
		return SD_OK;
	if (p->in_tx)
		return err_set(SD_IO, "the PostgreSQL connection failed: nothing was stored "
			       "(the transaction is lost)");
	if (p->c)
		log_event(LOG_WARN, "database connection lost: connecting again", NULL);
	if ((r = pg_connect(db)) != SD_OK || (r = pg_session(db, p->sync)) != SD_OK ||
	    (p->box_lock && (r = pg_box_lock_take(db)) != SD_OK))
		return r;
	log_event(LOG_INFO, "database connection back", NULL);
	return SD_OK;
}

static enum sd_result pg_version_read(struct db *db, int *version)
{
	int64_t v;
	enum sd_result r = pg_int(db, "SELECT version FROM stagedoor_schema", 0, &v);

	*version = (int)v;
	return r;
}

static enum sd_result pg_version_write(struct db *db, int version)
{
	char sql[80];

	snprintf(sql, sizeof sql, "UPDATE stagedoor_schema SET version = %d", version);
	return pg_simple(db, sql, "schema version");
}

static enum sd_result pg_migration_lock(struct db *db)
{
	char sql[160];

	snprintf(sql, sizeof sql, "SELECT pg_advisory_xact_lock(" PG_LOCK_KEY ")",
		 (long long)PG_LOCK_MIGRATE);
	return pg_simple(db, sql, "migration lock");
}

/* ======================== transactions ==================================== */

/* A BEGIN that finds the connection gone (the server restarted, a standby
 * took over) connects again and begins once more: nothing was lost yet. */
static enum sd_result pg_begin_as(struct db *db, const char *sql)
{
	enum sd_result r;

	if ((r = pg_ready(db)) != SD_OK)
		return r;
	if ((r = pg_simple(db, sql, "begin")) != SD_OK && pg_gone(PG(db)) &&
	    (r = pg_ready(db)) == SD_OK)
		r = pg_simple(db, sql, "begin");
	if (r != SD_OK)
		return r;
	PG(db)->in_tx = 1;
	return SD_OK;
}

/* READ COMMITTED: each statement sees what was committed when it began */
static enum sd_result pg_tx_begin(struct db *db)
{
	return pg_begin_as(db, "BEGIN");
}

/* one snapshot for every statement, as an SQLite read transaction has */
static enum sd_result pg_tx_begin_snapshot(struct db *db)
{
	return pg_begin_as(db, "BEGIN ISOLATION LEVEL REPEATABLE READ");
}

static enum sd_result pg_tx_commit(struct db *db)
{
	struct pg *p = PG(db);
	enum sd_result r = pg_simple(db, "COMMIT", "commit");

	/* a COMMIT whose answer the connection lost may or may not have
	 * happened: SD_IO, and every technique makes the retry harmless */
	p->in_tx = 0;
	return r;
}

/* COMMIT with a NOTIFY in the same round trip: the listeners hear of it
 * when, and only if, it commits.  A NOTIFY that fails leaves the
 * transaction open and aborted: it is rolled back here. */
static enum sd_result pg_commit_notify(struct db *db)
{
	struct pg *p = PG(db);
	char sql[300];
	enum sd_result r;

	snprintf(sql, sizeof sql, "NOTIFY %s; COMMIT", p->channel);
	r = pg_simple(db, sql, "commit");
	if (r != SD_OK && !pg_gone(p) && PQtransactionStatus(p->c) != PQTRANS_IDLE)
		pg_simple(db, "ROLLBACK", "rollback");
	p->in_tx = 0;
	return r;
}

/* LISTEN once per connection: a reconnect listens again */
static int pg_listen_fd(struct db *db)
{
	struct pg *p = PG(db);
	char sql[300];

	if (pg_gone(p))
		return -1;
	if (p->listen_gen != p->gen && !p->in_tx) {
		snprintf(sql, sizeof sql, "LISTEN %s", p->channel);
		if (pg_simple(db, sql, "listen") != SD_OK)
			return -1;
		p->listen_gen = p->gen;
	}
	return p->listen_gen == p->gen ? PQsocket(p->c) : -1;
}

static int pg_heard(struct db *db)
{
	struct pg *p = PG(db);
	PGnotify *n;
	int hit = 0;

	if (pg_gone(p) || p->listen_gen != p->gen)
		return 0;
	if (!PQconsumeInput(p->c))
		return 1;	/* broken: the next statement connects again */
	while ((n = PQnotifies(p->c))) {
		hit = 1;
		PQfreemem(n);
	}
	return hit;
}

static void pg_tx_rollback(struct db *db)
{
	struct pg *p = PG(db);

	if (!pg_gone(p))
		pg_simple(db, "ROLLBACK", "rollback");
	p->in_tx = 0;
}

static enum sd_result pg_exec(struct db *db, const char *sql)
{
	enum sd_result r;

	if ((r = pg_ready(db)) != SD_OK)
		return r;
	return pg_simple(db, sql, strlen(sql) < 40 ? sql : "schema");
}

/* ======================== statements ====================================== */

/*
 * pg_translate: sql with ?NNN as $NNN and each bare ? as the next number
 * (SQLite's rule: one more than the largest so far), outside '...' text,
 * "..." names and -- comments.  [out] *nparams the largest number.
 */
static char *pg_translate(const char *sql, int *nparams)
{
	size_t n = strlen(sql);
	char *out = malloc(n * 2 + 1), *o = out;
	const char *s = sql;
	int max = 0;

	if (!out)
		return NULL;
	while (*s) {
		if (*s == '\'' || *s == '"') {
			char q = *s;

			*o++ = *s++;
			while (*s && *s != q)
				*o++ = *s++;
			if (*s)
				*o++ = *s++;
		} else if (s[0] == '-' && s[1] == '-') {
			while (*s && *s != '\n')
				*o++ = *s++;
		} else if (*s == '?') {
			long v;
			char *end;

			s++;
			v = strtol(s, &end, 10);
			if (end == s)
				v = max + 1;
			s = end;
			if (v > max)
				max = (int)v;
			o += sprintf(o, "$%ld", v);
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	*nparams = max;
	return out;
}

static void pg_clear_result(struct pg_stmt *s)
{
	if (s->blob)
		PQfreemem(s->blob);
	s->blob = NULL;
	PQclear(s->res);
	s->res = NULL;
	s->nrows = 0;
	s->cur = -1;
	s->done = 0;
}

static void pg_clear_bindings(struct pg_stmt *s)
{
	int i;

	for (i = 0; i < s->nparams; i++) {
		free(s->vals[i]);
		s->vals[i] = NULL;
		s->kind[i] = 0;
	}
}

static struct db_stmt *pg_prepare(struct db *db, const char *sql, int persistent)
{
	struct pg_stmt *s;

	(void)persistent;
	if (!(s = calloc(1, sizeof *s)) || !(s->sql = pg_translate(sql, &s->nparams)) ||
	    !(s->vals = calloc((size_t)s->nparams + 1, sizeof *s->vals)) ||
	    !(s->kind = calloc((size_t)s->nparams + 1, 1))) {
		if (s) {
			free(s->sql);
			free(s->vals);
		}
		free(s);
		err_set(SD_NOMEM, "out of memory preparing a statement");
		return NULL;
	}
	s->base.db = db;
	s->cur = -1;
	return &s->base;
}

static void pg_finalize(struct db_stmt *st)
{
	struct pg_stmt *s = PG_ST(st);

	if (!s)
		return;
	pg_clear_result(s);
	pg_clear_bindings(s);
	/* the server's prepared statement goes with its connection */
	free(s->vals);
	free(s->kind);
	free(s->sql);
	free(s);
}

static void pg_rewind(struct db_stmt *st)
{
	pg_clear_result(PG_ST(st));
}

static void pg_reset(struct db_stmt *st)
{
	pg_clear_result(PG_ST(st));
	pg_clear_bindings(PG_ST(st));
}

static void pg_bind(struct pg_stmt *s, int idx, char kind, const char *v)
{
	if (idx < 1 || idx > s->nparams)
		return;		/* as SQLite: a parameter the SQL lacks binds nothing */
	free(s->vals[idx - 1]);
	s->vals[idx - 1] = v ? strdup(v) : NULL;
	s->kind[idx - 1] = kind;
}

static void pg_bind_int(struct db_stmt *st, int idx, int64_t v)
{
	char buf[24];

	snprintf(buf, sizeof buf, "%lld", (long long)v);
	pg_bind(PG_ST(st), idx, 'i', buf);
}

static void pg_bind_text(struct db_stmt *st, int idx, const char *v)
{
	pg_bind(PG_ST(st), idx, 't', v);
}

static void pg_bind_null(struct db_stmt *st, int idx)
{
	pg_bind(PG_ST(st), idx, 'n', NULL);
}

/* bytea in its text form: \x and two hex digits a byte */
static void pg_bind_blob(struct db_stmt *st, int idx, const void *data, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	struct pg_stmt *s = PG_ST(st);
	const unsigned char *b = data;
	char *v;
	size_t i;

	if (idx < 1 || idx > s->nparams)
		return;
	if (!(v = malloc(2 * len + 3))) {
		pg_bind(s, idx, 'n', NULL);	/* the statement then fails on NOT NULL */
		return;
	}
	v[0] = '\\';
	v[1] = 'x';
	for (i = 0; i < len; i++) {
		v[2 + 2 * i] = hex[b[i] >> 4];
		v[3 + 2 * i] = hex[b[i] & 15];
	}
	v[2 + 2 * len] = '\0';
	free(s->vals[idx - 1]);
	s->vals[idx - 1] = v;
	s->kind[idx - 1] = 'b';
}

/*
 * pg_send: one command of a statement: its PREPARE (types given) or its
 * execution.  Returns 0 when libpq could not send it.
 */
static int pg_send(struct pg *p, struct pg_stmt *s, const Oid *types)
{
	if (types)
		return PQsendPrepare(p->c, s->name, s->sql, s->nparams, types);
	return PQsendQueryPrepared(p->c, s->name, s->nparams, (const char *const *)s->vals, NULL,
				   NULL, 0);
}

/* pg_take: the next command's result in a pipeline, and the NULL after it */
static PGresult *pg_take(struct pg *p)
{
	PGresult *res = PQgetResult(p->c), *more;

	while (res && (more = PQgetResult(p->c)))
		PQclear(more);
	return res;
}

/*
 * pg_command: run the statement's PREPARE or execution; [out] *res its
 * result (the caller clears it; NULL when the connection failed).
 *
 * Outside a transaction it is one command.  Inside one it runs between
 * SAVEPOINT and RELEASE, the three in one round trip (libpq's pipeline
 * mode), and when it fails the transaction goes back to the savepoint: as
 * in SQLite, a failed statement undoes itself alone and the transaction
 * goes on (PostgreSQL would otherwise refuse every later statement of it).
 */
static void pg_command(struct pg *p, struct pg_stmt *s, const Oid *types, PGresult **res)
{
	PGresult *r, *sync;
	int sent;

	*res = NULL;
	if (!p->in_tx) {
		*res = types ? PQprepare(p->c, s->name, s->sql, s->nparams, types)
			     : PQexecPrepared(p->c, s->name, s->nparams,
					      (const char *const *)s->vals, NULL, NULL, 0);
		return;
	}
	if (!PQenterPipelineMode(p->c))
		return;
	sent = PQsendQueryParams(p->c, "SAVEPOINT sd_stmt", 0, NULL, NULL, NULL, NULL, 0) &&
	       pg_send(p, s, types) &&
	       PQsendQueryParams(p->c, "RELEASE SAVEPOINT sd_stmt", 0, NULL, NULL, NULL, NULL, 0) &&
	       PQpipelineSync(p->c);
	if (sent) {
		PQclear(pg_take(p));		/* SAVEPOINT */
		*res = pg_take(p);		/* the command */
		PQclear(pg_take(p));		/* RELEASE, or aborted */
	}
	while ((sync = PQgetResult(p->c))) {	/* up to the sync */
		ExecStatusType st = PQresultStatus(sync);

		PQclear(sync);
		if (st == PGRES_PIPELINE_SYNC || st == PGRES_FATAL_ERROR || pg_gone(p))
			break;
	}
	PQexitPipelineMode(p->c);
	if (*res && !pg_ok(*res) && !pg_gone(p)) {
		r = PQexec(p->c, "ROLLBACK TO SAVEPOINT sd_stmt; RELEASE SAVEPOINT sd_stmt");
		PQclear(r);
	}
}

/* pg_server_prepare: PREPARE s on this connection, typed by its bindings */
static enum sd_result pg_server_prepare(struct pg *p, struct pg_stmt *s)
{
	Oid types[256];
	PGresult *res;
	const char *state;
	enum sd_result r = SD_OK;
	int i;

	if (s->nparams > (int)(sizeof types / sizeof types[0]))
		return err_set(SD_DB, "a statement with more than 256 parameters");
	/* a parameter the statement never binds is text: its type must be
	 * named even when nothing uses it */
	for (i = 0; i < s->nparams; i++)
		types[i] = s->kind[i] == 'i' ? 20 /* int8 */ : s->kind[i] == 'b' ? 17 /* bytea */ :
			   s->kind[i] == 't' || !s->kind[i] ? 25 /* text */ : 0;
	snprintf(s->name, sizeof s->name, "s%u", ++p->next_name);
	pg_command(p, s, types, &res);
	if (res && !pg_ok(res) && (state = PQresultErrorField(res, PG_DIAG_SQLSTATE)) &&
	    (strcmp(state, "42P18") == 0 || strcmp(state, "42P08") == 0)) {
		/* a parameter bound NULL whose type nothing in the statement
		 * tells ("?2 IS NULL OR kind = ?2" is read left to right):
		 * text, as SQLite would take it */
		PQclear(res);
		for (i = 0; i < s->nparams; i++)
			if (!types[i])
				types[i] = 25;
		pg_command(p, s, types, &res);
	}
	if (!pg_ok(res))
		r = pg_fail(p, res, "prepare");
	else
		s->gen = p->gen;
	PQclear(res);
	return r;
}

static enum sd_result pg_execute(struct db *db, struct pg_stmt *s)
{
	struct pg *p = PG(db);
	enum sd_result r;
	const char *tuples;

	if ((r = pg_ready(db)) != SD_OK)
		return r;
	if (s->gen != p->gen && (r = pg_server_prepare(p, s)) != SD_OK)
		return r;
	pg_command(p, s, NULL, &s->res);
	if (!pg_ok(s->res)) {
		r = pg_fail(p, s->res, "statement");
		pg_clear_result(s);
		return r;
	}
	s->nrows = PQntuples(s->res);
	tuples = PQcmdTuples(s->res);
	p->changes = tuples && *tuples ? strtoll(tuples, NULL, 10) : 0;
	return SD_OK;
}

static enum sd_result pg_step(struct db_stmt *st, int *row)
{
	struct pg_stmt *s = PG_ST(st);
	enum sd_result r;

	*row = 0;
	if (!s->res && !s->done && (r = pg_execute(st->db, s)) != SD_OK)
		return r;
	if (s->cur + 1 < s->nrows) {
		s->cur++;
		*row = 1;
		return SD_OK;
	}
	/* done: the rows go, the statement stays done until a reset */
	PQclear(s->res);
	s->res = NULL;
	s->nrows = 0;
	s->cur = -1;
	s->done = 1;
	return SD_OK;
}

static const char *pg_value(struct pg_stmt *s, int col)
{
	if (!s->res || s->cur < 0 || col >= PQnfields(s->res) || PQgetisnull(s->res, s->cur, col))
		return NULL;
	return PQgetvalue(s->res, s->cur, col);
}

static int64_t pg_col_int(struct db_stmt *st, int col)
{
	const char *v = pg_value(PG_ST(st), col);

	return v ? pg_int_value(v) : 0;
}

static const char *pg_col_text(struct db_stmt *st, int col)
{
	return pg_value(PG_ST(st), col);
}

static const void *pg_col_blob(struct db_stmt *st, int col, size_t *len)
{
	struct pg_stmt *s = PG_ST(st);
	const char *v = pg_value(s, col);

	*len = 0;
	if (s->blob)
		PQfreemem(s->blob);
	s->blob = NULL;
	if (!v || !(s->blob = PQunescapeBytea((const unsigned char *)v, len)))
		return NULL;
	return s->blob;
}

static int pg_col_is_null(struct db_stmt *st, int col)
{
	return pg_value(PG_ST(st), col) == NULL;
}

static int64_t pg_changes(struct db *db)
{
	return PG(db)->changes;
}


static enum sd_result pg_lock_try(struct db *db, int key, int *held)
{
	struct pg *p = PG(db);
	char sql[160];
	int64_t got = 0;
	enum sd_result r;

	if (key < 1 || key > 30)
		return err_set(SD_INVALID, "no such lock %d", key);
	if ((r = pg_ready(db)) != SD_OK)
		return r;
	if (p->locks_gen != p->gen) {	/* a new connection holds nothing */
		p->locks_gen = p->gen;
		p->locks = 0;
	}
	if (p->locks & (1u << key)) {
		*held = 1;
		return SD_OK;
	}
	snprintf(sql, sizeof sql, "SELECT pg_try_advisory_lock(" PG_LOCK_KEY ")",
		 (long long)(PG_LOCK_BASE + key));
	if ((r = pg_int(db, sql, 0, &got)) != SD_OK)
		return r;
	if (got)
		p->locks |= 1u << key;
	*held = got != 0;
	return SD_OK;
}

static enum sd_result pg_box_lock_hold(struct db *db)
{
	enum sd_result r = pg_box_lock_take(db);

	if (r == SD_OK)
		PG(db)->box_lock = 1;
	return r;
}

static enum sd_result pg_migration_guard(struct db *db, int from, int to)
{
	char sql[160];
	int64_t got = 0;
	enum sd_result r;

	snprintf(sql, sizeof sql, "SELECT pg_try_advisory_xact_lock(" PG_LOCK_KEY ")",
		 (long long)PG_LOCK_BOXES);
	if ((r = pg_int(db, sql, 0, &got)) != SD_OK)
		return r;
	if (!got)
		return err_set(SD_BUSY, "the database is at schema version %d and this stagedoor "
			       "(%s) migrates it to %d, but boxes are running on it: stop every "
			       "box on this database first (systemctl stop stagedoor), then start "
			       "them with this version (run migrates at its start); nothing was "
			       "changed", from, STAGEDOOR_VERSION, to);
	return SD_OK;
}

/* ======================== checks and maintenance ========================= */

/* The server does these for itself; the box's calls say so. */

static enum sd_result pg_backup(struct db *db, const char *dest)
{
	(void)db;
	(void)dest;
	return err_set(SD_INVALID, "a PostgreSQL box is backed up by PostgreSQL itself "
		       "(pg_dump, pg_basebackup or a standby), not by stagedoor backup");
}

static int64_t pg_fullscan_steps(struct db *db)
{
	(void)db;
	return 0;	/* its plans are EXPLAIN's */
}

static int64_t pg_data_version(struct db *db)
{
	(void)db;
	return -1;	/* LISTEN/NOTIFY tells of other commits */
}

/* The server checks its pages as it reads them (data checksums); a whole
 * database check is amcheck's, the operator's tool */
static enum sd_result pg_integrity_check(struct db *db, int *ok, char *problem, size_t size)
{
	(void)db;
	*ok = 1;
	if (size)
		problem[0] = '\0';
	return SD_OK;
}

/* The server enforces every foreign key on write */
static enum sd_result pg_foreign_key_check(struct db *db, int *ok, char *problem, size_t size)
{
	return pg_integrity_check(db, ok, problem, size);
}

static enum sd_result pg_checkpoint(struct db *db, enum db_checkpoint_mode mode, int64_t busy_ms,
				    struct db_checkpoint_result *res)
{
	(void)db;
	(void)mode;
	(void)busy_ms;
	if (res)
		memset(res, 0, sizeof *res);
	return SD_OK;	/* the server checkpoints by itself */
}

static enum sd_result pg_wal_bytes(struct db *db, int64_t *bytes)
{
	(void)db;
	*bytes = 0;	/* the WAL is the server's */
	return SD_OK;
}

static enum sd_result pg_optimize(struct db *db)
{
	return db_exec(db, "ANALYZE");
}

const struct db_engine db_engine_pg = {
	.backup = pg_backup,
	.fullscan_steps = pg_fullscan_steps,
	.data_version = pg_data_version,
	.integrity_check = pg_integrity_check,
	.foreign_key_check = pg_foreign_key_check,
	.checkpoint = pg_checkpoint,
	.wal_bytes = pg_wal_bytes,
	.optimize = pg_optimize,
	.kind = DB_PG,
	.name = "postgresql",
	.open = pg_open,
	.close = pg_close,
	.version_read = pg_version_read,
	.version_write = pg_version_write,
	.migration_lock = pg_migration_lock,
	.migration_guard = pg_migration_guard,
	.box_lock_hold = pg_box_lock_hold,
	.tx_begin = pg_tx_begin,
	.tx_begin_snapshot = pg_tx_begin_snapshot,
	.tx_commit = pg_tx_commit,
	.tx_rollback = pg_tx_rollback,
	.exec = pg_exec,
	.prepare = pg_prepare,
	.finalize = pg_finalize,
	.reset = pg_reset,
	.bind_int = pg_bind_int,
	.bind_text = pg_bind_text,
	.bind_null = pg_bind_null,
	.bind_blob = pg_bind_blob,
	.col_blob = pg_col_blob,
	.step = pg_step,
	.rewind = pg_rewind,
	.col_int = pg_col_int,
	.col_text = pg_col_text,
	.col_is_null = pg_col_is_null,
	.changes = pg_changes,
	.lock_try = pg_lock_try,
	.commit_notify = pg_commit_notify,
	.listen_fd = pg_listen_fd,
	.heard = pg_heard,
};

int db_pg_lib_version(void)
{
	return PQlibVersion();
}
