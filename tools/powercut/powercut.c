/*
 * powercut: a passthrough FUSE filesystem that behaves like a disk with a
 * volatile write cache, and can lose that cache on command.
 *
 *   powercut BACKING_DIR MOUNTPOINT [options]     the daemon
 *   powercut --ctl SOCKET COMMAND [ARG...]         one control command
 *
 * The rules (README.md beside this file says the same for users):
 *
 *  - File data written through the mount stays in memory: a per-inode table
 *    of dirty 4 KiB pages (one dirty bit per 512-byte sector), the logical
 *    size, and the smallest size the file had since its last sync ("trunc":
 *    backing bytes at or past it read as zeros).  fsync/fdatasync of the file
 *    applies it to the backing file (truncate to trunc, write the pages,
 *    truncate to the size, set the mtime) and then fdatasyncs (fsyncs) it.
 *
 *  - Namespace changes (create, mknod, mkdir, symlink, link, unlink, rmdir,
 *    rename) are applied to the backing directory at once and kept in a log.
 *    A change becomes durable when the directory it belongs to is fsynced:
 *    the parent for create/mknod/mkdir/symlink/link/unlink/rmdir, the
 *    destination directory for rename.  A change made durable also makes
 *    durable every earlier change it depends on (one on the same directory
 *    entry, or on an entry inside a directory that it removes), so the
 *    backing tree never holds a durable change on top of an undone one.  Unlinked and replaced names are moved to
 *    BACKING_DIR/.powercut-stash (hidden from the mount) and really removed
 *    once their change is durable.
 *
 *  - cut (SIGUSR1, or "cut" on the control socket) drops every dirty sector
 *    and undoes every non-durable namespace change, newest first.  cut torn
 *    (SIGUSR2, "cut torn") first writes a random prefix of the shuffled list
 *    of all dirty sectors to the backing files.  From then on every request
 *    fails with EIO and the backing directory is not touched again; the
 *    daemon stays mounted until it is unmounted (fusermount3 -u) unless
 *    --exit-on-cut is given.
 *
 *  - An unmount without a cut is a clean shutdown: all dirty data is written
 *    and synced and every pending namespace change is made durable.
 *
 *  - File metadata (chmod, chown, utimens) is passed through and durable at
 *    once.  POSIX and flock locks are left to the kernel (no lock ops).
 */
#define _GNU_SOURCE
#define FUSE_USE_VERSION 34

#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PC_PAGE 4096
#define PC_SECTOR 512
#define PC_SECTORS (PC_PAGE / PC_SECTOR)
#define PC_STASH ".powercut-stash"
#define PC_NO_LIMIT UINT64_MAX

struct page {
	uint64_t idx;
	uint8_t dirty; /* one bit per sector */
	unsigned char data[PC_PAGE];
};

/* open addressing, linear probing, power-of-two capacity */
struct ptab {
	struct page **slot;
	size_t cap, n;
};

struct inode {
	struct inode *hnext;
	dev_t dev;
	ino_t ino;
	mode_t type;
	int pfd; /* O_PATH */
	int dfd; /* read-write (or read-only) data fd of a regular file, or -1 */
	uint64_t nlookup;
	unsigned refs;	  /* change records naming it */
	unsigned stashed; /* its names in the stash */
	int dirty;	  /* size, trunc and pages below are in force */
	off_t size, trunc;
	struct ptab pages;
	uint64_t dirty_sectors;
	int mtime_set;
	struct timespec mtime;
};

enum ckind { C_CREATE, C_LINK, C_UNLINK, C_RENAME };

struct change {
	enum ckind kind;
	struct inode *p1, *p2; /* parent (rename: source, destination) */
	char *n1, *n2;
	struct inode *obj;  /* the inode created, linked, unlinked or moved */
	struct inode *repl; /* rename: the inode it replaced, or NULL */
	char sname[32];	    /* unlink, rename with repl: name in the stash */
	int isdir;	    /* obj (unlink, create) or repl (rename) is a dir */
	int mark;
};

struct dirh {
	DIR *dp;
	off_t off;
	struct dirent *ent;
};

static struct {
	pthread_mutex_t lock;
	struct fuse_session *se;
	struct inode root;
	struct inode **htab;
	size_t hcap, hn;
	int stashfd;
	uint64_t stash_seq;
	struct change **log;
	size_t nlog, caplog;
	int dead;
	uint64_t seed, rng;
	int seed_given;
	/* faults */
	uint64_t eio_every, eio_count;
	uint64_t enospc_limit, accepted;
	uint64_t n_writes, n_eio, n_enospc;
	int no_fallocate, exit_on_cut, is_root;
	double timeout;
	const char *backing, *mountpoint, *control;
	int stop_pipe[2];
	int cuts;
} G;

/* ---------------------------------------------------------------- utils */

