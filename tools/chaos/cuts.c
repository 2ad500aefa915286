/*
 * cuts.c: the power-cut soak (chaos --power-cuts N).
 *
 * The box runs unmodified on tools/powercut, a FUSE filesystem that keeps
 * every write in memory until it is fsynced: <dir>/disk is the disk,
 * <dir>/box the mount, and the database, its WAL, shm and metrics files,
 * ticket.key, api.token and the PDFs all live there.  The provider
 * (mailsink), the config, the logs and this harness's own records stay off
 * the mount: they are other machines, or the operator's notebook.
 *
 * While orders go in, half through `stagedoor order add` and half through
 * POST /v1/orders, the harness cuts the power at a random moment: SIGKILL
 * every process of the box (the run, its children, the `order add`
 * processes), then tell the daemon to drop every unsynced write (a torn cut,
 * --torn-pct of them, first applies a random prefix of them in random order,
 * each 512-byte sector whole).  It unmounts the dead filesystem, mounts the
 * disk again, "boots", and before the box starts it reads the database with
 * its own SQLite and holds it against what it read just before the cut:
 *
 *   integrity      PRAGMA integrity_check says ok (else a corrupt database)
 *   acknowledged   every order answered 201 or exit 0 so far is there, once
 *   secrets        ticket.key and api.token are the bytes they were
 *   lost commits   orders, finished jobs (done_jobs) and sent marks
 *                  (email_sends.sent_at) that were in the database before
 *                  the cut and are not after it: commits the cut took.  A
 *                  finished job lost is a re-run the handlers must absorb
 *                  (the queue's connections commit at synchronous=NORMAL);
 *                  an order lost must be one nobody was told of.
 *
 * An order whose answer the cut took (killed, refused, no answer) is placed
 * again with its idempotency key after the start, until it is acknowledged;
 * an acknowledged one never is, so a lost one shows.  After the last cut the
 * soak drains as the kill soak does and verify.c gives the verdict on the
 * disk itself, after a clean unmount: with it, that no email went out for
 * an order a cut took, that no email owed was taken for another order's
 * under a key the cut handed on, and that no code admits another order's
 * seat.
 *
 * With --slow-fsync-ms the intake's flushes are held (strace, chaos.h):
 * the CLI placers run under it, and box_start attaches one to the HTTP
 * child, so the cuts fall while orders wait for their flush.  (A slow fsync
 * of the FUSE daemon itself would not do: the kernel holds the file's lock
 * through a FUSE fsync, and every other writer would wait for it too.)
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "chaos.h"

#define CUTS_PLACERS 4		/* orders in flight at a time */
#define CUTS_SECRET_MAX 256
#define CUTS_MOUNT_MS 10000
#define CUTS_PORT_MS 15000	/* a start to its "http listening" line */
#define CUTS_IO_MS 10000	/* an API call's socket timeouts */

/* An order being placed: by the CLI (a process on the box) or the API (a
 * client elsewhere: a forked child of this harness). */
struct cplacer {
	pid_t pid;		/* 0: none running */
	long idx;		/* -1: free */
	int api;
	int tries;
	int64_t not_before;	/* a refused order waits a little */
};

/* What the database held, read with this harness's own SQLite. */
struct snap {
	int exists, integrity_ok;
	char integrity[160];	/* integrity_check's first line */
	char err[200];		/* why it could not be read, "" when it could */
	unsigned char *orders;	/* per order idx: how many rows */
	uint64_t *done;		/* hashes of done_jobs.job_id, sorted */
	long n_done;
	uint64_t *sent;		/* email_sends with sent_at, their order ids, sorted */
	long n_sent;
};

