/*
 * test_pdf.c: the ticket PDF and its QR codes.
 *
 * The PDF is judged from outside, by the tools a reader would trust: qpdf
 * checks its structure and counts pages, pdftotext reads its text back (in
 * UTF-8, so accents are compared as written), pdftoppm rasterises the page
 * so that the drawn QR symbol can be compared module by module with the
 * encoder's matrix.  Determinism is checked within one process and against
 * a second, freshly exec'd one (other addresses, other heap), which is this
 * test binary run as "test_pdf --render-to FILE".
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pdf.h"
#include "qr.h"
#include "testutil.h"

extern char **environ;

#define PATH_LEN 400	/* tu_env.dir (256) and a file name */

/* ---- the order every test renders --------------------------------------- */

static const struct pdf_ticket sample_tickets[] = {
	{ "A-12", "K7QXJ2M4ZPA3F5RB6TCYD7VWE2GHN4LQ" },
	{ "A-13", "M2NB5VC4XZ7LKJ3HGF6DSA2POIU5YTRE" },
};

static struct pdf_order sample_order(void)
{
	struct pdf_order o = {
		.event_name = "Die Zauberflöte – Gala",
		.venue = "Salle Zoë, Théâtre du Châtelet",
		.starts_at = "2026-12-31 20:00 UTC",
		.buyer_name = "José Müller",
		.order_id = "ord_0001234",
		.tickets = sample_tickets,
		.n_tickets = 2,
	};
	return o;
}

static void write_file(const char *path, const unsigned char *b, size_t n)
{
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_int_equal(fwrite(b, 1, n, f), n);
	assert_int_equal(fclose(f), 0);
}

/* render_to: the order into dir/name; [out] path (PATH_LEN bytes). */
static void render_to(const struct tu_env *env, const struct pdf_order *o, const char *name,
		      char *path)
{
	unsigned char *b = NULL;
	size_t n = 0;

	if (pdf_render(o, &b, &n) != SD_OK)
		fail_msg("pdf_render: %s", err_msg());
	snprintf(path, PATH_LEN, "%s/%s", env->dir, name);
	write_file(path, b, n);
	free(b);
}

/*
 * run_tool: run argv (argv[0] found on PATH) with stdout captured into out
 * (NUL-terminated, out_size bytes at most) and stderr to /dev/null.
 * Returns the exit status, -1 for a signal death.
 */
static int run_tool(char *out, size_t out_size, const char *const *argv)
{
	posix_spawn_file_actions_t fa;
	FILE *fo = tmpfile();
	int status = -1, rc;
	pid_t pid;
	size_t n;

	assert_non_null(fo);
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, fileno(fo), 1);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	rc = posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		fail_msg("cannot run %s: %s", argv[0], strerror(rc));
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	rewind(fo);
	n = fread(out, 1, out_size - 1, fo);
	out[n] = '\0';
	fclose(fo);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

#define assert_contains(hay, needle) \
	do { \
		if (!strstr((hay), (needle))) \
			fail_msg("\"%s\" not found in:\n%s", (needle), (hay)); \
	} while (0)

/* ---- the PDF ------------------------------------------------------------ */