static void say(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("powercut: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fflush(stderr);
}

static uint64_t rng_next(void)
{
	uint64_t z = (G.rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [0, n) for n > 0 */
static uint64_t rng_below(uint64_t n)
{
	uint64_t lim = UINT64_MAX - UINT64_MAX % n, r;

	do
		r = rng_next();
	while (r >= lim);
	return r % n;
}

static void procpath(char *buf, size_t n, int fd)
{
	snprintf(buf, n, "/proc/self/fd/%d", fd);
}

static int pwrite_all(int fd, const void *buf, size_t len, off_t off)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = pwrite(fd, p, len, off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return errno;
		if (w == 0)
			return EIO;
		p += w;
		len -= (size_t)w;
		off += w;
	}
	return 0;
}

/* read [off, off+len) of the backing file, zeros past its end */
static int pread_full(int fd, char *buf, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t r = pread(fd, buf, len, off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return errno;
		if (r == 0) {
			memset(buf, 0, len);
			return 0;
		}
		buf += r;
		len -= (size_t)r;
		off += r;
	}
	return 0;
}

static int rm_rf_at(int at, const char *name)
{
	struct stat st;
	int err = 0;

	if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno;
	if (S_ISDIR(st.st_mode)) {
		int fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		DIR *dp;
		struct dirent *de;

		if (fd < 0)
			return errno;
		if (!(dp = fdopendir(fd))) {
			close(fd);
			return errno;
		}
		while ((de = readdir(dp))) {
			if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
				continue;
			if (rm_rf_at(dirfd(dp), de->d_name) != 0)
				err = EIO;
		}
		closedir(dp);
		if (unlinkat(at, name, AT_REMOVEDIR) != 0)
			err = errno;
	} else if (unlinkat(at, name, 0) != 0) {
		err = errno;
	}
	return err;
}

/* --------------------------------------------------------------- inodes */

static fuse_ino_t nodeid(struct inode *in)
{
	return in == &G.root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)in;
}

static struct inode *I(fuse_ino_t ino)
{
	return ino == FUSE_ROOT_ID ? &G.root : (struct inode *)(uintptr_t)ino;
}

static size_t hslot(dev_t dev, ino_t ino)
{
	uint64_t h = ((uint64_t)ino * 0x9e3779b97f4a7c15ull) ^ (uint64_t)dev;

	return (size_t)(h ^ (h >> 29)) & (G.hcap - 1);
}

static struct inode *ifind(dev_t dev, ino_t ino)
{
	struct inode *in;

	for (in = G.htab[hslot(dev, ino)]; in; in = in->hnext)
		if (in->dev == dev && in->ino == ino)
			return in;
	return NULL;
}

static int hinsert(struct inode *in)
{
	if (G.hn + 1 > G.hcap) {
		size_t oldcap = G.hcap, i;
		struct inode **old = G.htab, **nt = calloc(oldcap * 2, sizeof *nt);

		if (!nt)
			return ENOMEM;
		G.htab = nt;
		G.hcap = oldcap * 2;
		for (i = 0; i < oldcap; i++) {
			struct inode *p = old[i], *next;

			for (; p; p = next) {
				size_t s = hslot(p->dev, p->ino);

				next = p->hnext;
				p->hnext = G.htab[s];
				G.htab[s] = p;
			}
		}
		free(old);
	}
	size_t s = hslot(in->dev, in->ino);

	in->hnext = G.htab[s];
	G.htab[s] = in;
	G.hn++;
	return 0;
}

static void hremove(struct inode *in)
{
	struct inode **pp = &G.htab[hslot(in->dev, in->ino)];

	for (; *pp; pp = &(*pp)->hnext)
		if (*pp == in) {
			*pp = in->hnext;
			G.hn--;
			return;
		}
}

static void pages_free(struct inode *in)
{
	size_t i;

	for (i = 0; i < in->pages.cap; i++)
		free(in->pages.slot[i]);
	free(in->pages.slot);
	memset(&in->pages, 0, sizeof in->pages);
	in->dirty_sectors = 0;
}

static void state_drop(struct inode *in)
{
	pages_free(in);
	in->dirty = 0;
	in->mtime_set = 0;
}

static void maybe_free(struct inode *in)
{
	if (in == &G.root || G.dead || in->nlookup || in->refs || in->dirty)
		return;
	hremove(in);
	if (in->dfd >= 0)
		close(in->dfd);
	close(in->pfd);
	pages_free(in);
	free(in);
}

/* the inode for an O_PATH fd, made if new; takes the fd (closes it if the
 * inode was known) */
static int inode_of(int pfd, struct stat *st, struct inode **out)
{
	struct inode *in;

	if (fstatat(pfd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0) {
		int e = errno;

		close(pfd);
		return e;
	}
	if ((in = ifind(st->st_dev, st->st_ino))) {
		close(pfd);
		*out = in;
		return 0;
	}
	if (!(in = calloc(1, sizeof *in))) {
		close(pfd);
		return ENOMEM;
	}
	in->dev = st->st_dev;
	in->ino = st->st_ino;
	in->type = st->st_mode & S_IFMT;
	in->pfd = pfd;
	in->dfd = -1;
	if (hinsert(in) != 0) {
		close(pfd);
		free(in);
		return ENOMEM;
	}
	*out = in;
	return 0;
}

static int inode_at(struct inode *dir, const char *name, struct stat *st, struct inode **out)
{
	int fd = openat(dir->pfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);

	if (fd < 0)
		return errno;
	return inode_of(fd, st, out);
}

static int ensure_dfd(struct inode *in)
{
	char p[64];

	if (in->dfd >= 0)
		return 0;
	if (in->type != S_IFREG)
		return EINVAL;
	procpath(p, sizeof p, in->pfd);
	in->dfd = open(p, O_RDWR | O_CLOEXEC);
	if (in->dfd < 0)
		in->dfd = open(p, O_RDONLY | O_CLOEXEC);
	return in->dfd < 0 ? errno : 0;
}

/* what stat through the mount shows */
static void fix_attr(struct inode *in, struct stat *st)
{
	if (in->dirty) {
		blkcnt_t b = (blkcnt_t)((in->size + 511) / 512);

		st->st_size = in->size;
		if (st->st_blocks < b)
			st->st_blocks = b;
	}
	if (in->mtime_set) {
		st->st_mtim = in->mtime;
		st->st_ctim = in->mtime;
	}
	if (st->st_nlink >= in->stashed)
		st->st_nlink -= in->stashed;
	if (in == &G.root && st->st_nlink > 0)
		st->st_nlink--; /* the stash folder */
}

static int getattr_of(struct inode *in, struct stat *st)
{
	if (fstatat(in->pfd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
		return errno;
	fix_attr(in, st);
	return 0;
}

static int is_stash(struct inode *dir, const char *name)
{
	return dir == &G.root && !strcmp(name, PC_STASH);
}

static int entry_reply_prep(struct inode *dir, const char *name, struct fuse_entry_param *e,
			    struct inode **out)
{
	struct inode *in;
	int err;

	memset(e, 0, sizeof *e);
	if (is_stash(dir, name))
		return ENOENT;
	if ((err = inode_at(dir, name, &e->attr, &in)) != 0)
		return err;
	fix_attr(in, &e->attr);
	e->ino = nodeid(in);
	e->attr_timeout = G.timeout;
	e->entry_timeout = G.timeout;
	if (out)
		*out = in;
	return 0;
}

/* ------------------------------------------------------------ page cache */

static struct page *pfind(struct inode *in, uint64_t idx)
{
	size_t m, i;

	if (!in->pages.cap)
		return NULL;
	m = in->pages.cap - 1;
	for (i = (size_t)(idx * 0x9e3779b97f4a7c15ull >> 17) & m; in->pages.slot[i]; i = (i + 1) & m)
		if (in->pages.slot[i]->idx == idx)
			return in->pages.slot[i];
	return NULL;
}

static void pput(struct ptab *t, struct page *p)
{
	size_t m = t->cap - 1, i;

	for (i = (size_t)(p->idx * 0x9e3779b97f4a7c15ull >> 17) & m; t->slot[i]; i = (i + 1) & m)
		;
	t->slot[i] = p;
	t->n++;
}

/* a table without the pages at or past page index keep (those are freed) */
static int ptab_rebuild(struct inode *in, size_t cap, uint64_t keep)
{
	struct ptab nt = {calloc(cap, sizeof(struct page *)), cap, 0};
	size_t i;

	if (!nt.slot)
		return ENOMEM;
	for (i = 0; i < in->pages.cap; i++) {
		struct page *p = in->pages.slot[i];

		if (!p)
			continue;
		if (p->idx < keep) {
			pput(&nt, p);
		} else {
			in->dirty_sectors -= (uint64_t)__builtin_popcount(p->dirty);
			free(p);
		}
	}
	free(in->pages.slot);
	in->pages = nt;
	return 0;
}

/* the logical content of [off, off+len) for bytes not in a dirty page */
static int base_read(struct inode *in, char *buf, size_t len, off_t off)
{
	off_t end = off + (off_t)len;
	int err;

	if (!in->dirty)
		return pread_full(in->dfd, buf, len, off);
	if (off >= in->trunc) {
		memset(buf, 0, len);
		return 0;
	}
	if (end > in->trunc) {
		size_t n = (size_t)(in->trunc - off);

		memset(buf + n, 0, len - n);
		len = n;
	}
	err = pread_full(in->dfd, buf, len, off);
	return err;
}

static int state_init(struct inode *in)
{
	struct stat st;
	int err;

	if (in->dirty)
		return 0;
	if ((err = ensure_dfd(in)) != 0)
		return err;
	if (fstat(in->dfd, &st) != 0)
		return errno;
	in->size = in->trunc = st.st_size;
	in->dirty = 1;
	return 0;
}

static int page_get(struct inode *in, uint64_t idx, struct page **out)
{
	struct page *p = pfind(in, idx);
	int err;

	if (p) {
		*out = p;
		return 0;
	}
	if ((in->pages.n + 1) * 2 > in->pages.cap) {
		size_t cap = in->pages.cap ? in->pages.cap * 2 : 16;

		if ((err = ptab_rebuild(in, cap, UINT64_MAX)) != 0)
			return err;
	}
	if (!(p = malloc(sizeof *p)))
		return ENOMEM;
	p->idx = idx;
	p->dirty = 0;
	if ((err = base_read(in, (char *)p->data, PC_PAGE, (off_t)(idx * PC_PAGE))) != 0) {
		free(p);
		return err;
	}
	pput(&in->pages, p);
	*out = p;
	return 0;
}

static int data_read(struct inode *in, char *buf, size_t len, off_t off, size_t *got)
{
	off_t size, end;
	int err;

	*got = 0;
	if ((err = ensure_dfd(in)) != 0)
		return err;
	if (!in->dirty) {
		ssize_t r;

		do
			r = pread(in->dfd, buf, len, off);
		while (r < 0 && errno == EINTR);
		if (r < 0)
			return errno;
		*got = (size_t)r;
		return 0;
	}
	size = in->size;
	if (off >= size)
		return 0;
	end = off + (off_t)len > size ? size : off + (off_t)len;
	len = (size_t)(end - off);
	while (off < end) {
		uint64_t idx = (uint64_t)off / PC_PAGE;
		size_t po = (size_t)(off % PC_PAGE), n = PC_PAGE - po;
		struct page *p;

		if ((off_t)n > end - off)
			n = (size_t)(end - off);
		if ((p = pfind(in, idx)))
			memcpy(buf, p->data + po, n);
		else if ((err = base_read(in, buf, n, off)) != 0)
			return err;
		buf += n;
		off += (off_t)n;
	}
	*got = len;
	return 0;
}

static void touch_mtime(struct inode *in)
{
	clock_gettime(CLOCK_REALTIME, &in->mtime);
	in->mtime_set = 1;
}

static int data_write(struct inode *in, const char *buf, size_t len, off_t off)
{
	off_t end = off + (off_t)len;
	int err;

	if ((err = state_init(in)) != 0)
		return err;
	while (off < end) {
		uint64_t idx = (uint64_t)off / PC_PAGE;
		size_t po = (size_t)(off % PC_PAGE), n = PC_PAGE - po;
		unsigned s, s0, s1;
		struct page *p;

		if ((off_t)n > end - off)
			n = (size_t)(end - off);
		if ((err = page_get(in, idx, &p)) != 0)
			return err;
		memcpy(p->data + po, buf, n);
		s0 = (unsigned)(po / PC_SECTOR);
		s1 = (unsigned)((po + n - 1) / PC_SECTOR);
		for (s = s0; s <= s1; s++)
			if (!(p->dirty & (1u << s))) {
				p->dirty |= (uint8_t)(1u << s);
				in->dirty_sectors++;
			}
		buf += n;
		off += (off_t)n;
		if (off > in->size)
			in->size = off;
	}
	touch_mtime(in);
	return 0;
}

static int data_truncate(struct inode *in, off_t size)
{
	int err;

	if ((err = state_init(in)) != 0)
		return err;
	if (size < in->size) {
		uint64_t keep = ((uint64_t)size + PC_PAGE - 1) / PC_PAGE;
		struct page *p;

		if (in->pages.cap && (err = ptab_rebuild(in, in->pages.cap, keep)) != 0)
			return err;
		if (size % PC_PAGE && (p = pfind(in, (uint64_t)size / PC_PAGE))) {
			size_t po = (size_t)(size % PC_PAGE);
			unsigned s;

			memset(p->data + po, 0, PC_PAGE - po);
			for (s = (unsigned)((po + PC_SECTOR - 1) / PC_SECTOR); s < PC_SECTORS; s++)
				if (p->dirty & (1u << s)) {
					p->dirty &= (uint8_t) ~(1u << s);
					in->dirty_sectors--;
				}
		}
		if (size < in->trunc)
			in->trunc = size;
	}
	in->size = size;
	touch_mtime(in);
	return 0;
}

/* fsync: the dirty state onto the backing file, then the backing sync */
static int data_sync(struct inode *in, int datasync)
{
	size_t i;
	int err;

	if ((err = ensure_dfd(in)) != 0)
		return err;
	if (in->dirty) {
		if (ftruncate(in->dfd, in->trunc) != 0)
			return errno;
		for (i = 0; i < in->pages.cap; i++) {
			struct page *p = in->pages.slot[i];
			off_t off;
			size_t n;

			if (!p)
				continue;
			off = (off_t)(p->idx * PC_PAGE);
			if (off >= in->size)
				continue;
			n = in->size - off < PC_PAGE ? (size_t)(in->size - off) : PC_PAGE;
			if ((err = pwrite_all(in->dfd, p->data, n, off)) != 0)
				return err;
		}
		if (ftruncate(in->dfd, in->size) != 0)
			return errno;
		if (in->mtime_set) {
			struct timespec ts[2] = {{0, UTIME_OMIT}, in->mtime};

			futimens(in->dfd, ts);
		}
		state_drop(in);
	}
	if ((datasync ? fdatasync(in->dfd) : fsync(in->dfd)) != 0)
		return errno;
	return 0;
}

/* --------------------------------------------------------- namespace log */

static void cref(struct inode *in)
{
	if (in)
		in->refs++;
}

static void cunref(struct inode *in)
{
	if (in && in->refs && --in->refs == 0)
		maybe_free(in);
}

static int log_add(enum ckind kind, struct inode *p1, const char *n1, struct inode *p2,
		   const char *n2, struct inode *obj, struct inode *repl, const char *sname, int isdir)
{
	struct change *c = calloc(1, sizeof *c);

	if (!c)
		return ENOMEM;
	if (G.nlog == G.caplog) {
		size_t cap = G.caplog ? G.caplog * 2 : 64;
		struct change **nl = realloc(G.log, cap * sizeof *nl);

		if (!nl) {
			free(c);
			return ENOMEM;
		}
		G.log = nl;
		G.caplog = cap;
	}
	c->kind = kind;
	c->p1 = p1;
	c->p2 = p2;
	c->n1 = strdup(n1);
	c->n2 = n2 ? strdup(n2) : NULL;
	c->obj = obj;
	c->repl = repl;
	c->isdir = isdir;
	if (sname)
		snprintf(c->sname, sizeof c->sname, "%s", sname);
	cref(p1);
	cref(p2);
	cref(obj);
	cref(repl);
	G.log[G.nlog++] = c;
	return 0;
}

static void change_free(struct change *c)
{
	cunref(c->p1);
	cunref(c->p2);
	cunref(c->obj);
	cunref(c->repl);
	free(c->n1);
	free(c->n2);
	free(c);
}

static struct inode *change_dir(const struct change *c)
{
	return c->kind == C_RENAME ? c->p2 : c->p1;
}

static int same_entry(struct inode *da, const char *na, struct inode *db, const char *nb)
{
	return da && db && da == db && na && nb && !strcmp(na, nb);
}

/* does the later change b rest on the earlier change a?  It does when
 * undoing a would touch a directory entry that b made or moved, or an entry
 * inside a directory that b removed. */
static int depends(const struct change *b, const struct change *a)
{
	struct inode *removed = NULL;

	if (same_entry(a->p1, a->n1, b->p1, b->n1) || same_entry(a->p1, a->n1, b->p2, b->n2) ||
	    same_entry(a->p2, a->n2, b->p1, b->n1) || same_entry(a->p2, a->n2, b->p2, b->n2))
		return 1;
	if (b->kind == C_UNLINK && b->isdir)
		removed = b->obj;
	else if (b->kind == C_RENAME && b->repl && b->isdir)
		removed = b->repl;
	return removed && (a->p1 == removed || a->p2 == removed);
}

/* the change is durable: what it removed goes for good */
static void change_commit(struct change *c)
{
	if (c->kind == C_UNLINK || (c->kind == C_RENAME && c->repl)) {
		struct inode *gone = c->kind == C_UNLINK ? c->obj : c->repl;

		if (unlinkat(G.stashfd, c->sname, c->isdir ? AT_REMOVEDIR : 0) != 0 && c->isdir)
			rm_rf_at(G.stashfd, c->sname);
		if (gone->stashed)
			gone->stashed--;
	}
	change_free(c);
}

/* fsync of dir: its changes and what they rest on become durable */
static void make_durable(struct inode *dir)
{
	size_t i, j, k;

	for (i = G.nlog; i-- > 0;) {
		struct change *c = G.log[i];

		c->mark = dir == NULL || change_dir(c) == dir;
		for (j = i + 1; !c->mark && j < G.nlog; j++)
			if (G.log[j]->mark && depends(G.log[j], c))
				c->mark = 1;
	}
	for (i = k = 0; i < G.nlog; i++) {
		if (G.log[i]->mark)
			change_commit(G.log[i]);
		else
			G.log[k++] = G.log[i];
	}
	G.nlog = k;
}

static int entry_is(struct inode *dir, const char *name, struct inode *in)
{
	struct stat st;

	return fstatat(dir->pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_dev == in->dev &&
	       st.st_ino == in->ino;
}

static int change_undo(struct change *c)
{
	switch (c->kind) {
	case C_CREATE:
	case C_LINK:
		if (!entry_is(c->p1, c->n1, c->obj))
			return ENOENT;
		if (c->kind == C_CREATE && c->isdir)
			return rm_rf_at(c->p1->pfd, c->n1);
		return unlinkat(c->p1->pfd, c->n1, 0) ? errno : 0;
	case C_UNLINK:
		if (renameat2(G.stashfd, c->sname, c->p1->pfd, c->n1, RENAME_NOREPLACE) != 0)
			return errno;
		c->obj->stashed--;
		return 0;
	case C_RENAME:
		if (!entry_is(c->p2, c->n2, c->obj))
			return ENOENT;
		if (renameat2(c->p2->pfd, c->n2, c->p1->pfd, c->n1, RENAME_NOREPLACE) != 0)
			return errno;
		if (c->repl) {
			if (renameat2(G.stashfd, c->sname, c->p2->pfd, c->n2, RENAME_NOREPLACE) != 0)
				return errno;
			c->repl->stashed--;
		}
		return 0;
	}
	return EINVAL;
}

static void stash_name(char *buf, size_t n)
{
	snprintf(buf, n, "%" PRIu64, ++G.stash_seq);
}

/* ------------------------------------------------------------ cut, sync */

struct sector {
	struct inode *in;
	struct page *p;
	unsigned s;
};

struct cut_result {
	uint64_t dropped, applied, total, undone, failed;
};

static void inodes_each(void (*fn)(struct inode *, void *), void *arg)
{
	size_t i;

	for (i = 0; i < G.hcap; i++) {
		struct inode *in, *next;

		for (in = G.htab[i]; in; in = next) {
			next = in->hnext;
			fn(in, arg);
		}
	}
}

static void count_sectors(struct inode *in, void *arg)
{
	*(uint64_t *)arg += in->dirty ? in->dirty_sectors : 0;
}

struct gather {
	struct sector *v;
	size_t n;
};

static void gather_sectors(struct inode *in, void *arg)
{
	struct gather *g = arg;
	size_t i;
	unsigned s;

	if (!in->dirty)
		return;
	for (i = 0; i < in->pages.cap; i++) {
		struct page *p = in->pages.slot[i];

		if (p)
			for (s = 0; s < PC_SECTORS; s++)
				if (p->dirty & (1u << s))
					g->v[g->n++] = (struct sector){in, p, s};
	}
}

static void drop_state(struct inode *in, void *arg)
{
	(void)arg;
	if (in->dirty)
		state_drop(in);
}

/* the cut itself, under the lock */
static void cut_locked(int torn, struct cut_result *r)
{
	uint64_t total = 0;

	memset(r, 0, sizeof *r);
	inodes_each(count_sectors, &total);
	r->total = total;
	if (torn && total) {
		struct gather g = {calloc((size_t)total, sizeof(struct sector)), 0};
		size_t i, k;

		if (g.v) {
			inodes_each(gather_sectors, &g);
			for (i = g.n; i > 1; i--) {
				size_t j = (size_t)rng_below(i);
				struct sector t = g.v[i - 1];

				g.v[i - 1] = g.v[j];
				g.v[j] = t;
			}
			k = (size_t)rng_below((uint64_t)g.n + 1);
			for (i = 0; i < k; i++) {
				struct sector *sp = &g.v[i];
				off_t off = (off_t)(sp->p->idx * PC_PAGE + sp->s * PC_SECTOR);
				size_t n = PC_SECTOR;

				if (off >= sp->in->size)
					continue;
				if (sp->in->size - off < PC_SECTOR)
					n = (size_t)(sp->in->size - off);
				if (pwrite_all(sp->in->dfd, sp->p->data + sp->s * PC_SECTOR, n, off) == 0)
					r->applied++;
			}
			free(g.v);
		}
	}
	r->dropped = (total - r->applied) * PC_SECTOR;
	inodes_each(drop_state, NULL);
	while (G.nlog > 0) {
		struct change *c = G.log[--G.nlog];

		if (change_undo(c) == 0)
			r->undone++;
		else
			r->failed++;
		change_free(c);
	}
	G.dead = 1;
}

struct idlist {
	fuse_ino_t *v;
	size_t n;
};

static void collect_id(struct inode *in, void *arg)
{
	struct idlist *l = arg;

	l->v[l->n++] = nodeid(in);
}

static void unmount_now(void)
{
	if (G.is_root) {
		umount2(G.mountpoint, MNT_DETACH);
		return;
	}
	pid_t pid = fork();

	if (pid == 0) {
		execlp("fusermount3", "fusermount3", "-u", "-z", G.mountpoint, (char *)NULL);
		_exit(127);
	}
	if (pid > 0)
		waitpid(pid, NULL, 0);
}

static void do_cut(int torn, char *reply, size_t rn)
{
	struct cut_result r;
	struct idlist ids = {NULL, 0};
	uint64_t seed;
	size_t i;

	pthread_mutex_lock(&G.lock);
	if (G.dead) {
		pthread_mutex_unlock(&G.lock);
		snprintf(reply, rn, "err already cut");
		return;
	}
	seed = G.seed + (uint64_t)G.cuts;
	G.rng = seed;
	G.cuts++;
	cut_locked(torn, &r);
	ids.v = calloc(G.hn + 1, sizeof *ids.v);
	if (ids.v)
		inodes_each(collect_id, &ids);
	pthread_mutex_unlock(&G.lock);

	if (torn)
		snprintf(reply, rn,
			 "ok cut torn seed=%" PRIu64 " dropped=%" PRIu64 " applied=%" PRIu64
			 " sectors=%" PRIu64 " undone=%" PRIu64 " failed=%" PRIu64,
			 seed, r.dropped, r.applied, r.total, r.undone, r.failed);
	else
		snprintf(reply, rn,
			 "ok cut clean dropped=%" PRIu64 " undone=%" PRIu64 " failed=%" PRIu64,
			 r.dropped, r.undone, r.failed);
	if (torn)
		say("cut torn (seed %" PRIu64 "): dropped %" PRIu64 " dirty bytes, applied %" PRIu64
		    " of %" PRIu64 " dirty sectors, undid %" PRIu64 " namespace changes (%" PRIu64
		    " failed)",
		    seed, r.dropped, r.applied, r.total, r.undone, r.failed);
	else
		say("cut clean: dropped %" PRIu64 " dirty bytes, undid %" PRIu64
		    " namespace changes (%" PRIu64 " failed)",
		    r.dropped, r.undone, r.failed);
	/* the kernel's cached pages and attributes go too: reads, stats and
	 * page faults now come here and fail */
	for (i = 0; ids.v && i < ids.n; i++)
		fuse_lowlevel_notify_inval_inode(G.se, ids.v[i], 0, 0);
	free(ids.v);
	if (G.exit_on_cut)
		unmount_now();
}

struct flush_result {
	uint64_t bytes, failed;
};

static void flush_one(struct inode *in, void *arg)
{
	struct flush_result *f = arg;

	if (in->type != S_IFREG || (!in->dirty && in->dfd < 0))
		return;
	if (in->dirty)
		f->bytes += in->dirty_sectors * PC_SECTOR;
	if (data_sync(in, 0) != 0)
		f->failed++;
	maybe_free(in);
}

/* a clean shutdown: every dirty byte written, every change durable */
static void flush_all_locked(struct flush_result *f, uint64_t *changes)
{
	memset(f, 0, sizeof *f);
	*changes = G.nlog;
	inodes_each(flush_one, f);
	make_durable(NULL);
	fsync(G.stashfd);
}

/* -------------------------------------------------------------- fuse ops */

#define LOCK() pthread_mutex_lock(&G.lock)
#define UNLOCK() pthread_mutex_unlock(&G.lock)
#define DEAD_CHECK()                                                                               \
	do {                                                                                       \
		if (G.dead) {                                                                      \
			UNLOCK();                                                                  \
			fuse_reply_err(req, EIO);                                                  \
			return;                                                                    \
		}                                                                                  \
	} while (0)

static void pc_init(void *ud, struct fuse_conn_info *conn)
{
	(void)ud;
	conn->want &= ~(unsigned)(FUSE_CAP_WRITEBACK_CACHE | FUSE_CAP_AUTO_INVAL_DATA |
				  FUSE_CAP_HANDLE_KILLPRIV);
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
}

static void pc_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fuse_entry_param e;
	struct inode *in;
	int err;

	LOCK();
	DEAD_CHECK();
	err = entry_reply_prep(I(parent), name, &e, &in);
	if (!err) {
		in->nlookup++;
		fuse_reply_entry(req, &e);
	} else {
		fuse_reply_err(req, err);
	}
	UNLOCK();
}

static void forget_one(fuse_ino_t ino, uint64_t n)
{
	struct inode *in = I(ino);

	in->nlookup = in->nlookup > n ? in->nlookup - n : 0;
	maybe_free(in);
}

static void pc_forget(fuse_req_t req, fuse_ino_t ino, uint64_t n)
{
	LOCK();
	forget_one(ino, n);
	UNLOCK();
	fuse_reply_none(req);
}

static void pc_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *f)
{
	size_t i;

	LOCK();
	for (i = 0; i < count; i++)
		forget_one(f[i].ino, f[i].nlookup);
	UNLOCK();
	fuse_reply_none(req);
}

static void pc_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct stat st;
	int err;

	(void)fi;
	LOCK();
	DEAD_CHECK();
	if ((err = getattr_of(I(ino), &st)) != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, G.timeout);
	UNLOCK();
}

static void pc_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
		       struct fuse_file_info *fi)
{
	struct inode *in = I(ino);
	char p[64];
	struct stat st;
	int err = 0;

	(void)fi;
	LOCK();
	DEAD_CHECK();
	procpath(p, sizeof p, in->pfd);
	if ((valid & FUSE_SET_ATTR_MODE) && chmod(p, attr->st_mode & 07777) != 0)
		err = errno;
	if (!err && (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		uid_t u = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t g = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;

		if (fchownat(in->pfd, "", u, g, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0)
			err = errno;
	}
	if (!err && (valid & FUSE_SET_ATTR_SIZE)) {
		if (in->type != S_IFREG)
			err = in->type == S_IFDIR ? EISDIR : EINVAL;
		else
			err = data_truncate(in, attr->st_size);
	}
	if (!err && (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME))) {
		struct timespec ts[2] = {{0, UTIME_OMIT}, {0, UTIME_OMIT}};

		if (valid & FUSE_SET_ATTR_ATIME)
			ts[0] = (valid & FUSE_SET_ATTR_ATIME_NOW) ? (struct timespec){0, UTIME_NOW}
								  : attr->st_atim;
		if (valid & FUSE_SET_ATTR_MTIME)
			ts[1] = (valid & FUSE_SET_ATTR_MTIME_NOW) ? (struct timespec){0, UTIME_NOW}
								  : attr->st_mtim;
		if (in->type == S_IFLNK) {
			err = 0; /* no way to set a symlink's times through its O_PATH fd */
		} else if (utimensat(AT_FDCWD, p, ts, 0) != 0) {
			err = errno;
		} else if ((valid & FUSE_SET_ATTR_MTIME) && in->mtime_set) {
			struct stat now;

			/* the backing mtime is what it should stay after a sync */
			if (stat(p, &now) == 0)
				in->mtime = now.st_mtim;
		}
	}
	if (err)
		fuse_reply_err(req, err);
	else if ((err = getattr_of(in, &st)) != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_attr(req, &st, G.timeout);
	UNLOCK();
}

static void pc_readlink(fuse_req_t req, fuse_ino_t ino)
{
	char buf[PATH_MAX + 1];
	ssize_t n;

	LOCK();
	DEAD_CHECK();
	n = readlinkat(I(ino)->pfd, "", buf, sizeof buf);
	if (n < 0) {
		fuse_reply_err(req, errno);
	} else if ((size_t)n >= sizeof buf) {
		fuse_reply_err(req, ENAMETOOLONG);
	} else {
		buf[n] = 0;
		fuse_reply_readlink(req, buf);
	}
	UNLOCK();
}

static void set_owner(struct inode *dir, const char *name, fuse_req_t req)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	struct stat ds;
	gid_t gid = ctx->gid;

	if (!G.is_root)
		return;
	if (fstatat(dir->pfd, "", &ds, AT_EMPTY_PATH) == 0 && (ds.st_mode & S_ISGID))
		gid = ds.st_gid;
	fchownat(dir->pfd, name, ctx->uid, gid, AT_SYMLINK_NOFOLLOW);
}

/* after mknod, mkdir, symlink: the entry, and its log record */
static void made_reply(fuse_req_t req, struct inode *dir, const char *name, int isdir)
{
	struct fuse_entry_param e;
	struct inode *in;
	int err;

	set_owner(dir, name, req);
	if ((err = entry_reply_prep(dir, name, &e, &in)) != 0 ||
	    (err = log_add(C_CREATE, dir, name, NULL, NULL, in, NULL, NULL, isdir)) != 0) {
		fuse_reply_err(req, err);
		return;
	}
	in->nlookup++;
	fuse_reply_entry(req, &e);
}

static void pc_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	struct inode *dir = I(parent);

	LOCK();
	DEAD_CHECK();
	if (is_stash(dir, name))
		fuse_reply_err(req, EPERM);
	else if (mknodat(dir->pfd, name, mode, rdev) != 0)
		fuse_reply_err(req, errno);
	else
		made_reply(req, dir, name, 0);
	UNLOCK();
}

static void pc_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct inode *dir = I(parent);

	LOCK();
	DEAD_CHECK();
	if (is_stash(dir, name))
		fuse_reply_err(req, EPERM);
	else if (mkdirat(dir->pfd, name, mode) != 0)
		fuse_reply_err(req, errno);
	else
		made_reply(req, dir, name, 1);
	UNLOCK();
}