static struct {
	char disk[CHAOS_PATH_MAX + 16], mnt[CHAOS_PATH_MAX + 16], sock[CHAOS_PATH_MAX + 16];
	char pclog[CHAOS_PATH_MAX + 16], disk_db[CHAOS_PATH_MAX + 48];
	pid_t pc;				/* the powercut daemon */
	char token[CUTS_SECRET_MAX], key[CUTS_SECRET_MAX];
	size_t key_len;
	int port;				/* the API's port now */
	pid_t strace;				/* --slow-fsync-ms: slowing the HTTP child */
	unsigned char *acked;			/* per order idx */
	long next;				/* the next new order idx */
	struct cplacer p[CUTS_PLACERS];

	/* figures */
	long cuts, torn, acked_cli, acked_api, refused;
	long lost_acked, lost_orders, lost_in_flight, lost_done, lost_sent, corrupt;
	uint64_t bytes_dropped, sectors_applied, sectors_dirty, undone;
	long backups_verified, backups_partial;
	long remounts;
	int64_t boot_ms_total;			/* cut to a box taking orders again */
	int64_t up_ms, up_expect_ms;		/* the box's working time: so far, planned */
} C;

/* ======================== the filesystem ================================ */

static int mounted(void)
{
	struct stat a, b;

	return stat(soak.dir, &a) == 0 && stat(C.mnt, &b) == 0 && a.st_dev != b.st_dev;
}

static int pc_start(void)
{
	char seed[32];
	const char *argv[] = { opt.powercut, C.disk, C.mnt, "-f", "--control", C.sock,
			       "--seed", seed, NULL };
	int64_t until = now_ms() + CUTS_MOUNT_MS;
	int rc;

	snprintf(seed, sizeof seed, "%" PRIu64, rng_below(UINT64_MAX));
	unlink(C.sock);
	if ((C.pc = proc_spawn(argv, C.pclog, C.pclog, NULL)) < 0) {
		C.pc = 0;
		fail("powercut: cannot start %s", opt.powercut);
		return -1;
	}
	for (; now_ms() < until; sleep_ms(5)) {
		if (mounted() && access(C.sock, F_OK) == 0)
			return 0;
		if ((rc = proc_wait(C.pc, 0)) != -2) {
			C.pc = 0;
			fail("powercut: exited %d before mounting (root and /dev/fuse needed; see %s)",
			     rc, C.pclog);
			return -1;
		}
	}
	fail("powercut: no mount at %s within %d ms", C.mnt, CUTS_MOUNT_MS);
	return -1;
}

/* Detach the mount and wait for the daemon, which exits 0 (after syncing
 * everything, when the power was not cut). */
static int pc_stop(void)
{
	int rc;

	if (!C.pc)
		return 0;
	if (umount2(C.mnt, MNT_DETACH) != 0)
		fail("powercut: umount %s: %s", C.mnt, strerror(errno));
	rc = proc_wait(C.pc, 30000);
	if (rc == -2) {
		kill(C.pc, SIGKILL);
		proc_wait(C.pc, 5000);
	}
	C.pc = 0;
	if (rc != 0) {
		fail("powercut: the daemon exited %d at unmount (see %s)", rc, C.pclog);
		return -1;
	}
	return 0;
}

