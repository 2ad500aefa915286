/*
 * test_install.c: `make install` and `make uninstall` (tools/install.sh) for
 * a box without the Debian package.
 *
 * - install with DESTDIR and PREFIX=/usr puts exactly the listed files, with
 *   their modes, the unit's ExecStart at PREFIX/bin and the example
 *   configuration in DESTDIR/etc/stagedoor; uninstall with the same leaves
 *   no file and no folder of the box's;
 * - a configuration that was there before install is kept by both, and one
 *   edited after install is kept by uninstall;
 * - a relative PREFIX is refused with a clear error, and nothing is written;
 * - the release binary that install and the package ship (bin/stagedoor) is
 *   hardened: fortified libc calls, the stack protector, PIE, full RELRO
 *   with immediate binding (readelf on the file).
 *
 * The man pages and the completion are the binary's own output in a build;
 * here make is given stand-in files in the test's folder (DOC_MAN1, ...),
 * so that the test checks where install puts what it is given, byte for
 * byte, without generating them.  Runs from the repository root (make
 * runs the suites there); the binary is $STAGEDOOR_BIN's, as in every test.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

/* What install puts under DESTDIR with PREFIX=/usr, sorted, and each mode. */
static const struct {
	const char *path;
	mode_t mode;
} installed[] = {
	{ "/etc/stagedoor/stagedoor.conf", 0644 },
	{ "/usr/bin/stagedoor", 0755 },
	{ "/usr/lib/systemd/system/stagedoor.service", 0644 },
	{ "/usr/share/bash-completion/completions/stagedoor", 0644 },
	{ "/usr/share/doc/stagedoor/api.md", 0644 },
	{ "/usr/share/doc/stagedoor/design.md", 0644 },
	{ "/usr/share/doc/stagedoor/examples/sqs_worker.mjs", 0644 },
	{ "/usr/share/doc/stagedoor/examples/sqs_worker.py", 0644 },
	{ "/usr/share/doc/stagedoor/examples/stagedoor.conf", 0644 },
	{ "/usr/share/doc/stagedoor/jobs.md", 0644 },
	{ "/usr/share/doc/stagedoor/postgresql.md", 0644 },
	{ "/usr/share/doc/stagedoor/queues.md", 0644 },
	{ "/usr/share/doc/stagedoor/running.md", 0644 },
	{ "/usr/share/doc/stagedoor/testing.md", 0644 },
	{ "/usr/share/doc/stagedoor/tour.md", 0644 },
	{ "/usr/share/man/man1/stagedoor.1", 0644 },
	{ "/usr/share/man/man5/stagedoor.conf.5", 0644 },
};
#define N_INSTALLED (sizeof installed / sizeof installed[0])

/* ---- helpers ---------------------------------------------------------------- */

static void write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (!f)
		fail_msg("cannot write %s", path);
	assert_true(fputs(text, f) >= 0);
	assert_int_equal(fclose(f), 0);
}