static void pc_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	struct inode *dir = I(parent);

	LOCK();
	DEAD_CHECK();
	if (is_stash(dir, name))
		fuse_reply_err(req, EPERM);
	else if (symlinkat(link, dir->pfd, name) != 0)
		fuse_reply_err(req, errno);
	else
		made_reply(req, dir, name, 0);
	UNLOCK();
}

static void pc_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct inode *in = I(ino), *dir = I(newparent), *got;
	struct fuse_entry_param e;
	char p[64];
	int err;

	LOCK();
	DEAD_CHECK();
	procpath(p, sizeof p, in->pfd);
	if (is_stash(dir, newname))
		err = EPERM;
	else if (linkat(AT_FDCWD, p, dir->pfd, newname, AT_SYMLINK_FOLLOW) != 0)
		err = errno;
	else if ((err = entry_reply_prep(dir, newname, &e, &got)) == 0)
		err = log_add(C_LINK, dir, newname, NULL, NULL, got, NULL, NULL, 0);
	if (err) {
		fuse_reply_err(req, err);
	} else {
		got->nlookup++;
		fuse_reply_entry(req, &e);
	}
	UNLOCK();
}

static int dir_is_empty(struct inode *dir, const char *name)
{
	int fd = openat(dir->pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC), n = 0;
	struct dirent *de;
	DIR *dp;

	if (fd < 0)
		return -errno;
	if (!(dp = fdopendir(fd))) {
		close(fd);
		return -ENOMEM;
	}
	while ((de = readdir(dp)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(dp);
	return n == 0;
}

static int remove_entry(struct inode *dir, const char *name, int isdir)
{
	char sname[32];
	struct stat st;
	struct inode *in;
	int err;

	if (is_stash(dir, name))
		return ENOENT;
	if ((err = inode_at(dir, name, &st, &in)) != 0)
		return err;
	if (isdir && !S_ISDIR(st.st_mode))
		err = ENOTDIR;
	else if (!isdir && S_ISDIR(st.st_mode))
		err = EISDIR;
	else if (isdir && in == &G.root)
		err = EBUSY;
	if (!err && isdir) {
		int empty = dir_is_empty(dir, name);

		err = empty < 0 ? -empty : empty ? 0 : ENOTEMPTY;
	}
	if (!err) {
		stash_name(sname, sizeof sname);
		if (renameat(dir->pfd, name, G.stashfd, sname) != 0)
			err = errno;
	}
	if (!err) {
		in->stashed++;
		if ((err = log_add(C_UNLINK, dir, name, NULL, NULL, in, NULL, sname, isdir)) != 0) {
			renameat(G.stashfd, sname, dir->pfd, name);
			in->stashed--;
		}
	}
	maybe_free(in);
	return err;
}

static void pc_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	LOCK();
	DEAD_CHECK();
	fuse_reply_err(req, remove_entry(I(parent), name, 0));
	UNLOCK();
}

static void pc_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	LOCK();
	DEAD_CHECK();
	fuse_reply_err(req, remove_entry(I(parent), name, 1));
	UNLOCK();
}