/* One control command; its answer into reply.  0 when it says ok. */
static int pc_ctl(const char *cmd, char *reply, size_t size)
{
	struct sockaddr_un a;
	size_t len = 0;
	ssize_t got;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	reply[0] = '\0';
	memset(&a, 0, sizeof a);
	a.sun_family = AF_UNIX;
	if (strlen(C.sock) >= sizeof a.sun_path) {
		snprintf(reply, size, "the control socket's path is too long");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	memcpy(a.sun_path, C.sock, strlen(C.sock) + 1);
	if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
	    write(fd, cmd, strlen(cmd)) != (ssize_t)strlen(cmd) || write(fd, "\n", 1) != 1) {
		snprintf(reply, size, "the control socket: %s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	while (len < size - 1 && (got = read(fd, reply + len, size - 1 - len)) > 0)
		len += (size_t)got;
	close(fd);
	reply[len] = '\0';
	reply[strcspn(reply, "\n")] = '\0';
	return strncmp(reply, "ok", 2) == 0 ? 0 : -1;
}

static uint64_t reply_num(const char *reply, const char *name)
{
	const char *p = strstr(reply, name);

	return p ? strtoull(p + strlen(name), NULL, 10) : 0;
}

/* ======================== the secrets =================================== */

/* The file's bytes into buf (at most size); -1 when it cannot be read. */
static long read_small(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, size);
	close(fd);
	return n < 0 || (size_t)n == size ? -1 : n;
}

static int secrets_read(char *token, char *key, size_t *key_len)
{
	char path[CHAOS_PATH_MAX + 32];
	long n;

	snprintf(path, sizeof path, "%s/api.token", C.mnt);
	if ((n = read_small(path, token, CUTS_SECRET_MAX - 1)) <= 0) {
		fail("secrets: cannot read %s", path);
		return -1;
	}
	token[n] = '\0';
	token[strcspn(token, "\r\n")] = '\0';
	snprintf(path, sizeof path, "%s/ticket.key", C.mnt);
	if ((n = read_small(path, key, CUTS_SECRET_MAX)) <= 0) {
		fail("secrets: cannot read %s", path);
		return -1;
	}
	*key_len = (size_t)n;
	return 0;
}

/* ======================== the database, read by us ====================== */

static uint64_t fnv1a(const unsigned char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (; *s; s++)
		h = (h ^ *s) * 0x100000001b3ULL;
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void snap_free(struct snap *s)
{
	free(s->orders);
	free(s->done);
	free(s->sent);
	memset(s, 0, sizeof *s);
}

/* Run sql, one row at a time into row(); -1 on an error. */
static int each_row(sqlite3 *db, const char *sql, void (*row)(sqlite3_stmt *, struct snap *),
		    struct snap *s)
{
	sqlite3_stmt *st = NULL;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
		return -1;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		row(st, s);
	sqlite3_finalize(st);
	return rc == SQLITE_DONE ? 0 : -1;
}

static void row_integrity(sqlite3_stmt *st, struct snap *s)
{
	const char *t = (const char *)sqlite3_column_text(st, 0);

	if (!s->integrity[0])
		snprintf(s->integrity, sizeof s->integrity, "%s", t ? t : "(null)");
}

static void row_order(sqlite3_stmt *st, struct snap *s)
{
	const char *email = (const char *)sqlite3_column_text(st, 0);
	long n;

	if (email && sscanf(email, "buyer%ld@", &n) == 1 && n >= 1 && n <= opt.orders &&
	    s->orders[n - 1] < 255)
		s->orders[n - 1]++;
}

static void row_done(sqlite3_stmt *st, struct snap *s)
{
	const unsigned char *id = sqlite3_column_text(st, 0);
	uint64_t *grown;

	if (!id || !(grown = realloc(s->done, (size_t)(s->n_done + 1) * sizeof *grown)))
		return;
	s->done = grown;
	s->done[s->n_done++] = fnv1a(id);
}

static void row_sent(sqlite3_stmt *st, struct snap *s)
{
	uint64_t *grown = realloc(s->sent, (size_t)(s->n_sent + 1) * sizeof *grown);

	if (!grown)
		return;
	s->sent = grown;
	s->sent[s->n_sent++] = (uint64_t)sqlite3_column_int64(st, 0);
}

/*
 * snap_take: the database at path as a reader sees it, without changing
 * what is on the disk: read-only, no checkpoint at close (the box is not
 * running; its last connection's close would make unsynced commits
 * durable).  -1 when it cannot be read at all.
 */
static int snap_take(const char *path, struct snap *s)
{
	sqlite3 *db = NULL;
	int r = -1;

	memset(s, 0, sizeof *s);
	if (!(s->orders = calloc((size_t)opt.orders, 1)))
		return -1;
	if (access(path, F_OK) != 0)
		return 0;
	s->exists = 1;
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		snprintf(s->err, sizeof s->err, "%s", db ? sqlite3_errmsg(db) : "out of memory");
		goto out;
	}
	sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_busy_timeout(db, 10000);
	if (each_row(db, "PRAGMA integrity_check", row_integrity, s) != 0) {
		snprintf(s->integrity, sizeof s->integrity, "%s", sqlite3_errmsg(db));
		snprintf(s->err, sizeof s->err, "integrity_check: %s", sqlite3_errmsg(db));
		goto out;
	}
	s->integrity_ok = strcmp(s->integrity, "ok") == 0;
	if (!s->integrity_ok)
		goto out;
	if (each_row(db, "SELECT buyer_email FROM orders", row_order, s) != 0 ||
	    each_row(db, "SELECT job_id FROM done_jobs", row_done, s) != 0 ||
	    each_row(db, "SELECT order_id FROM email_sends WHERE sent_at IS NOT NULL", row_sent,
		     s) != 0) {
		snprintf(s->err, sizeof s->err, "%s", sqlite3_errmsg(db));
		goto out;
	}
	qsort(s->done, (size_t)s->n_done, sizeof *s->done, cmp_u64);
	qsort(s->sent, (size_t)s->n_sent, sizeof *s->sent, cmp_u64);
	r = 0;
out:
	if (r != 0 && !s->err[0])
		snprintf(s->err, sizeof s->err, "integrity_check: %s", s->integrity);
	sqlite3_close(db);
	return r;
}

/* How many of b's sorted values a lacks. */
static long missing_u64(const uint64_t *b, long nb, const uint64_t *a, long na)
{
	long i = 0, j = 0, n = 0;

	for (; i < nb; i++) {
		while (j < na && a[j] < b[i])
			j++;
		if (j == na || a[j] != b[i])
			n++;
		else
			j++;
	}
	return n;
}

/* Whether order idx's request is still out: a placer holds it to place it
 * again (its answer was cut), so nobody was told it was taken. */
static int in_flight(long idx)
{
	for (int i = 0; i < CUTS_PLACERS; i++)
		if (C.p[i].idx == idx)
			return 1;
	return 0;
}

/* The checks after a cut: after against before and the acknowledgements.
 * A commit the box was syncing when it was killed is in the WAL file's
 * cached pages, so the reader that recovers the WAL before the cut sees
 * it, and the cut takes it: that is an order in flight, placed again with
 * its key.  Any other order the cut took was one somebody could rely on. */
static int snap_judge(long cut, const struct snap *b, const struct snap *a)
{
	long i, lost_acked = 0;
	int ok = 1;

	if (!a->exists || !a->integrity_ok) {
		C.corrupt++;
		fail("cut %ld: the database %s: %s", cut, a->exists ? "is damaged" : "is gone",
		     a->err);
		return -1;
	}
	if (a->err[0]) {
		/* its tables gone or unreadable: every order in it is lost */
		fail("cut %ld: the database cannot be read after the cut: %s", cut, a->err);
		ok = 0;
	}
	for (i = 0; i < opt.orders; i++) {
		if (a->orders[i] > 1) {
			fail("cut %ld: order %ld is in the database %d times", cut, i, a->orders[i]);
			ok = 0;
		}
		if (C.acked[i] && !a->orders[i]) {
			if (!lost_acked++)
				fail("cut %ld: acknowledged order %ld (buyer%ld@example.org) is gone",
				     cut, i, i + 1);
			ok = 0;
		}
		if (b->orders[i] && !a->orders[i] && !C.acked[i]) {
			if (in_flight(i)) {
				C.lost_in_flight++;
			} else {
				fail("cut %ld: order %ld, which nobody was still placing, is gone", cut, i);
				C.lost_orders++;
				ok = 0;
			}
		}
	}
	C.lost_acked += lost_acked;
	C.lost_done += missing_u64(b->done, b->n_done, a->done, a->n_done);
	C.lost_sent += missing_u64(b->sent, b->n_sent, a->sent, a->n_sent);
	return ok ? 0 : -1;
}

/* ======================== the backups (--backups) ======================= */

/* After a cut every backup that has its name (not a partial folder) must
 * verify: built aside and renamed whole, a cut mid-backup leaves the
 * earlier ones as they were and never half of a new one. */
static int backups_judge(long cut)
{
	char dir[CHAOS_PATH_MAX + 48], path[CHAOS_PATH_MAX * 2], out[1024];
	struct dirent *d;
	DIR *dp;
	int ok = 1;

	snprintf(dir, sizeof dir, "%s/" CHAOS_CUTS_BACKUPS, C.mnt);
	if (!(dp = opendir(dir)))
		return 0;	/* none taken yet */
	while ((d = readdir(dp))) {
		const char *argv[] = { opt.bin, "backup", "verify", path, NULL };
		int rc;

		if (strncmp(d->d_name, "stagedoor-", 10) != 0)
			continue;
		if (strstr(d->d_name, ".partial-")) {
			C.backups_partial++;
			continue;
		}
		snprintf(path, sizeof path, "%s/%s", dir, d->d_name);
		if ((rc = proc_run(argv, out, sizeof out, 1)) != 0) {
			fail("cut %ld: backup %s does not verify (exit %d): %.300s", cut, d->d_name,
			     rc, out);
			ok = 0;
		} else {
			C.backups_verified++;
		}
	}
	closedir(dp);
	return ok ? 0 : -1;
}

/* ======================== orders ======================================== */

/* The API child: one POST, exit 0 for a 201, 3 for an answer that asks to
 * come back (409, 429, 503), 2 when there was no answer, 1 otherwise. */
static void __attribute__((noreturn)) api_child(long idx)
{
	struct order_fields f;
	struct sockaddr_in a;
	struct timeval tv = { CUTS_IO_MS / 1000, 0 };
	char body[512], req[2048], resp[256];
	size_t len = 0;
	ssize_t got;
	int n, fd, status;

	order_fields(idx, &f);
	snprintf(body, sizeof body,
		 "{\"event_id\":%s,\"name\":\"%s\",\"email\":\"%s\",\"seats\":%s}", f.event,
		 f.name, f.email, f.seats);
	n = snprintf(req, sizeof req,
		     "POST /v1/orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		     "Authorization: Bearer %s\r\nIdempotency-Key: %s\r\n"
		     "Content-Type: application/json\r\nContent-Length: %zu\r\n"
		     "Connection: close\r\n\r\n%s", C.token, f.key, strlen(body), body);
	memset(&a, 0, sizeof a);
	a.sin_family = AF_INET;
	a.sin_port = htons((uint16_t)C.port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		_exit(2);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
	if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || write(fd, req, (size_t)n) != n)
		_exit(2);
	while (len < sizeof resp - 1 && (got = read(fd, resp + len, sizeof resp - 1 - len)) > 0)
		len += (size_t)got;
	resp[len] = '\0';
	if (sscanf(resp, "HTTP/1.%*d %d", &status) != 1)
		_exit(2);
	if (status == 201)
		_exit(0);
	if (status == 409 || status == 429 || status == 503)
		_exit(3);
	fprintf(stderr, "chaos: POST /v1/orders (order %ld): %.200s\n", idx, resp);
	_exit(1);
}

static pid_t place_api(long idx)
{
	pid_t pid = fork();

	if (pid == 0) {
		int fd = open(soak.orders_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

		if (fd >= 0)
			dup2(fd, 2);
		api_child(idx);
	}
	if (pid < 0)
		fail("orders: fork: %s", strerror(errno));
	return pid;
}

static void acked(struct cplacer *p)
{
	if (!C.acked[p->idx]) {
		C.acked[p->idx] = 1;
		if (p->api)
			C.acked_api++;
		else
			C.acked_cli++;
	}
	p->idx = -1;
}

/* A placer's process ended with rc: acknowledged, or to be placed again. */
static int placer_done(struct cplacer *p, int rc)
{
	p->pid = 0;
	if (rc == 0) {
		acked(p);
		return 0;
	}
	if (rc == 1 && p->api) {
		fail("orders: the API refused order %ld for good (see %s)", p->idx,
		     soak.orders_log);
		return -1;
	}
	if (++p->tries >= CHAOS_ORDER_TRIES) {
		fail("orders: order %ld refused %d times, last exit %d (see %s)", p->idx,
		     p->tries, rc, soak.orders_log);
		return -1;
	}
	C.refused++;
	p->not_before = now_ms() + 20 * p->tries;
	return 0;
}

/* Orders are spread over the box's planned working time, so that every cut
 * falls among orders and work; after the last cut they all may go. */
static int order_due(void)
{
	if (C.cuts >= opt.cuts || C.up_expect_ms <= 0)
		return 1;
	return C.next < CUTS_PLACERS + opt.orders * C.up_ms / C.up_expect_ms;
}

/* Reap finished placers, start new ones.  -1 on an order that will not go in. */
static int placers_step(void)
{
	int i;

	for (i = 0; i < CUTS_PLACERS; i++) {
		struct cplacer *p = &C.p[i];
		int rc;

		if (p->pid > 0) {
			if ((rc = proc_wait(p->pid, 0)) == -2)
				continue;
			if (placer_done(p, rc) != 0)
				return -1;
		}
		if (p->idx < 0) {
			if (C.next >= opt.orders || !order_due())
				continue;
			p->idx = C.next++;
			p->api = (int)rng_below(2);
			p->tries = 0;
			p->not_before = 0;
		}
		if (now_ms() < p->not_before)
			continue;
		if ((p->pid = p->api ? place_api(p->idx) : place_cli(p->idx)) < 0) {
			p->pid = 0;
			return -1;
		}
		soak.placed++;
	}
	return 0;
}

/* At a cut: the CLI placers die with the box; the API's clients are
 * elsewhere, and learn of it from their sockets. */
static void placers_cut(int kill_cli)
{
	int i;

	for (i = 0; i < CUTS_PLACERS; i++) {
		struct cplacer *p = &C.p[i];
		int rc;

		if (p->pid <= 0)
			continue;
		if (kill_cli && !p->api)
			kill(p->pid, SIGKILL);
		if ((rc = proc_wait(p->pid, CUTS_IO_MS + 5000)) == -2) {
			kill(p->pid, SIGKILL);
			rc = proc_wait(p->pid, 5000);
		}
		p->pid = 0;
		if (rc == 0)
			acked(p);
		p->tries = 0;
		p->not_before = 0;
	}
}

static int orders_pending(void)
{
	int i;

	if (C.next < opt.orders)
		return 1;
	for (i = 0; i < CUTS_PLACERS; i++)
		if (C.p[i].idx >= 0)
			return 1;
	return 0;
}

/* ======================== the box ======================================= */

static long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long)sb.st_size : 0;
}