static void test_two_tickets_pass_qpdf_and_read_back(void **state)
{
	struct tu_env *env = *state;
	struct pdf_order o = sample_order();
	static char text[65536];
	char path[PATH_LEN], out[4096];

	render_to(env, &o, "order.pdf", path);
	{
		const char *argv[] = { "qpdf", "--check", path, NULL };
		assert_int_equal(run_tool(out, sizeof out, argv), 0);
	}
	{
		const char *argv[] = { "pdftotext", "-enc", "UTF-8", path, "-", NULL };
		assert_int_equal(run_tool(text, sizeof text, argv), 0);
	}
	assert_contains(text, "Die Zauberflöte – Gala");
	assert_contains(text, "Salle Zoë, Théâtre du Châtelet");
	assert_contains(text, "2026-12-31 20:00 UTC");
	assert_contains(text, "José Müller");
	assert_contains(text, "ord_0001234");
	assert_contains(text, "A-12");
	assert_contains(text, "A-13");
	assert_contains(text, "K7QXJ2M4ZPA3F5RB6TCYD7VWE2GHN4LQ");
	assert_contains(text, "M2NB5VC4XZ7LKJ3HGF6DSA2POIU5YTRE");
	/* each code on its own page, with its own seat: page 2 holds the
	 * second ticket and not the first */
	{
		const char *argv[] = { "pdftotext", "-enc", "UTF-8", "-f", "2", "-l", "2", path, "-",
				       NULL };
		assert_int_equal(run_tool(text, sizeof text, argv), 0);
	}
	assert_contains(text, "A-13");
	assert_contains(text, "M2NB5VC4XZ7LKJ3HGF6DSA2POIU5YTRE");
	assert_contains(text, "José Müller");
	assert_null(strstr(text, "K7QXJ2M4ZPA3F5RB6TCYD7VWE2GHN4LQ"));
}

static void test_one_page_per_ticket(void **state)
{
	struct tu_env *env = *state;
	struct pdf_order o = sample_order();
	char path[PATH_LEN], out[256];
	const char *argv[] = { "qpdf", "--show-npages", path, NULL };

	render_to(env, &o, "two.pdf", path);
	assert_int_equal(run_tool(out, sizeof out, argv), 0);
	assert_string_equal(out, "2\n");
	o.n_tickets = 1;
	render_to(env, &o, "one.pdf", path);
	assert_int_equal(run_tool(out, sizeof out, argv), 0);
	assert_string_equal(out, "1\n");
}

static void test_outside_winansi_becomes_question_mark(void **state)
{
	struct tu_env *env = *state;
	struct pdf_order o = sample_order();
	static char text[65536];
	char path[PATH_LEN];
	const char *argv[] = { "pdftotext", "-enc", "UTF-8", path, "-", NULL };

	/* CP1252's own 0x80..0x9F (€ “ ” Œ) survive; CJK and emoji do not */
	o.buyer_name = "Zoë “Œ” €5 日本😀";
	render_to(env, &o, "q.pdf", path);
	assert_int_equal(run_tool(text, sizeof text, argv), 0);
	assert_contains(text, "Zoë “Œ” €5 ???");
}

/*
 * Long fields shrink, wrap (the event name) or end in an ellipsis, and no
 * word pdftotext finds lies outside the page's 20 pt side margins.
 */