static int do_rename(struct inode *d1, const char *n1, struct inode *d2, const char *n2,
		     unsigned flags)
{
	struct inode *src, *dst = NULL;
	struct stat ss, ds;
	char sname[32] = "";
	int err, dst_isdir = 0;

	if (flags & ~(unsigned)RENAME_NOREPLACE)
		return EINVAL;
	if (is_stash(d1, n1))
		return ENOENT;
	if (is_stash(d2, n2))
		return EPERM;
	if ((err = inode_at(d1, n1, &ss, &src)) != 0)
		return err;
	err = inode_at(d2, n2, &ds, &dst);
	if (err == ENOENT) {
		dst = NULL;
		err = 0;
	} else if (err) {
		maybe_free(src);
		return err;
	}
	if (dst == src) {
		/* the same inode under both names: nothing to do */
		maybe_free(src);
		return 0;
	}
	if (dst) {
		dst_isdir = S_ISDIR(ds.st_mode);
		if (flags & RENAME_NOREPLACE)
			err = EEXIST;
		else if (S_ISDIR(ss.st_mode) && !dst_isdir)
			err = ENOTDIR;
		else if (!S_ISDIR(ss.st_mode) && dst_isdir)
			err = EISDIR;
		else if (dst_isdir) {
			int empty = dir_is_empty(d2, n2);

			err = empty < 0 ? -empty : empty ? 0 : ENOTEMPTY;
		}
		if (!err) {
			stash_name(sname, sizeof sname);
			if (renameat(d2->pfd, n2, G.stashfd, sname) != 0)
				err = errno;
		}
		if (err) {
			maybe_free(dst);
			maybe_free(src);
			return err;
		}
	}
	if (renameat2(d1->pfd, n1, d2->pfd, n2, RENAME_NOREPLACE) != 0) {
		err = errno;
		if (dst)
			renameat(G.stashfd, sname, d2->pfd, n2);
	}
	if (!err) {
		if (dst)
			dst->stashed++;
		if ((err = log_add(C_RENAME, d1, n1, d2, n2, src, dst, dst ? sname : NULL,
				   dst_isdir)) != 0) {
			renameat(d2->pfd, n2, d1->pfd, n1);
			if (dst) {
				renameat(G.stashfd, sname, d2->pfd, n2);
				dst->stashed--;
			}
		}
	}
	if (dst)
		maybe_free(dst);
	maybe_free(src);
	return err;
}