/* The strace that slows the HTTP child's flushes ends with the child (a
 * cut kills it first); make sure, and reap it. */
static void strace_stop(void)
{
	if (C.strace <= 0)
		return;
	if (proc_wait(C.strace, 5000) == -2) {
		kill(C.strace, SIGKILL);
		proc_wait(C.strace, 5000);
	}
	C.strace = 0;
}

/* Start the box and wait for its API's port; with --slow-fsync-ms, slow
 * the flushes of its HTTP child, which takes the API's orders. */
static int box_start(void)
{
	long from = file_size(soak.run_log);
	int64_t until;
	pid_t http;

	if (start_run(slow_fsync_env()) != 0)
		return -1;
	for (until = now_ms() + CUTS_PORT_MS; now_ms() < until; sleep_ms(10))
		if ((C.port = http_port_since(from)) > 0)
			break;
	if (C.port <= 0) {
		fail("box: no \"http listening\" line within %d ms (see %s)", CUTS_PORT_MS,
		     soak.run_log);
		return -1;
	}
	if (opt.slow_fsync_ms && ((http = http_child_since(from)) <= 0 ||
				  (C.strace = slow_fsync_attach(http)) <= 0)) {
		fail("box: cannot slow the HTTP child's flushes (pid %ld)", (long)http);
		return -1;
	}
	return 0;
}