static void test_long_fields_stay_on_the_page(void **state)
{
	struct tu_env *env = *state;
	struct pdf_order o = sample_order();
	static char text[65536], bbox[262144], buyer[1025];
	char path[PATH_LEN];
	const char *p;
	int words = 0;

	o.event_name = "The Extraordinarily Long Midsummer Night's Philharmonic Gala Evening "
		       "of Overtures, Arias and Encores";
	o.venue = "Große Halle der Philharmonie am Südufer des Flusses, Eingang Nord, Saal 3";
	memset(buyer, 'W', sizeof buyer - 1);		/* the widest letter, at the limit */
	buyer[sizeof buyer - 1] = '\0';
	o.buyer_name = buyer;
	render_to(env, &o, "long.pdf", path);
	{
		const char *argv[] = { "qpdf", "--check", path, NULL };
		assert_int_equal(run_tool(text, sizeof text, argv), 0);
	}
	{
		const char *argv[] = { "pdftotext", "-enc", "UTF-8", path, "-", NULL };
		assert_int_equal(run_tool(text, sizeof text, argv), 0);
	}
	/* the name wraps at a word: its first line is whole, not cut */
	assert_contains(text, "The Extraordinarily Long Midsummer\n");
	assert_contains(text, "Night's");
	assert_contains(text, "…");
	assert_contains(text, "WWWWWWWWWW");
	{
		const char *argv[] = { "pdftotext", "-bbox", "-enc", "UTF-8", path, "-", NULL };
		assert_int_equal(run_tool(bbox, sizeof bbox, argv), 0);
	}
	for (p = bbox; (p = strstr(p, "<word xMin=\"")); p++) {
		double x0, y0, x1, y1;

		assert_int_equal(sscanf(p, "<word xMin=\"%lf\" yMin=\"%lf\" xMax=\"%lf\" yMax=\"%lf\"",
					&x0, &y0, &x1, &y1), 4);
		if (x0 < 19.5 || x1 > 297.64 - 19.5 || y0 < 0 || y1 > 419.53)
			fail_msg("a word runs off the page: %.80s", p);
		words++;
	}
	assert_true(words > 20);

	/* a line that fills the width up to a space: the break's space must
	 * not push the first line over and get it cut */
	o = sample_order();
	o.event_name = "Wörd Wörd Wörd Wörd Wörd Wörd Wörd Wörd Wörd Wörd Wörd Wörd Wörd Wörd "
		       "Wörd Wörd Wörd";
	render_to(env, &o, "edge.pdf", path);
	{
		const char *argv[] = { "pdftotext", "-enc", "UTF-8", path, "-", NULL };
		assert_int_equal(run_tool(text, sizeof text, argv), 0);
	}
	assert_contains(text, "Wörd Wörd Wörd Wörd Wörd Wörd Wörd\nWörd ");
}

static void test_same_input_same_bytes(void **state)
{
	struct tu_env *env = *state;
	struct pdf_order o = sample_order();
	unsigned char *a = NULL, *b = NULL, *c = NULL, *other;
	size_t na, nb, nc, nother;
	char path[PATH_LEN], out[256];

	assert_int_equal(pdf_render(&o, &a, &na), SD_OK);
	assert_int_equal(pdf_render(&o, &b, &nb), SD_OK);
	assert_int_equal(na, nb);
	assert_memory_equal(a, b, na);
	/* nothing in the file that a clock or a random source would vary */
	assert_null(memmem(a, na, "CreationDate", 12));
	assert_null(memmem(a, na, "ModDate", 7));
	assert_null(memmem(a, na, "/ID", 3));

	/* a second process, exec'd afresh, writes the same bytes */
	snprintf(path, sizeof path, "%s/child.pdf", env->dir);
	{
		const char *argv[] = { "/proc/self/exe", "--render-to", path, NULL };
		assert_int_equal(run_tool(out, sizeof out, argv), 0);
	}
	other = tu_slurp(path, &nother);
	assert_int_equal(nother, na);
	assert_memory_equal(other, a, na);
	free(other);

	/* and a change in any one field changes them */
	o.buyer_name = "José Mülller";
	assert_int_equal(pdf_render(&o, &c, &nc), SD_OK);
	assert_true(nc != na || memcmp(a, c, na) != 0);
	free(a);
	free(b);
	free(c);
}