static void pc_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		      const char *newname, unsigned int flags)
{
	LOCK();
	DEAD_CHECK();
	fuse_reply_err(req, do_rename(I(parent), name, I(newparent), newname, flags));
	UNLOCK();
}

static void pc_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      struct fuse_file_info *fi)
{
	struct inode *dir = I(parent), *in;
	struct fuse_entry_param e;
	int fd, err = 0, made = 0;

	LOCK();
	DEAD_CHECK();
	if (is_stash(dir, name)) {
		err = EPERM;
		goto out;
	}
	fd = openat(dir->pfd, name, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, mode);
	if (fd >= 0) {
		made = 1;
		set_owner(dir, name, req);
	} else if (errno == EEXIST && !(fi->flags & O_EXCL)) {
		fd = -1; /* someone was first: open what is there */
	} else {
		err = errno;
		goto out;
	}
	if ((err = entry_reply_prep(dir, name, &e, &in)) != 0) {
		if (fd >= 0)
			close(fd);
		goto out;
	}
	if (in->type != S_IFREG) {
		err = in->type == S_IFDIR ? EISDIR : EINVAL;
		if (fd >= 0)
			close(fd);
		maybe_free(in);
		goto out;
	}
	if (fd >= 0 && in->dfd < 0)
		in->dfd = fd;
	else if (fd >= 0)
		close(fd);
	if (made && (err = log_add(C_CREATE, dir, name, NULL, NULL, in, NULL, NULL, 0)) != 0) {
		maybe_free(in);
		goto out;
	}
	if (!err && (err = ensure_dfd(in)) == 0 && !made && (fi->flags & O_TRUNC))
		err = data_truncate(in, 0);
	if (err) {
		maybe_free(in);
		goto out;
	}
	getattr_of(in, &e.attr);
	in->nlookup++;
	fi->keep_cache = 1;
	fi->fh = 0;
	fuse_reply_create(req, &e, fi);
	UNLOCK();
	return;
out:
	fuse_reply_err(req, err);
	UNLOCK();
}