/* Let the box work (orders going in) for up_ms. */
static int box_work(int64_t up_ms)
{
	int64_t start = now_ms(), until = start + up_ms, up0 = C.up_ms;
	int rc;

	while (now_ms() < until && !chaos_interrupted) {
		C.up_ms = up0 + now_ms() - start;
		if (placers_step() != 0)
			return -1;
		if (soak.run && (rc = proc_wait(soak.run, 0)) != -2) {
			soak.run = 0;
			fail("box: stagedoor run exited by itself (status %d; see %s)", rc,
			     soak.run_log);
			return -1;
		}
		orphans_reap();
		sleep_ms(5);
	}
	return chaos_interrupted ? -1 : 0;
}

/* The cut: kill the box, drop the unsynced writes, remount, judge. */
static int cut_once(long cut)
{
	struct snap before, after;
	char cmd[64], reply[512], token[CUTS_SECRET_MAX], key[CUTS_SECRET_MAX];
	size_t key_len;
	/* --torn-pct of the cuts, spread evenly: 33 tears cuts 4, 7, 10, ... */
	int torn = cut * opt.torn_pct / 100 != (cut - 1) * opt.torn_pct / 100, r = -1;
	int64_t t0;

	kill_appliance();
	strace_stop();
	placers_cut(1);
	t0 = now_ms();
	if (snap_take(soak.db, &before) != 0) {
		fail("cut %ld: cannot read the database before the cut: %s", cut, before.err);
		snap_free(&before);
		return -1;
	}
	if (torn)
		snprintf(cmd, sizeof cmd, "cut torn %" PRIu64, rng_below(UINT64_MAX));
	else
		snprintf(cmd, sizeof cmd, "cut");
	if (pc_ctl(cmd, reply, sizeof reply) != 0) {
		fail("cut %ld: powercut %s: %s", cut, cmd, reply);
		goto out;
	}
	C.cuts++;
	C.torn += torn;
	C.bytes_dropped += reply_num(reply, "dropped=");
	C.sectors_applied += reply_num(reply, "applied=");
	C.sectors_dirty += reply_num(reply, "sectors=");
	C.undone += reply_num(reply, "undone=");
	if (reply_num(reply, "failed=") != 0)
		fail("cut %ld: powercut could not undo everything: %s", cut, reply);
	if (pc_stop() != 0 || pc_start() != 0)
		goto out;
	C.remounts++;
	snap_take(soak.db, &after);
	r = snap_judge(cut, &before, &after);
	if (secrets_read(token, key, &key_len) != 0)
		r = -1;
	else if (strcmp(token, C.token) != 0 || key_len != C.key_len ||
		 memcmp(key, C.key, key_len) != 0) {
		fail("cut %ld: api.token or ticket.key is not what it was", cut);
		r = -1;
	}
	if (opt.backups && backups_judge(cut) != 0)
		r = -1;
	say("cut %ld (%s): %s", cut, torn ? "torn" : "clean", reply + 3);
	snap_free(&after);
	if (r == 0 && (r = box_start()) == 0)
		C.boot_ms_total += now_ms() - t0;
out:
	snap_free(&before);
	return r;
}