/* stand_ins: the three generated documents, made up in dir/docs */
static void stand_ins(const char *dir)
{
	char p[PATH_MAX];

	snprintf(p, sizeof p, "%s/docs", dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/docs/stagedoor.1", dir);
	write_text(p, ".TH STAGEDOOR 1\n.SH NAME\nstagedoor \\- a stand-in page\n");
	snprintf(p, sizeof p, "%s/docs/stagedoor.conf.5", dir);
	write_text(p, ".TH STAGEDOOR.CONF 5\n.SH NAME\nstagedoor.conf \\- a stand-in page\n");
	snprintf(p, sizeof p, "%s/docs/completion", dir);
	write_text(p, "complete -W 'run init' stagedoor\n");
}

/*
 * make_in: `make TARGET DESTDIR=dir/root PREFIX=prefix` from the repository
 * root, with the stand-in documents and the binary under test; the outer
 * make's job server is not passed on.  stderr into *err (caller frees).
 * Returns make's exit status.
 */
static int make_in(const char *dir, const char *target, const char *prefix, char **err)
{
	char destdir[PATH_MAX], pre[PATH_MAX], bin[PATH_MAX], m1[PATH_MAX], m5[PATH_MAX],
	    comp[PATH_MAX], out[PATH_MAX], errp[PATH_MAX];
	size_t size;
	int rc;

	snprintf(destdir, sizeof destdir, "DESTDIR=%s/root", dir);
	snprintf(pre, sizeof pre, "PREFIX=%s", prefix);
	snprintf(bin, sizeof bin, "INSTALL_BIN=%s", tu_bin());
	snprintf(m1, sizeof m1, "DOC_MAN1=%s/docs/stagedoor.1", dir);
	snprintf(m5, sizeof m5, "DOC_MAN5=%s/docs/stagedoor.conf.5", dir);
	snprintf(comp, sizeof comp, "DOC_COMPLETION=%s/docs/completion", dir);
	snprintf(out, sizeof out, "%s/make.out", dir);
	snprintf(errp, sizeof errp, "%s/make.err", dir);
	rc = tu_exec((const char *const[]){ "env", "-u", "MAKEFLAGS", "-u", "MFLAGS", "-u",
					    "MAKELEVEL", "make", "--no-print-directory", target,
					    destdir, pre, bin, m1, m5, comp, NULL },
		     out, errp, 60000);
	*err = (char *)tu_slurp(errp, &size);
	return rc;
}

/* The files and links below dir/root, as absolute paths inside it, one per
 * line in sorted order; and the folders whose path there holds "stagedoor". */
static char found[8192];
static size_t found_len;
static const char *walk_root;

static int note(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	const char *rel = path + strlen(walk_root);

	(void)st;
	(void)ftw;
	/* the walk's root is the test's own folder, whose name holds "stagedoor" */
	if (type == FTW_D && !strstr(rel, "stagedoor"))
		return 0;
	if (found_len + strlen(rel) + 2 >= sizeof found)
		return 1;
	found_len += (size_t)snprintf(found + found_len, sizeof found - found_len, "%s%s\n", rel,
				      type == FTW_D ? "/" : "");
	return 0;
}

static int by_line(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *left_in(const char *dir)
{
	static char root[PATH_MAX], sorted[8192];
	char *lines[256], *save = NULL, *l;
	size_t n = 0, i, o = 0;

	snprintf(root, sizeof root, "%s/root", dir);
	walk_root = root;
	found_len = 0;
	found[0] = '\0';
	if (access(root, F_OK) == 0)
		assert_int_equal(nftw(root, note, 16, FTW_PHYS), 0);
	for (l = strtok_r(found, "\n", &save); l && n < 256; l = strtok_r(NULL, "\n", &save))
		if (*l)
			lines[n++] = l;
	qsort(lines, n, sizeof lines[0], by_line);
	sorted[0] = '\0';
	for (i = 0; i < n; i++)
		o += (size_t)snprintf(sorted + o, sizeof sorted - o, "%s\n", lines[i]);
	return sorted;
}

static void assert_same_bytes(const char *a, const char *b)
{
	size_t na, nb;
	unsigned char *x = tu_slurp(a, &na), *y = tu_slurp(b, &nb);

	if (na != nb || memcmp(x, y, na) != 0)
		tu_fail_free(x, y, "%s is not a copy of %s", b, a);
	free(x);
	free(y);
}

/* ---- tests ------------------------------------------------------------------ */

static void test_install_puts_the_list_and_uninstall_removes_it(void **state)
{
	struct tu_env *e = *state;
	char p[PATH_MAX], q[PATH_MAX], *err = NULL, *unit;
	size_t i, size;
	struct stat st;

	stand_ins(e->dir);
	if (make_in(e->dir, "install", "/usr", &err) != 0)
		tu_fail_free(err, NULL, "make install failed:\n%s", err);
	free(err);
	/* every file of the list, and the folders of the box's own */
	assert_string_equal(left_in(e->dir),
			    "/etc/stagedoor/\n/etc/stagedoor/stagedoor.conf\n/usr/bin/stagedoor\n"
			    "/usr/lib/systemd/system/stagedoor.service\n"
			    "/usr/share/bash-completion/completions/stagedoor\n"
			    "/usr/share/doc/stagedoor/\n/usr/share/doc/stagedoor/api.md\n"
			    "/usr/share/doc/stagedoor/design.md\n/usr/share/doc/stagedoor/examples/\n"
			    "/usr/share/doc/stagedoor/examples/sqs_worker.mjs\n"
			    "/usr/share/doc/stagedoor/examples/sqs_worker.py\n"
			    "/usr/share/doc/stagedoor/examples/stagedoor.conf\n"
			    "/usr/share/doc/stagedoor/jobs.md\n/usr/share/doc/stagedoor/postgresql.md\n"
			    "/usr/share/doc/stagedoor/queues.md\n"
			    "/usr/share/doc/stagedoor/running.md\n/usr/share/doc/stagedoor/testing.md\n"
			    "/usr/share/doc/stagedoor/tour.md\n"
			    "/usr/share/man/man1/stagedoor.1\n/usr/share/man/man5/stagedoor.conf.5\n");
	for (i = 0; i < N_INSTALLED; i++) {
		snprintf(p, sizeof p, "%s/root%s", e->dir, installed[i].path);
		assert_int_equal(lstat(p, &st), 0);
		assert_true(S_ISREG(st.st_mode));
		if ((st.st_mode & 07777) != installed[i].mode)
			fail_msg("%s has mode %04o, not %04o", installed[i].path,
				 (unsigned)(st.st_mode & 07777), (unsigned)installed[i].mode);
	}
	/* each file is what it was given */
	snprintf(p, sizeof p, "%s/root/usr/bin/stagedoor", e->dir);
	assert_same_bytes(tu_bin(), p);
	snprintf(q, sizeof q, "%s/docs/stagedoor.1", e->dir);
	snprintf(p, sizeof p, "%s/root/usr/share/man/man1/stagedoor.1", e->dir);
	assert_same_bytes(q, p);
	snprintf(q, sizeof q, "%s/docs/completion", e->dir);
	snprintf(p, sizeof p, "%s/root/usr/share/bash-completion/completions/stagedoor", e->dir);
	assert_same_bytes(q, p);
	snprintf(p, sizeof p, "%s/root/etc/stagedoor/stagedoor.conf", e->dir);
	assert_same_bytes("dist/stagedoor.conf", p);
	/* the unit runs the installed binary, not /usr/local's */
	snprintf(p, sizeof p, "%s/root/usr/lib/systemd/system/stagedoor.service", e->dir);
	unit = (char *)tu_slurp(p, &size);
	if (!strstr(unit, "\nExecStart=/usr/bin/stagedoor run ") || strstr(unit, "/usr/local/"))
		tu_fail_free(unit, NULL, "the unit does not run /usr/bin/stagedoor:\n%s", unit);
	free(unit);

	if (make_in(e->dir, "uninstall", "/usr", &err) != 0)
		tu_fail_free(err, NULL, "make uninstall failed:\n%s", err);
	free(err);
	assert_string_equal(left_in(e->dir), "");
}

static void test_a_configuration_there_before_is_kept(void **state)
{
	struct tu_env *e = *state;
	char p[PATH_MAX], *err = NULL, *text;
	size_t size;

	stand_ins(e->dir);
	snprintf(p, sizeof p, "%s/root", e->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/root/etc", e->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/root/etc/stagedoor", e->dir);
	assert_int_equal(mkdir(p, 0755), 0);
	snprintf(p, sizeof p, "%s/root/etc/stagedoor/stagedoor.conf", e->dir);
	write_text(p, "db = /srv/box/stagedoor.db\n");

	if (make_in(e->dir, "install", "/usr/local", &err) != 0)
		tu_fail_free(err, NULL, "make install failed:\n%s", err);
	free(err);
	text = (char *)tu_slurp(p, &size);
	assert_string_equal(text, "db = /srv/box/stagedoor.db\n");
	free(text);
	if (make_in(e->dir, "uninstall", "/usr/local", &err) != 0)
		tu_fail_free(err, NULL, "make uninstall failed:\n%s", err);
	free(err);
	assert_string_equal(left_in(e->dir),
			    "/etc/stagedoor/\n/etc/stagedoor/stagedoor.conf\n");

	/* installed by make, then edited: uninstall keeps the edit */
	assert_int_equal(unlink(p), 0);
	if (make_in(e->dir, "install", "/usr/local", &err) != 0)
		tu_fail_free(err, NULL, "make install failed:\n%s", err);
	free(err);
	write_text(p, "db = /srv/box/stagedoor.db\n");
	if (make_in(e->dir, "uninstall", "/usr/local", &err) != 0)
		tu_fail_free(err, NULL, "make uninstall failed:\n%s", err);
	free(err);
	assert_string_equal(left_in(e->dir),
			    "/etc/stagedoor/\n/etc/stagedoor/stagedoor.conf\n");
}

static void test_a_relative_prefix_is_refused(void **state)
{
	struct tu_env *e = *state;
	char *err = NULL;

	stand_ins(e->dir);
	assert_int_not_equal(make_in(e->dir, "install", "usr", &err), 0);
	if (!strstr(err, "PREFIX must be an absolute path (e.g. /usr/local), not 'usr'"))
		tu_fail_free(err, NULL, "no clear error for PREFIX=usr:\n%s", err);
	free(err);
	assert_string_equal(left_in(e->dir), "");
}

/* readelf_has: readelf ARGS on bin/stagedoor prints a line holding NEEDLE. */
static int readelf_has(const struct tu_env *e, const char *opt, const char *needle)
{
	const char *argv[] = { "readelf", "-W", opt, "bin/stagedoor", NULL };
	char out[PATH_MAX];
	size_t size = 0;
	unsigned char *text;
	int has;

	snprintf(out, sizeof out, "%s/readelf.out", e->dir);
	if (tu_exec(argv, out, NULL, 10000) != 0)
		fail_msg("readelf %s bin/stagedoor failed", opt);
	text = tu_slurp(out, &size);
	assert_non_null(text);
	has = strstr((char *)text, needle) != NULL;
	free(text);
	unlink(out);
	return has;
}

static void test_the_release_binary_is_hardened(void **state)
{
	const struct tu_env *e = *state;

	if (access("bin/stagedoor", X_OK) != 0)
		fail_msg("bin/stagedoor is not built (make builds it before the suites)");
	assert_true(readelf_has(e, "--dynamic", "BIND_NOW"));
	assert_true(readelf_has(e, "--dynamic", "PIE"));
	assert_true(readelf_has(e, "--program-headers", "GNU_RELRO"));
	assert_true(readelf_has(e, "--dyn-syms", "__stack_chk_fail"));
	/* _FORTIFY_SOURCE: at least one libc call is the checked variant */
	assert_true(readelf_has(e, "--dyn-syms", "_chk@"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_install_puts_the_list_and_uninstall_removes_it,
						tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_a_configuration_there_before_is_kept,
						tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_a_relative_prefix_is_refused, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_the_release_binary_is_hardened, tu_setup_nodb,
						tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