static void pc_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct inode *in = I(ino);
	int err;

	LOCK();
	DEAD_CHECK();
	if (in->type != S_IFREG)
		err = in->type == S_IFDIR ? EISDIR : EINVAL;
	else if ((err = ensure_dfd(in)) == 0 && (fi->flags & O_TRUNC))
		err = data_truncate(in, 0);
	if (err) {
		fuse_reply_err(req, err);
	} else {
		fi->keep_cache = 1;
		fi->fh = 0;
		fuse_reply_open(req, fi);
	}
	UNLOCK();
}

static void pc_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	char *buf;
	size_t got;
	int err;

	(void)fi;
	LOCK();
	DEAD_CHECK();
	if (!(buf = malloc(size ? size : 1)))
		fuse_reply_err(req, ENOMEM);
	else if ((err = data_read(I(ino), buf, size, off, &got)) != 0)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, got);
	free(buf);
	UNLOCK();
}

static void pc_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	int err = 0;

	(void)fi;
	LOCK();
	DEAD_CHECK();
	G.n_writes++;
	if (G.eio_every && ++G.eio_count % G.eio_every == 0) {
		G.n_eio++;
		err = EIO;
	} else if (G.enospc_limit != PC_NO_LIMIT && G.accepted + size > G.enospc_limit) {
		G.n_enospc++;
		err = ENOSPC;
	} else if ((err = data_write(I(ino), buf, size, off)) == 0) {
		G.accepted += size;
	}
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_write(req, size);
	UNLOCK();
}

static void pc_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			 struct fuse_file_info *fi)
{
	struct inode *in = I(ino);
	int err = 0;

	(void)fi;
	LOCK();
	DEAD_CHECK();
	if (G.no_fallocate || (mode & ~FALLOC_FL_KEEP_SIZE)) {
		err = EOPNOTSUPP;
	} else if ((err = state_init(in)) == 0 && !(mode & FALLOC_FL_KEEP_SIZE) &&
		   off + len > in->size) {
		uint64_t grow = (uint64_t)(off + len - in->size);

		if (G.enospc_limit != PC_NO_LIMIT && G.accepted + grow > G.enospc_limit) {
			G.n_enospc++;
			err = ENOSPC;
		} else if ((err = data_truncate(in, off + len)) == 0) {
			G.accepted += grow;
		}
	}
	fuse_reply_err(req, err);
	UNLOCK();
}

static void pc_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	LOCK();
	fuse_reply_err(req, G.dead ? EIO : 0);
	UNLOCK();
}

static void pc_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	(void)fi;
	fuse_reply_err(req, 0);
}

static void pc_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct inode *in = I(ino);
	int err;

	(void)fi;
	LOCK();
	DEAD_CHECK();
	err = in->type == S_IFREG ? data_sync(in, datasync) : 0;
	fuse_reply_err(req, err);
	UNLOCK();
}

static void pc_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirh *d;
	int fd;

	LOCK();
	DEAD_CHECK();
	fd = openat(I(ino)->pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		fuse_reply_err(req, errno);
	} else if (!(d = calloc(1, sizeof *d)) || !(d->dp = fdopendir(fd))) {
		free(d);
		close(fd);
		fuse_reply_err(req, ENOMEM);
	} else {
		fi->fh = (uintptr_t)d;
		fuse_reply_open(req, fi);
	}
	UNLOCK();
}

static void pc_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	char *buf, *p;
	size_t rem = size;
	int err = 0;

	LOCK();
	DEAD_CHECK();
	if (!(buf = p = calloc(1, size ? size : 1))) {
		fuse_reply_err(req, ENOMEM);
		UNLOCK();
		return;
	}
	if (off != d->off) {
		seekdir(d->dp, off);
		d->ent = NULL;
		d->off = off;
	}
	for (;;) {
		off_t next;

		if (!d->ent) {
			errno = 0;
			if (!(d->ent = readdir(d->dp))) {
				err = errno;
				break;
			}
		}
		next = d->ent->d_off;
		if (!(ino == FUSE_ROOT_ID && !strcmp(d->ent->d_name, PC_STASH))) {
			struct stat st = {.st_ino = d->ent->d_ino, .st_mode = (mode_t)d->ent->d_type << 12};
			size_t n = fuse_add_direntry(req, p, rem, d->ent->d_name, &st, next);

			if (n > rem)
				break;
			p += n;
			rem -= n;
		}
		d->ent = NULL;
		d->off = next;
	}
	if (err && rem == size)
		fuse_reply_err(req, err);
	else
		fuse_reply_buf(req, buf, size - rem);
	free(buf);
	UNLOCK();
}