/* ======================== the interface ================================= */

int cuts_mount(void)
{
	snprintf(C.disk, sizeof C.disk, "%s/" CHAOS_CUTS_DISK, soak.dir);
	snprintf(C.mnt, sizeof C.mnt, "%s/" CHAOS_CUTS_MOUNT, soak.dir);
	snprintf(C.sock, sizeof C.sock, "%s/powercut.sock", soak.dir);
	snprintf(C.pclog, sizeof C.pclog, "%s/powercut.log", soak.dir);
	snprintf(C.disk_db, sizeof C.disk_db, "%s/stagedoor.db", C.disk);
	snprintf(soak.db, sizeof soak.db, "%s/stagedoor.db", C.mnt);
	if (!(C.acked = calloc((size_t)opt.orders, 1))) {
		fail("setup: out of memory");
		return -1;
	}
	for (int i = 0; i < CUTS_PLACERS; i++)
		C.p[i].idx = -1;
	if ((mkdir(C.disk, 0700) != 0 && errno != EEXIST) ||
	    (mkdir(C.mnt, 0700) != 0 && errno != EEXIST)) {
		fail("setup: mkdir %s: %s", C.disk, strerror(errno));
		return -1;
	}
	return pc_start();
}

int cuts_attack(void)
{
	long cut;

	if (secrets_read(C.token, C.key, &C.key_len) != 0 || box_start() != 0)
		return -1;
	/* the mean of the plan below, for order_due */
	C.up_expect_ms = opt.cuts * (200 * 1 + (300 + opt.up_max_ms) / 2 * 9) / 10;
	for (cut = 1; cut <= opt.cuts; cut++) {
		/* one cut in ten while the box is starting (recovery, the first
		 * claims), the rest while it works */
		int64_t up = rng_below(10) == 0 ? (int64_t)rng_below(400)
						: 300 + (int64_t)rng_below((uint64_t)opt.up_max_ms - 299);

		if (box_work(up) != 0 || cut_once(cut) != 0)
			return -1;
	}
	while (orders_pending() && !chaos_interrupted) {
		if (box_work(100) != 0)
			return -1;
	}
	return chaos_interrupted ? -1 : 0;
}

