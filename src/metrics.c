/*
 * metrics.c: the shared counter file (see metrics.h).
 *
 * Layout: a header (magic, size, the database file's device and inode) and
 * fixed rows of _Atomic uint64_t, mapped MAP_SHARED by every process; on
 * x86-64 and arm64 these atomics are lock-free and so work across processes.
 * The header is checked, and the file made or started again, under an
 * flock; after that the counters take only relaxed atomic adds.  The file is
 * never shrunk or truncated while mapped (another process's access past its
 * end would fault): a bad header is mended by writing zeros through the map.
 * A kind's row is named once, under the same flock (and a mutex, for the
 * threads that share one handle), and published by a release store of its
 * state that readers load with acquire.
 */
#define _GNU_SOURCE
#include "metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>


#define METRICS_MAGIC 0x31305254454d4453ull	/* "SDMETR01" */
#define METRICS_OTHER "(other)"			/* no kind can be named so */

const int64_t metrics_bounds_us[METRICS_BUCKETS] = {
	1000, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 60000000,
};
const char *const metrics_outcome_names[METRICS_OUTCOMES] = {
	"done", "retry_later", "failed", "failed_permanent",
};
const char *const metrics_technique_names[METRICS_TECHNIQUES] = {
	"check_state", "unique_claim", "provider_key", "processed_jobs",
};

struct shm_kind {
	_Atomic uint32_t named;			/* 1 once name is written */
	uint32_t pad;
	char name[72];
	_Atomic uint64_t runs[METRICS_OUTCOMES];
	_Atomic uint64_t buckets[METRICS_BUCKETS + 1];
	_Atomic uint64_t sum_us;
	_Atomic uint64_t stale;
};

struct shm {
	uint64_t magic;
	uint64_t size;
	uint64_t db_dev;
	uint64_t db_ino;
	_Atomic uint64_t duplicates[METRICS_TECHNIQUES];
	struct shm_kind kinds[METRICS_KINDS];
	struct shm_kind other;			/* kinds past the table */
};

_Static_assert(METRICS_KIND_MAX < sizeof ((struct shm_kind *)0)->name, "kind name fits");

struct metrics {
	int fd;
	struct shm *s;
	pthread_mutex_t name_mu;	/* flock excludes other open files, not the
					 * threads sharing this one: naming takes both */
};

/* a box on a server's database keeps its counters in its state folder */
static char home[4096];

void metrics_home_set(const char *state_dir)
{
	snprintf(home, sizeof home, "%s", state_dir ? state_dir : "");
}

static int is_uri(const char *db_path)
{
	return strstr(db_path, "://") != NULL;
}

enum sd_result metrics_path(const char *db_path, char *buf, size_t size)
{
	int n;

	if (is_uri(db_path) && !home[0])
		return err_set(SD_INVALID, "metrics: a box on PostgreSQL keeps its counters in its "
			       "state_dir, which is not set");
	n = is_uri(db_path) ? snprintf(buf, size, "%s/metrics", home)
			    : snprintf(buf, size, "%s-metrics", db_path);

	if (n < 0 || (size_t)n >= size)
		return err_set(SD_INVALID, "database path too long: %.80s", db_path);
	return SD_OK;
}

/* Under the flock: a header that is not ours, or names another database,
 * means a fresh start. */
static void mend(struct shm *s, const struct stat *db)
{
	if (s->magic == METRICS_MAGIC && s->size == sizeof *s &&
	    s->db_dev == (uint64_t)db->st_dev && s->db_ino == (uint64_t)db->st_ino)
		return;
	memset(s, 0, sizeof *s);
	s->size = sizeof *s;
	s->db_dev = (uint64_t)db->st_dev;
	s->db_ino = (uint64_t)db->st_ino;
	snprintf(s->other.name, sizeof s->other.name, "%s", METRICS_OTHER);
	atomic_store_explicit(&s->other.named, 1, memory_order_release);
	s->magic = METRICS_MAGIC;
}

enum sd_result metrics_open(const char *db_path, struct metrics **out)
{
	char path[4096];
	struct metrics *m;
	struct stat db, st;
	enum sd_result r;
	void *p;
	int fd, e;