static void test_bad_input_refused(void **state)
{
	struct pdf_order o = sample_order();
	struct pdf_ticket t[2] = { sample_tickets[0], sample_tickets[1] };
	unsigned char *b = (unsigned char *)"untouched";
	size_t n = 99;

	(void)state;
	o.n_tickets = 0;
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	assert_non_null(strstr(err_msg(), "at least one ticket"));
	assert_null(b);
	assert_int_equal(n, 0);

	o = sample_order();
	o.buyer_name = "Jos\xc3\x28 M";			/* broken two-byte sequence */
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	assert_non_null(strstr(err_msg(), "buyer name is not valid UTF-8"));
	assert_null(b);

	o.buyer_name = "\xc0\xaf";			/* overlong '/' */
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	o.buyer_name = "\xed\xa0\x80";			/* a UTF-16 surrogate */
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	o.buyer_name = "M\xe2\x82";			/* cut off at the end */
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	o.buyer_name = "\xf4\x90\x80\x80";		/* past U+10FFFF */
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);

	o = sample_order();
	t[1].seat_label = "B-\xff";
	o.tickets = t;
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	assert_non_null(strstr(err_msg(), "ticket 2 seat label"));

	t[1] = sample_tickets[1];
	t[1].code = "";
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	assert_non_null(strstr(err_msg(), "ticket 2 code is empty"));

	/* past the length caps: fields of 1024 bytes, codes of 80 characters */
	{
		static char big[1026], code[82];

		memset(big, 'x', sizeof big - 1);
		o = sample_order();
		o.event_name = big;
		assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
		assert_non_null(strstr(err_msg(), "event name is longer than 1024 bytes"));
		memset(code, 'X', sizeof code - 1);
		t[1].code = code;
		o = sample_order();
		o.tickets = t;
		assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
		assert_non_null(strstr(err_msg(), "ticket 2 code is longer than 80"));
		code[80] = '\0';
		assert_int_equal(pdf_render(&o, &b, &n), SD_OK);
		free(b);
		b = NULL;
	}

	o = sample_order();
	o.venue = NULL;
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	assert_non_null(strstr(err_msg(), "venue is missing"));
	o = sample_order();
	o.tickets = NULL;
	assert_int_equal(pdf_render(&o, &b, &n), SD_INVALID);
	assert_null(b);
}

/*
 * The drawn symbol is the encoder's matrix: rasterise page 1, find the
 * symbol's dark bounding box in the lower part of the page, and read every
 * module's centre, plus the 4-module quiet zone around it, which must be
 * white.  A flipped, transposed, shifted or seamed drawing fails here.
 */
static void test_drawn_qr_matches_matrix(void **state)
{
	struct tu_env *env = *state;
	struct pdf_order o = sample_order();
	struct qr *q = NULL;
	char path[PATH_LEN], prefix[PATH_LEN], pgm[PATH_LEN + 8], out[256];
	unsigned char *img, *px;
	size_t size;
	int w, h, maxv, x, y, x0 = -1, x1 = -1, y0 = -1, y1 = -1, r, c, off;
	double m;

	o.n_tickets = 1;
	render_to(env, &o, "qr.pdf", path);
	snprintf(prefix, sizeof prefix, "%s/page", env->dir);
	{
		const char *argv[] = { "pdftoppm", "-gray", "-r", "200", "-f", "1", "-l", "1",
				       "-singlefile", path, prefix, NULL };
		assert_int_equal(run_tool(out, sizeof out, argv), 0);
	}
	snprintf(pgm, sizeof pgm, "%s.pgm", prefix);
	img = tu_slurp(pgm, &size);
	assert_int_equal(sscanf((char *)img, "P5 %d %d %d%n", &w, &h, &maxv, &off), 3);
	assert_int_equal(maxv, 255);
	px = img + off + 1;
	assert_true(size >= (size_t)(off + 1) + (size_t)w * (size_t)h);

	/* the QR sits between the perforation and the code's text: 45%..88% of
	 * the page's height holds it and nothing else that is black */
	for (y = h * 45 / 100; y < h * 88 / 100; y++) {
		for (x = 0; x < w; x++) {
			if (px[(size_t)y * w + x] >= 64)
				continue;
			if (x0 < 0 || x < x0)
				x0 = x;
			if (x > x1)
				x1 = x;
			if (y0 < 0)
				y0 = y;
			y1 = y;
		}
	}
	assert_true(x0 >= 0);
	assert_int_equal(qr_encode(sample_tickets[0].code, &q), SD_OK);
	m = (double)(x1 - x0 + 1) / q->width;
	/* square, and large: at least 40 mm (315 px at 200 dpi) across */
	assert_true(abs((x1 - x0) - (y1 - y0)) <= 2);
	assert_true(x1 - x0 + 1 >= 315);
	for (r = -4; r < q->width + 4; r++) {
		for (c = -4; c < q->width + 4; c++) {
			int want = r >= 0 && c >= 0 && r < q->width && c < q->width &&
				   q->dark[r * q->width + c];
			int cx = x0 + (int)((c + 0.5) * m), cy = y0 + (int)((r + 0.5) * m);
			int got = px[(size_t)cy * w + cx] < 128;

			if (got != want)
				fail_msg("module row %d col %d: drawn %s, encoded %s", r, c,
					 got ? "dark" : "light", want ? "dark" : "light");
		}
	}
	qr_free(q);
	free(img);
}