int cuts_unmount(void)
{
	return pc_stop();
}

void cuts_disk_db(char *buf, size_t size)
{
	snprintf(buf, size, "%s", C.disk_db);
}

void cuts_cleanup(void)
{
	strace_stop();
	placers_cut(1);
	if (C.pc)
		pc_stop();
}

long cuts_orders_placed(void)
{
	long i, n = 0;

	for (i = 0; i < opt.orders && C.acked; i++)
		n += C.acked[i];
	return n;
}

void cuts_print_figures(void)
{
	printf("power_cuts %ld\n", C.cuts);
	printf("slow_fsync_ms %ld\n", opt.slow_fsync_ms);
	printf("torn_cuts %ld\n", C.torn);
	printf("orders_acknowledged %ld\n", C.acked_cli + C.acked_api);
	printf("orders_acknowledged_cli %ld\n", C.acked_cli);
	printf("orders_acknowledged_api %ld\n", C.acked_api);
	printf("orders_refused_retried %ld\n", C.refused);
	printf("acknowledged_lost %ld\n", C.lost_acked);
	printf("orders_lost_by_cuts %ld\n", C.lost_orders);
	printf("in_flight_orders_lost_by_cuts %ld\n", C.lost_in_flight);
	printf("done_jobs_lost_by_cuts %ld\n", C.lost_done);
	printf("sent_marks_lost_by_cuts %ld\n", C.lost_sent);
	printf("corrupt_databases %ld\n", C.corrupt);
	printf("dirty_bytes_dropped %" PRIu64 "\n", C.bytes_dropped);
	printf("torn_sectors_applied %" PRIu64 "\n", C.sectors_applied);
	printf("torn_sectors_dirty %" PRIu64 "\n", C.sectors_dirty);
	printf("names_undone %" PRIu64 "\n", C.undone);
	if (opt.backups) {
		printf("backups_verified %ld\n", C.backups_verified);
		printf("backups_partial_seen %ld\n", C.backups_partial);
	}
	printf("restart_refusals %ld\n", soak.restart_refusals);
	printf("cut_to_running_ms_mean %.0f\n",
	       C.remounts ? (double)C.boot_ms_total / (double)C.remounts : 0.0);
}