static void pc_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;

	(void)ino;
	LOCK();
	closedir(d->dp);
	free(d);
	UNLOCK();
	fuse_reply_err(req, 0);
}

static void pc_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct dirh *d = (struct dirh *)(uintptr_t)fi->fh;
	int err = 0;

	(void)datasync;
	LOCK();
	DEAD_CHECK();
	make_durable(I(ino));
	if (fsync(dirfd(d->dp)) != 0)
		err = errno;
	fuse_reply_err(req, err);
	UNLOCK();
}

static void pc_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct statvfs sv;

	(void)ino;
	LOCK();
	DEAD_CHECK();
	if (fstatvfs(G.root.pfd, &sv) != 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_statfs(req, &sv);
	UNLOCK();
}

static const struct fuse_lowlevel_ops pc_ops = {
	.init = pc_init,
	.lookup = pc_lookup,
	.forget = pc_forget,
	.forget_multi = pc_forget_multi,
	.getattr = pc_getattr,
	.setattr = pc_setattr,
	.readlink = pc_readlink,
	.mknod = pc_mknod,
	.mkdir = pc_mkdir,
	.symlink = pc_symlink,
	.link = pc_link,
	.unlink = pc_unlink,
	.rmdir = pc_rmdir,
	.rename = pc_rename,
	.create = pc_create,
	.open = pc_open,
	.read = pc_read,
	.write = pc_write,
	.fallocate = pc_fallocate,
	.flush = pc_flush,
	.release = pc_release,
	.fsync = pc_fsync,
	.opendir = pc_opendir,
	.readdir = pc_readdir,
	.releasedir = pc_releasedir,
	.fsyncdir = pc_fsyncdir,
	.statfs = pc_statfs,
};

/* --------------------------------------------------------------- control */

static int parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!s || !*s || *s == '-')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || *end)
		return -1;
	*out = v;
	return 0;
}

static void stats_reply(char *reply, size_t rn)
{
	uint64_t dirty = 0;
	char lim[32] = "none";

	LOCK();
	inodes_each(count_sectors, &dirty);
	if (G.enospc_limit != PC_NO_LIMIT)
		snprintf(lim, sizeof lim, "%" PRIu64, G.enospc_limit);
	snprintf(reply, rn,
		 "ok dead=%d dirty_bytes=%" PRIu64 " pending_changes=%zu writes=%" PRIu64
		 " accepted=%" PRIu64 " eio=%" PRIu64 " enospc=%" PRIu64 " eio_every=%" PRIu64
		 " enospc_limit=%s",
		 G.dead, dirty * PC_SECTOR, G.nlog, G.n_writes, G.accepted, G.n_eio, G.n_enospc,
		 G.eio_every, lim);
	UNLOCK();
}

static void command(char *line, char *reply, size_t rn)
{
	char *w[4] = {0};
	char *save = NULL, *t;
	int n = 0;
	uint64_t v;

	for (t = strtok_r(line, " \t\r\n", &save); t && n < 4; t = strtok_r(NULL, " \t\r\n", &save))
		w[n++] = t;
	if (!n) {
		snprintf(reply, rn, "err empty command");
	} else if (!strcmp(w[0], "cut") && (n == 1 || !strcmp(w[1], "clean"))) {
		do_cut(0, reply, rn);
	} else if (!strcmp(w[0], "cut") && !strcmp(w[1], "torn")) {
		if (n >= 3) {
			if (parse_u64(w[2], &v) != 0) {
				snprintf(reply, rn, "err bad seed");
				return;
			}
			LOCK();
			G.seed = v - (uint64_t)G.cuts;
			UNLOCK();
		}
		do_cut(1, reply, rn);
	} else if (!strcmp(w[0], "stats")) {
		stats_reply(reply, rn);
	} else if (!strcmp(w[0], "sync")) {
		struct flush_result f;
		uint64_t ch;

		LOCK();
		if (G.dead) {
			UNLOCK();
			snprintf(reply, rn, "err already cut");
			return;
		}
		flush_all_locked(&f, &ch);
		UNLOCK();
		snprintf(reply, rn, "ok sync flushed=%" PRIu64 " changes=%" PRIu64 " failed=%" PRIu64,
			 f.bytes, ch, f.failed);
	} else if (!strcmp(w[0], "eio") && n >= 2) {
		LOCK();
		if (!strcmp(w[1], "on")) {
			G.eio_every = 1;
		} else if (!strcmp(w[1], "off")) {
			G.eio_every = 0;
		} else if (!strcmp(w[1], "every") && n >= 3 && parse_u64(w[2], &v) == 0) {
			G.eio_every = v;
		} else {
			UNLOCK();
			snprintf(reply, rn, "err usage: eio on|off|every N");
			return;
		}
		G.eio_count = 0;
		UNLOCK();
		snprintf(reply, rn, "ok eio_every=%" PRIu64, G.eio_every);
	} else if (!strcmp(w[0], "enospc") && n >= 2) {
		LOCK();
		if (!strcmp(w[1], "on")) {
			G.enospc_limit = G.accepted;
		} else if (!strcmp(w[1], "off")) {
			G.enospc_limit = PC_NO_LIMIT;
		} else if (!strcmp(w[1], "after") && n >= 3 && parse_u64(w[2], &v) == 0) {
			G.enospc_limit = G.accepted + v;
		} else {
			UNLOCK();
			snprintf(reply, rn, "err usage: enospc on|off|after BYTES");
			return;
		}
		UNLOCK();
		snprintf(reply, rn, "ok enospc");
	} else {
		snprintf(reply, rn, "err unknown command (cut [clean|torn [SEED]], sync, stats, "
				    "eio on|off|every N, enospc on|off|after BYTES)");
	}
}