/* ---- QR codes ----------------------------------------------------------- */

static void test_qr_square_with_dark_and_light(void **state)
{
	struct qr *q = NULL, *big = NULL;
	char long_text[300];
	int i, n, dark = 0, light = 0;

	(void)state;
	assert_int_equal(qr_encode("K7QXJ2M4ZPA3F5RB6TCYD7VWE2GHN4LQ", &q), SD_OK);
	assert_true(q->width >= 21);
	assert_int_equal((q->width - 21) % 4, 0);	/* a real QR version */
	n = q->width * q->width;
	for (i = 0; i < n; i++) {
		assert_true(q->dark[i] == 0 || q->dark[i] == 1);
		dark += q->dark[i];
		light += !q->dark[i];
	}
	assert_true(dark > 0 && light > 0);
	/* the top-left finder pattern: a dark 7x7 ring */
	for (i = 0; i < 7; i++) {
		assert_int_equal(q->dark[i], 1);
		assert_int_equal(q->dark[i * q->width], 1);
		assert_int_equal(q->dark[6 * q->width + i], 1);
	}
	assert_int_equal(q->dark[1 * q->width + 1], 0);

	/* more text, a bigger version */
	memset(long_text, 'x', sizeof long_text - 1);
	long_text[sizeof long_text - 1] = '\0';
	assert_int_equal(qr_encode(long_text, &big), SD_OK);
	assert_true(big->width > q->width);
	qr_free(big);
	qr_free(q);
	qr_free(NULL);

	assert_int_equal(qr_encode("", &q), SD_INVALID);
	assert_null(q);
}

static void test_qr_too_long_refused(void **state)
{
	struct qr *q = (struct qr *)1;
	char *text = malloc(4000);

	(void)state;
	assert_non_null(text);
	/* 8-bit mode at level M holds at most 2331 bytes (version 40) */
	memset(text, 'x', 3999);
	text[3999] = '\0';
	assert_int_equal(qr_encode(text, &q), SD_INVALID);
	assert_null(q);
	assert_non_null(strstr(err_msg(), "too long"));
	free(text);
}

/* "test_pdf --render-to FILE": the sample order into FILE, for the
 * cross-process check above. */
static int render_child(const char *path)
{
	struct pdf_order o = sample_order();
	unsigned char *b;
	size_t n;
	FILE *f;
	int ok;

	if (pdf_render(&o, &b, &n) != SD_OK) {
		fprintf(stderr, "pdf_render: %s\n", err_msg());
		return 1;
	}
	ok = (f = fopen(path, "wb")) && fwrite(b, 1, n, f) == n;
	ok = f && fclose(f) == 0 && ok;
	free(b);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_two_tickets_pass_qpdf_and_read_back,
						tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_one_page_per_ticket, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_outside_winansi_becomes_question_mark,
						tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_long_fields_stay_on_the_page, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_same_input_same_bytes, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test(test_bad_input_refused),
		cmocka_unit_test_setup_teardown(test_drawn_qr_matches_matrix, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test(test_qr_square_with_dark_and_light),
		cmocka_unit_test(test_qr_too_long_refused),
	};

	if (argc == 3 && strcmp(argv[1], "--render-to") == 0)
		return render_child(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