	*out = NULL;
	if ((r = metrics_path(db_path, path, sizeof path)) != SD_OK)
		return r;
	/* the file names what it counts for: the database file, or the box's
	 * state folder */
	if (stat(is_uri(db_path) ? home : db_path, &db) != 0)
		return err_set(SD_IO, "metrics: %s: %s", is_uri(db_path) ? home : db_path,
			       strerror(errno));
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return err_set(SD_IO, "metrics: cannot open %s: %s", path, strerror(errno));
	if (flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0) {
		r = err_set(SD_IO, "metrics: %s: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(SD_IO, "metrics: %s is not a regular file", path);
	}
	/* blocks allocated now: a write through the map to a hole on a full
	 * disk would be a SIGBUS, not an error */
	if ((e = posix_fallocate(fd, 0, sizeof(struct shm))) != 0) {
		r = err_set(SD_IO, "metrics: cannot size %s: %s", path, strerror(e));
		close(fd);
		return r;
	}
	p = mmap(NULL, sizeof(struct shm), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		r = err_set(SD_IO, "metrics: cannot map %s: %s", path, strerror(errno));
		close(fd);
		return r;
	}
	mend(p, &db);
	flock(fd, LOCK_UN);
	if (!(m = malloc(sizeof *m))) {
		munmap(p, sizeof(struct shm));
		close(fd);
		return err_set(SD_NOMEM, "out of memory");
	}
	m->fd = fd;
	m->s = p;
	pthread_mutex_init(&m->name_mu, NULL);
	*out = m;
	return SD_OK;
}

void metrics_close(struct metrics *m)
{
	if (!m)
		return;
	munmap(m->s, sizeof *m->s);
	close(m->fd);
	pthread_mutex_destroy(&m->name_mu);
	free(m);
}

static struct shm_kind *find_kind(struct shm *s, const char *kind)
{
	int i;

	for (i = 0; i < METRICS_KINDS; i++) {
		struct shm_kind *k = &s->kinds[i];
		if (!atomic_load_explicit(&k->named, memory_order_acquire))
			return NULL;	/* rows are named in order */
		if (strncmp(k->name, kind, sizeof k->name) == 0)
			return k;
	}
	return NULL;
}

/* The row of kind: found, else named under the flock, else "(other)". */
static struct shm_kind *kind_row(struct metrics *m, const char *kind)
{
	struct shm_kind *k;
	int i;