static int control_listen(const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	struct stat st;
	int fd;

	if (strlen(path) >= sizeof a.sun_path) {
		say("control path too long: %s", path);
		return -1;
	}
	strcpy(a.sun_path, path);
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0) {
		say("cannot listen on %s: %s", path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static void control_serve(int lfd)
{
	char line[256], reply[512];
	size_t n = 0;
	int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	struct pollfd p;

	if (c < 0)
		return;
	p.fd = c;
	p.events = POLLIN;
	while (n < sizeof line - 1 && poll(&p, 1, 2000) > 0) {
		ssize_t r = read(c, line + n, sizeof line - 1 - n);

		if (r <= 0)
			break;
		n += (size_t)r;
		if (memchr(line, '\n', n))
			break;
	}
	line[n] = 0;
	command(line, reply, sizeof reply);
	strcat(reply, "\n");
	if (write(c, reply, strlen(reply)) < 0) {
		/* the client went away */
	}
	close(c);
}

static void *control_thread(void *arg)
{
	int lfd = *(int *)arg;
	sigset_t set;
	int sfd;

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sfd = signalfd(-1, &set, SFD_CLOEXEC);
	for (;;) {
		struct pollfd p[3] = {{G.stop_pipe[0], POLLIN, 0}, {sfd, POLLIN, 0}, {lfd, POLLIN, 0}};
		char reply[512];

		if (poll(p, lfd >= 0 ? 3 : 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[0].revents)
			break;
		if (sfd >= 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;

			if (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
				do_cut(si.ssi_signo == SIGUSR2, reply, sizeof reply);
		}
		if (lfd >= 0 && (p[2].revents & POLLIN))
			control_serve(lfd);
	}
	if (sfd >= 0)
		close(sfd);
	return NULL;
}

static int ctl_client(int argc, char **argv)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	char buf[1024];
	size_t n = 0;
	int fd, i;
	ssize_t r;

	if (argc < 4) {
		fprintf(stderr, "usage: powercut --ctl SOCKET COMMAND [ARG...]\n");
		return 2;
	}
	if (strlen(argv[2]) >= sizeof a.sun_path) {
		fprintf(stderr, "powercut: control path too long\n");
		return 2;
	}
	strcpy(a.sun_path, argv[2]);
	buf[0] = 0;
	for (i = 3; i < argc; i++) {
		size_t l = strlen(buf);

		snprintf(buf + l, sizeof buf - l, "%s%s", i > 3 ? " " : "", argv[i]);
	}
	strncat(buf, "\n", sizeof buf - strlen(buf) - 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
		fprintf(stderr, "powercut: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	if (write(fd, buf, strlen(buf)) < 0) {
		fprintf(stderr, "powercut: %s: %s\n", argv[2], strerror(errno));
		return 1;
	}
	while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
		n += (size_t)r;
	buf[n] = 0;
	close(fd);
	fputs(buf, stdout);
	return strncmp(buf, "ok", 2) == 0 ? 0 : 1;
}

/* ------------------------------------------------------------------ main */

static void usage(void)
{
	fprintf(stderr,
		"usage: powercut BACKING_DIR MOUNTPOINT [options]\n"
		"       powercut --ctl SOCKET COMMAND [ARG...]\n"
		"options:\n"
		"  -f                  stay in the foreground\n"
		"  -d                  FUSE debug output (implies -f)\n"
		"  --control SOCKET    control socket (a path outside the mount)\n"
		"  --seed N            seed of torn cuts (default: from the clock, printed)\n"
		"  --eio-every N       every Nth write fails with EIO\n"
		"  --enospc-after B    writes fail with ENOSPC once B bytes were accepted\n"
		"  --no-fallocate      fallocate fails with EOPNOTSUPP\n"
		"  --exit-on-cut       unmount (lazily) right after a cut\n"
		"  --timeout SEC       kernel attribute and entry cache time (default 1)\n"
		"  --log FILE          append the daemon's lines to FILE as well\n"
		"  -o OPT[,OPT]        more FUSE mount options\n"
		"signals: SIGUSR1 cut, SIGUSR2 torn cut\n"
		"commands: cut [clean|torn [SEED]], sync, stats, eio on|off|every N,\n"
		"          enospc on|off|after BYTES\n");
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	const char *logfile = NULL;
	char opts[1024];
	int fg = 0, debug = 0, i, npos = 0, lfd = -1, rc = 1;
	const char *extra_opts = NULL;
	struct stat st;
	struct rlimit rl;
	pthread_t ctl;
	sigset_t set;
	uint64_t v;

	if (argc >= 2 && !strcmp(argv[1], "--ctl"))
		return ctl_client(argc, argv);
	G.enospc_limit = PC_NO_LIMIT;
	G.timeout = 1.0;
	for (i = 1; i < argc; i++) {
		const char *a = argv[i];
		int has = i + 1 < argc;

		if (!strcmp(a, "-f")) {
			fg = 1;
		} else if (!strcmp(a, "-d")) {
			debug = fg = 1;
		} else if (!strcmp(a, "--control") && has) {
			G.control = argv[++i];
		} else if (!strcmp(a, "--seed") && has && parse_u64(argv[i + 1], &v) == 0) {
			G.seed = v;
			G.seed_given = 1;
			i++;
		} else if (!strcmp(a, "--eio-every") && has && parse_u64(argv[i + 1], &v) == 0) {
			G.eio_every = v;
			i++;
		} else if (!strcmp(a, "--enospc-after") && has && parse_u64(argv[i + 1], &v) == 0) {
			G.enospc_limit = v;
			i++;
		} else if (!strcmp(a, "--no-fallocate")) {
			G.no_fallocate = 1;
		} else if (!strcmp(a, "--exit-on-cut")) {
			G.exit_on_cut = 1;
		} else if (!strcmp(a, "--timeout") && has) {
			G.timeout = atof(argv[++i]);
		} else if (!strcmp(a, "--log") && has) {
			logfile = argv[++i];
		} else if (!strcmp(a, "-o") && has) {
			extra_opts = argv[++i];
		} else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			usage();
			return 0;
		} else if (a[0] != '-' && npos < 2) {
			if (npos++ == 0)
				G.backing = a;
			else
				G.mountpoint = a;
		} else {
			usage();
			return 2;
		}
	}
	if (npos != 2) {
		usage();
		return 2;
	}
	{
		const char *given = G.mountpoint;

		if (!(G.mountpoint = realpath(given, NULL))) {
			say("%s: %s", given, strerror(errno));
			return 1;
		}
	}
	if (!G.seed_given)
		G.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	G.is_root = geteuid() == 0;
	umask(0);
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	pthread_mutex_init(&G.lock, NULL);

	/* the disk: its root, and an empty stash */
	G.root.pfd = open(G.backing, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (G.root.pfd < 0 || fstat(G.root.pfd, &st) != 0) {
		say("%s: %s", G.backing, strerror(errno));
		return 1;
	}
	G.root.dev = st.st_dev;
	G.root.ino = st.st_ino;
	G.root.type = S_IFDIR;
	G.root.dfd = -1;
	G.root.nlookup = 1;
	G.hcap = 1024;
	if (!(G.htab = calloc(G.hcap, sizeof *G.htab)) || hinsert(&G.root) != 0)
		return 1;
	if (fstatat(G.root.pfd, PC_STASH, &st, AT_SYMLINK_NOFOLLOW) == 0)
		rm_rf_at(G.root.pfd, PC_STASH);
	if (mkdirat(G.root.pfd, PC_STASH, 0700) != 0 ||
	    (G.stashfd = openat(G.root.pfd, PC_STASH, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		say("cannot make %s/%s: %s", G.backing, PC_STASH, strerror(errno));
		return 1;
	}

	snprintf(opts, sizeof opts, "default_permissions,fsname=powercut:%s,subtype=powercut%s%s%s",
		 G.backing, G.is_root ? ",allow_other" : "", extra_opts ? "," : "",
		 extra_opts ? extra_opts : "");
	if (fuse_opt_add_arg(&args, argv[0]) || fuse_opt_add_arg(&args, "-o") ||
	    fuse_opt_add_arg(&args, opts) || (debug && fuse_opt_add_arg(&args, "-d")))
		return 1;
	if (!(G.se = fuse_session_new(&args, &pc_ops, sizeof pc_ops, NULL)))
		goto out_args;
	if (fuse_set_signal_handlers(G.se) != 0)
		goto out_session;
	if (G.control && (lfd = control_listen(G.control)) < 0)
		goto out_signals;
	if (fuse_session_mount(G.se, G.mountpoint) != 0)
		goto out_signals;
	if (fuse_daemonize(fg) != 0)
		goto out_unmount;
	if (logfile) {
		int fd = open(logfile, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);

		if (fd >= 0) {
			dup2(fd, 2);
			close(fd);
		}
	}
	if (pipe2(G.stop_pipe, O_CLOEXEC) != 0)
		goto out_unmount;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&ctl, NULL, control_thread, &lfd) != 0)
		goto out_unmount;
	say("mounted %s on %s (seed %" PRIu64 ")", G.backing, G.mountpoint, G.seed);

	/* After a cut the disk is dead and nothing is written at unmount: the
	 * kernel may end such a connection as aborted (ECONNABORTED from the
	 * device), which is as good an end as any. */
	rc = fuse_session_loop(G.se) < 0 && !G.dead ? 1 : 0;

	if (write(G.stop_pipe[1], "x", 1) < 0) {
		/* the thread also ends with the process */
	}
	pthread_join(ctl, NULL);
	LOCK();
	if (!G.dead) {
		struct flush_result f;
		uint64_t ch;

		flush_all_locked(&f, &ch);
		say("unmounted: wrote %" PRIu64 " dirty bytes, made %" PRIu64
		    " namespace changes durable (%" PRIu64 " failures)",
		    f.bytes, ch, f.failed);
		/* nothing is left to undo: the stash goes if empty */
		if (unlinkat(G.root.pfd, PC_STASH, AT_REMOVEDIR) != 0 && errno != ENOTEMPTY)
			say("cannot remove %s/%s: %s", G.backing, PC_STASH, strerror(errno));
	} else {
		say("unmounted after the cut");
	}
	say("faults injected: eio=%" PRIu64 " enospc=%" PRIu64 " (of %" PRIu64 " writes)", G.n_eio,
	    G.n_enospc, G.n_writes);
	UNLOCK();
out_unmount:
	fuse_session_unmount(G.se);
out_signals:
	fuse_remove_signal_handlers(G.se);
out_session:
	fuse_session_destroy(G.se);
out_args:
	fuse_opt_free_args(&args);
	if (lfd >= 0) {
		close(lfd);
		unlink(G.control);
	}
	return rc;
}