	if (strlen(kind) > METRICS_KIND_MAX)
		return &m->s->other;
	if ((k = find_kind(m->s, kind)))
		return k;
	pthread_mutex_lock(&m->name_mu);
	if (flock(m->fd, LOCK_EX) != 0) {
		pthread_mutex_unlock(&m->name_mu);
		return &m->s->other;
	}
	if (!(k = find_kind(m->s, kind))) {
		for (i = 0; i < METRICS_KINDS; i++)
			if (!atomic_load_explicit(&m->s->kinds[i].named, memory_order_relaxed))
				break;
		k = i < METRICS_KINDS ? &m->s->kinds[i] : &m->s->other;
		if (i < METRICS_KINDS) {
			snprintf(k->name, sizeof k->name, "%s", kind);
			atomic_store_explicit(&k->named, 1, memory_order_release);
		}
	}
	flock(m->fd, LOCK_UN);
	pthread_mutex_unlock(&m->name_mu);
	return k;
}

static void add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

void metrics_run(struct metrics *m, const char *kind, enum metrics_outcome o,
		 int64_t duration_us)
{
	struct shm_kind *k;
	int b;

	if (!m || (unsigned)o >= METRICS_OUTCOMES)
		return;
	if (duration_us < 0)
		duration_us = 0;
	k = kind_row(m, kind);
	for (b = 0; b < METRICS_BUCKETS && duration_us > metrics_bounds_us[b]; b++)
		;
	add(&k->runs[o], 1);
	add(&k->buckets[b], 1);
	add(&k->sum_us, (uint64_t)duration_us);
}

void metrics_stale(struct metrics *m, const char *kind)
{
	if (m)
		add(&kind_row(m, kind)->stale, 1);
}

void metrics_duplicate(struct metrics *m, enum metrics_technique t)
{
	if (m && (unsigned)t < METRICS_TECHNIQUES)
		add(&m->s->duplicates[t], 1);
}

static uint64_t load(const _Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

static void read_kind(const struct shm_kind *k, struct metrics_kind_counts *out)
{
	int i;

	snprintf(out->kind, sizeof out->kind, "%.*s", METRICS_KIND_MAX, k->name);
	for (i = 0; i < METRICS_OUTCOMES; i++)
		out->runs[i] = load(&k->runs[i]);
	for (i = 0; i <= METRICS_BUCKETS; i++)
		out->buckets[i] = load(&k->buckets[i]);
	out->sum_us = load(&k->sum_us);
	out->stale = load(&k->stale);
}

void metrics_read(const struct metrics *m, struct metrics_snapshot *out)
{
	struct metrics_kind_counts other;
	int i, any = 0;

	memset(out, 0, sizeof *out);
	if (!m)
		return;
	for (i = 0; i < METRICS_TECHNIQUES; i++)
		out->duplicates[i] = load(&m->s->duplicates[i]);
	for (i = 0; i < METRICS_KINDS; i++) {
		if (!atomic_load_explicit(&m->s->kinds[i].named, memory_order_acquire))
			break;
		read_kind(&m->s->kinds[i], &out->kinds[out->n_kinds++]);
	}
	/* "(other)" only once the table is full and it counted something */
	read_kind(&m->s->other, &other);
	for (i = 0; i < METRICS_OUTCOMES; i++)
		any |= other.runs[i] != 0;
	if (any || other.stale)
		out->kinds[out->n_kinds++] = other;
}

void metrics_prom_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fputc('\\', f);
		if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void kind_label(FILE *f, const char *metric, const char *kind)
{
	fprintf(f, "%s{kind=\"", metric);
	metrics_prom_label(f, kind);
	fputc('"', f);
}

void metrics_write_prom(FILE *f, const struct metrics_snapshot *s)
{
	int i, o, b;

	fputs("# HELP stagedoor_handler_runs_total Handler runs, by kind and what the handler "
	      "returned.\n# TYPE stagedoor_handler_runs_total counter\n", f);
	for (i = 0; i < s->n_kinds; i++)
		for (o = 0; o < METRICS_OUTCOMES; o++) {
			kind_label(f, "stagedoor_handler_runs_total", s->kinds[i].kind);
			fprintf(f, ",outcome=\"%s\"} %llu\n", metrics_outcome_names[o],
				(unsigned long long)s->kinds[i].runs[o]);
		}
	fputs("# HELP stagedoor_handler_duration_seconds How long handler runs took, by kind.\n"
	      "# TYPE stagedoor_handler_duration_seconds histogram\n", f);
	for (i = 0; i < s->n_kinds; i++) {
		const struct metrics_kind_counts *k = &s->kinds[i];
		uint64_t cum = 0;

		for (b = 0; b <= METRICS_BUCKETS; b++) {
			cum += k->buckets[b];
			kind_label(f, "stagedoor_handler_duration_seconds_bucket", k->kind);
			if (b < METRICS_BUCKETS)
				fprintf(f, ",le=\"%g\"} %llu\n", (double)metrics_bounds_us[b] / 1e6,
					(unsigned long long)cum);
			else
				fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
		}
		kind_label(f, "stagedoor_handler_duration_seconds_sum", k->kind);
		fprintf(f, "} %.6f\n", (double)k->sum_us / 1e6);
		kind_label(f, "stagedoor_handler_duration_seconds_count", k->kind);
		fprintf(f, "} %llu\n", (unsigned long long)cum);
	}
	fputs("# HELP stagedoor_stale_acks_total Results not recorded because the job's lease "
	      "had been lost (the job runs again).\n"
	      "# TYPE stagedoor_stale_acks_total counter\n", f);
	for (i = 0; i < s->n_kinds; i++) {
		kind_label(f, "stagedoor_stale_acks_total", s->kinds[i].kind);
		fprintf(f, "} %llu\n", (unsigned long long)s->kinds[i].stale);
	}
	fputs("# HELP stagedoor_duplicates_absorbed_total Duplicate runs that had no second "
	      "effect, by the technique that absorbed them.\n"
	      "# TYPE stagedoor_duplicates_absorbed_total counter\n", f);
	for (i = 0; i < METRICS_TECHNIQUES; i++)
		fprintf(f, "stagedoor_duplicates_absorbed_total{technique=\"%s\"} %llu\n",
			metrics_technique_names[i], (unsigned long long)s->duplicates[i]);
}
