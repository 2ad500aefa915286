/*
 * pdf.c: the ticket PDF, rendered with libharu (this module owns it).
 *
 * One A6 page per ticket, laid out top to bottom:
 *
 *     +-----------------------------------+
 *     | ADMIT ONE            TICKET 1 OF 2 |  dark header band
 *     | Event name (shrunk or two lines)   |
 *     +====================================+  accent rule
 *     | VENUE                              |
 *     | DATE & TIME            SEAT        |
 *     | BUYER                  ORDER       |
 *     | - - - - - - - - - - - - - - - - -  |  perforation
 *     |          [ QR code with its        |
 *     |            4-module quiet zone ]   |
 *     |            CODE AS TEXT            |
 *     |      present this at the door      |
 *     +------------------------------------+
 *
 * Invariants:
 *  - the output depends on the input alone.  libharu writes no date unless
 *    asked (we never call HPDF_SetInfoDateAttr) and no /ID unless the file is
 *    encrypted (it is not); its other state is per document, and zlib's
 *    deflate is deterministic.  So a re-render stores the same bytes.
 *  - every string reaches libharu as WinAnsi (CP1252) bytes made here from
 *    strict UTF-8; input that is not UTF-8 is refused, never guessed at.
 *  - a line never runs past its box: it shrinks to a floor size, then is cut
 *    with an ellipsis.  The code is never cut: PDF_CODE_MAX characters fit
 *    its line at the floor size, and a longer code is refused.
 *  - libharu reports errors through hp_on_error, which keeps the first one;
 *    nothing longjmps.  A document with a recorded error is never returned.
 */
#define _POSIX_C_SOURCE 200809L
#include "pdf.h"

#include <hpdf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qr.h"
#include "text.h"

/* ======================== UTF-8 to WinAnsi =============================== */

/* The code points CP1252 puts at 0x80..0x9F, where Latin-1 has C1 controls. */
static const struct {
	unsigned cp;
	unsigned char b;
} cp1252_high[] = {
	{ 0x20AC, 0x80 }, { 0x201A, 0x82 }, { 0x0192, 0x83 }, { 0x201E, 0x84 },
	{ 0x2026, 0x85 }, { 0x2020, 0x86 }, { 0x2021, 0x87 }, { 0x02C6, 0x88 },
	{ 0x2030, 0x89 }, { 0x0160, 0x8A }, { 0x2039, 0x8B }, { 0x0152, 0x8C },
	{ 0x017D, 0x8E }, { 0x2018, 0x91 }, { 0x2019, 0x92 }, { 0x201C, 0x93 },
	{ 0x201D, 0x94 }, { 0x2022, 0x95 }, { 0x2013, 0x96 }, { 0x2014, 0x97 },
	{ 0x02DC, 0x98 }, { 0x2122, 0x99 }, { 0x0161, 0x9A }, { 0x203A, 0x9B },
	{ 0x0153, 0x9C }, { 0x017E, 0x9E }, { 0x0178, 0x9F },
};

#define ELLIPSIS "\x85"		/* U+2026 in CP1252 */

/* The longest field we draw, in bytes.  A page shows a few dozen characters
 * of any one field; the cap keeps far below libharu's 65535-byte limit on
 * the strings it measures, past which it fails instead of measuring. */
#define PDF_TEXT_MAX 1024

/* The longest ticket code: 80 Courier characters (600/1000 em each) at the
 * 5 pt floor take 240 pt, inside the page's 257 pt line; a byte is at most
 * one character.  Codes from code.c are under 64. */
#define PDF_CODE_MAX 80

static unsigned char cp1252_byte(unsigned cp)
{
	size_t i;

	/* white space becomes a space: a tab or newline typed into a name must
	 * not reach the text operator, where it would show as nothing or '?' */
	if (cp == '\t' || cp == '\n' || cp == '\r')
		return ' ';
	if ((cp >= 0x20 && cp < 0x7F) || (cp >= 0xA0 && cp <= 0xFF))
		return (unsigned char)cp;
	for (i = 0; i < sizeof cp1252_high / sizeof cp1252_high[0]; i++)
		if (cp1252_high[i].cp == cp)
			return cp1252_high[i].b;
	return '?';
}

/*
 * winansi_from_utf8: s in CP1252, characters it lacks as '?'.
 * [in] what names the field for the message.  [out] *out, free().
 */
static enum sd_result winansi_from_utf8(const char *what, const char *s, char **out)
{
	const unsigned char *p = (const unsigned char *)s;
	char *w, *o;
	uint32_t cp;
	size_t n;

	*out = NULL;
	if (!s)
		return err_set(SD_INVALID, "ticket PDF: %s is missing", what);
	if (strlen(s) > PDF_TEXT_MAX)
		return err_set(SD_INVALID, "ticket PDF: %s is longer than %d bytes", what, PDF_TEXT_MAX);
	/* every code point takes at least one byte, so the result is no longer */
	if (!(o = w = malloc(strlen(s) + 1)))
		return err_set(SD_NOMEM, "out of memory rendering the ticket PDF");
	while (*p) {
		if (!(n = text_utf8_next(p, &cp))) {
			free(o);
			return err_set(SD_INVALID, "ticket PDF: %s is not valid UTF-8 (byte %zu)",
				       what, (size_t)(p - (const unsigned char *)s));
		}
		*w++ = (char)cp1252_byte(cp);
		p += n;
	}
	*w = '\0';
	*out = o;
	return SD_OK;
}

/* ======================== libharu errors ================================= */

struct hp_err {
	HPDF_STATUS no;		/* the first error libharu reported, 0 = none */
	HPDF_STATUS detail;	/* its detail number (often an errno or index) */
};

/* libharu calls this on each error, then the failing call returns its code;
 * keeping the first error is enough, since we check it before trusting any
 * result.  No longjmp: libharu's own state stays consistent for HPDF_Free. */
static void HPDF_STDCALL hp_on_error(HPDF_STATUS no, HPDF_STATUS detail, void *user)
{
	struct hp_err *e = user;

	if (e->no == 0) {
		e->no = no;
		e->detail = detail;
	}
}

/* hp_fail: libharu's recorded error as our code, message set once here. */
static enum sd_result hp_fail(const struct hp_err *e, const char *what)
{
	if (e->no == HPDF_FAILD_TO_ALLOC_MEM)
		return err_set(SD_NOMEM, "out of memory rendering the ticket PDF (%s)", what);
	if (e->no == 0)	/* a call failed without calling the handler */
		return err_set(SD_IO, "libharu failed with no error number (%s)", what);
	return err_set(SD_IO, "libharu error 0x%04lX (detail %lu) rendering the ticket PDF (%s)",
		       (unsigned long)e->no, (unsigned long)e->detail, what);
}

/* ======================== layout ========================================= */

/* A6 portrait in points (105 x 148 mm).  Layout y values below are measured
 * down from the top edge, as one reads the page; put_* turn them around for
 * PDF's bottom-up space. */
#define PAGE_W		297.64f
#define PAGE_H		419.53f
#define MARGIN		20.0f
#define INNER_W		(PAGE_W - 2 * MARGIN)
#define COL2_X		172.0f			/* the right column */
#define COL1_W		(COL2_X - MARGIN - 10.0f)
#define COL2_W		(PAGE_W - MARGIN - COL2_X)

#define HEADER_H	62.0f
#define PERF_Y		176.0f
#define QR_TOP		186.0f
#define QR_SIZE		184.0f	/* the symbol and its quiet zone: ~65 mm */
#define QR_QUIET	4	/* modules of white around the symbol (ISO 18004) */
#define CODE_Y		384.0f
#define FOOT_Y		402.0f

#define LABEL_SIZE	6.5f

enum align { AL_LEFT, AL_CENTER, AL_RIGHT };

struct fonts {
	HPDF_Font regular;	/* Helvetica */
	HPDF_Font bold;		/* Helvetica-Bold */
	HPDF_Font mono;		/* Courier-Bold: the code, to be read out or typed */
};

/* The text of one page in WinAnsi: the order's fields, converted once, and
 * the current ticket's. */
struct page_text {
	char *event, *venue, *starts_at, *buyer, *order_id;	/* per order */
	char *seat, *code;					/* per ticket */
};

static float text_width(HPDF_Font f, const char *s, size_t n, float size)
{
	HPDF_TextWidth tw = HPDF_Font_TextWidth(f, (const HPDF_BYTE *)s, (HPDF_UINT)n);

	return (float)tw.width * size / 1000.0f;
}

/*
 * put_text: one line of s with its baseline y below the top, in the box
 * [x, x + w], aligned; at size, shrunk as far as min_size to fit, and past
 * that cut short with an ellipsis unless keep is set.
 */
static enum sd_result put_text(HPDF_Page page, HPDF_Font font, const char *s, float x, float y,
			       float w, float size, float min_size, enum align al, int keep)
{
	size_t n = strlen(s);
	float tw = text_width(font, s, n, size), at;
	char *cut = NULL;
	const char *t = s;

	if (tw > w) {
		/* scale to fit, rounded down to a tenth of a point so the sizes
		 * written into the file stay short and exact */
		size = (float)(int)(size * w / tw * 10.0f) / 10.0f;
		if (size < min_size)
			size = min_size;
		tw = text_width(font, s, n, size);
	}
	if (tw > w && !keep) {
		float ew = text_width(font, ELLIPSIS, 1, size);
		HPDF_UINT k = HPDF_Font_MeasureText(font, (const HPDF_BYTE *)s, (HPDF_UINT)n,
						    w - ew, size, 0, 0, HPDF_FALSE, NULL);

		if (!(cut = malloc((size_t)k + 2)))
			return err_set(SD_NOMEM, "out of memory rendering the ticket PDF");
		memcpy(cut, s, k);
		memcpy(cut + k, ELLIPSIS, 2);
		t = cut;
		tw = text_width(font, cut, (size_t)k + 1, size);
	}
	at = al == AL_LEFT ? x : al == AL_CENTER ? x + (w - tw) / 2 : x + w - tw;
	HPDF_Page_BeginText(page);
	HPDF_Page_SetFontAndSize(page, font, size);
	HPDF_Page_TextOut(page, at, PAGE_H - y, t);
	HPDF_Page_EndText(page);
	free(cut);
	return SD_OK;
}

/* put_label: the small grey caption above a value. */
static enum sd_result put_label(HPDF_Page page, const struct fonts *f, const char *s, float x,
				float y, float w)
{
	HPDF_Page_SetRGBFill(page, 0.45f, 0.47f, 0.52f);
	return put_text(page, f->bold, s, x, y, w, LABEL_SIZE, LABEL_SIZE, AL_LEFT, 0);
}

/*
 * put_title: the event name in the header: one line at 18 pt down to 13 pt;
 * a longer name wraps at a space (or anywhere, for one long word) onto a
 * second line, which is cut if it still does not fit.
 */
static enum sd_result put_title(HPDF_Page page, HPDF_Font font, const char *s)
{
	size_t n = strlen(s), k;
	enum sd_result r;
	char *first;

	if (text_width(font, s, n, 13.0f) <= INNER_W)
		return put_text(page, font, s, MARGIN, 46.0f, INNER_W, 18.0f, 13.0f, AL_LEFT, 0);
	k = HPDF_Font_MeasureText(font, (const HPDF_BYTE *)s, (HPDF_UINT)n, INNER_W, 13.0f, 0, 0,
				  HPDF_TRUE, NULL);
	if (k == 0)
		k = HPDF_Font_MeasureText(font, (const HPDF_BYTE *)s, (HPDF_UINT)n, INNER_W, 13.0f,
					  0, 0, HPDF_FALSE, NULL);
	if (k == 0)	/* not even one character fits: cannot happen at 13 pt */
		k = 1;
	if (!(first = malloc(k + 1)))
		return err_set(SD_NOMEM, "out of memory rendering the ticket PDF");
	memcpy(first, s, k);
	/* the break comes after a space, whose width MeasureText did not count */
	while (k > 1 && first[k - 1] == ' ')
		k--;
	first[k] = '\0';
	r = put_text(page, font, first, MARGIN, 36.0f, INNER_W, 13.0f, 13.0f, AL_LEFT, 0);
	free(first);
	while (s[k] == ' ')
		k++;
	if (r == SD_OK)
		r = put_text(page, font, s + k, MARGIN, 52.0f, INNER_W, 13.0f, 11.0f, AL_LEFT, 0);
	return r;
}

/*
 * put_qr: the symbol in a size x size square whose top-left corner is x, y
 * (from the top), with QR_QUIET white modules on each side.  Each row's runs
 * of dark modules become one rectangle, and all of them one filled path, so
 * that a rasteriser sees their union and draws no hairline seams.
 */
static void put_qr(HPDF_Page page, const struct qr *q, float x, float y, float size)
{
	float m = size / (float)(q->width + 2 * QR_QUIET);
	float ox = x + QR_QUIET * m, oy = y + QR_QUIET * m;
	int row, c0, c1;

	/* the quiet zone is part of the symbol: paint it, not the page */
	HPDF_Page_SetRGBFill(page, 1.0f, 1.0f, 1.0f);
	HPDF_Page_Rectangle(page, x, PAGE_H - y - size, size, size);
	HPDF_Page_Fill(page);

	HPDF_Page_SetRGBFill(page, 0.0f, 0.0f, 0.0f);
	for (row = 0; row < q->width; row++) {
		const unsigned char *d = q->dark + (size_t)row * (size_t)q->width;

		for (c0 = 0; c0 < q->width; c0 = c1) {
			if (!d[c0]) {
				c1 = c0 + 1;
				continue;
			}
			for (c1 = c0 + 1; c1 < q->width && d[c1]; c1++)
				;
			HPDF_Page_Rectangle(page, ox + (float)c0 * m,
					    PAGE_H - oy - (float)(row + 1) * m,
					    (float)(c1 - c0) * m, m);
		}
	}
	HPDF_Page_Fill(page);
}

/* put_page: ticket i of n.  [in] e: the document's error record, read here
 * so that a libharu failure on this page is reported as this page's. */
static enum sd_result put_page(HPDF_Doc pdf, const struct hp_err *e, const struct fonts *f,
			       const struct page_text *t, const char *code_utf8, int i, int n)
{
	static const HPDF_UINT16 dash[] = { 4, 3 };
	struct qr *q = NULL;
	enum sd_result r;
	HPDF_Page page;
	char counter[48];

	/* the QR carries the code's own bytes, not their WinAnsi form */
	if ((r = qr_encode(code_utf8, &q)) != SD_OK)
		goto out;
	if (!(page = HPDF_AddPage(pdf))) {
		r = hp_fail(e, "adding a page");
		goto out;
	}
	HPDF_Page_SetWidth(page, PAGE_W);
	HPDF_Page_SetHeight(page, PAGE_H);

	/* header band, with an accent rule under it */
	HPDF_Page_SetRGBFill(page, 0.09f, 0.13f, 0.24f);
	HPDF_Page_Rectangle(page, 0, PAGE_H - HEADER_H, PAGE_W, HEADER_H);
	HPDF_Page_Fill(page);
	HPDF_Page_SetRGBFill(page, 0.96f, 0.66f, 0.16f);
	HPDF_Page_Rectangle(page, 0, PAGE_H - HEADER_H - 3.0f, PAGE_W, 3.0f);
	HPDF_Page_Fill(page);

	snprintf(counter, sizeof counter, "TICKET %d OF %d", i + 1, n);
	HPDF_Page_SetRGBFill(page, 0.96f, 0.66f, 0.16f);
	if ((r = put_text(page, f->bold, "ADMIT ONE", MARGIN, 17.0f, INNER_W / 2, 7.0f, 7.0f,
			  AL_LEFT, 0)) != SD_OK ||
	    (r = put_text(page, f->bold, counter, MARGIN + INNER_W / 2, 17.0f, INNER_W / 2, 7.0f,
			  7.0f, AL_RIGHT, 0)) != SD_OK)
		goto out;
	HPDF_Page_SetRGBFill(page, 1.0f, 1.0f, 1.0f);
	if ((r = put_title(page, f->bold, t->event)) != SD_OK)
		goto out;

	/* the facts, label above value */
	if ((r = put_label(page, f, "VENUE", MARGIN, 80.0f, INNER_W)) != SD_OK ||
	    (r = put_label(page, f, "DATE & TIME", MARGIN, 110.0f, COL1_W)) != SD_OK ||
	    (r = put_label(page, f, "SEAT", COL2_X, 110.0f, COL2_W)) != SD_OK ||
	    (r = put_label(page, f, "BUYER", MARGIN, 146.0f, COL1_W)) != SD_OK ||
	    (r = put_label(page, f, "ORDER", COL2_X, 146.0f, COL2_W)) != SD_OK)
		goto out;
	HPDF_Page_SetRGBFill(page, 0.08f, 0.08f, 0.1f);
	if ((r = put_text(page, f->regular, t->venue, MARGIN, 93.0f, INNER_W, 11.0f, 8.0f,
			  AL_LEFT, 0)) != SD_OK ||
	    (r = put_text(page, f->bold, t->starts_at, MARGIN, 128.0f, COL1_W, 11.0f, 8.0f,
			  AL_LEFT, 0)) != SD_OK ||
	    (r = put_text(page, f->bold, t->seat, COL2_X, 129.0f, COL2_W, 18.0f, 9.0f,
			  AL_LEFT, 0)) != SD_OK ||
	    (r = put_text(page, f->regular, t->buyer, MARGIN, 160.0f, COL1_W, 10.5f, 7.5f,
			  AL_LEFT, 0)) != SD_OK ||
	    (r = put_text(page, f->regular, t->order_id, COL2_X, 160.0f, COL2_W, 10.5f, 6.5f,
			  AL_LEFT, 0)) != SD_OK)
		goto out;

	/* perforation: tear here, keep the lower half for the door */
	HPDF_Page_SetRGBStroke(page, 0.7f, 0.72f, 0.76f);
	HPDF_Page_SetLineWidth(page, 0.75f);
	HPDF_Page_SetDash(page, dash, 2, 0);
	HPDF_Page_MoveTo(page, 10.0f, PAGE_H - PERF_Y);
	HPDF_Page_LineTo(page, PAGE_W - 10.0f, PAGE_H - PERF_Y);
	HPDF_Page_Stroke(page);
	HPDF_Page_SetDash(page, NULL, 0, 0);

	put_qr(page, q, (PAGE_W - QR_SIZE) / 2, QR_TOP, QR_SIZE);

	/* the code as text, for a door without a scanner; never cut (see
	 * PDF_CODE_MAX) */
	HPDF_Page_SetRGBFill(page, 0.0f, 0.0f, 0.0f);
	if ((r = put_text(page, f->mono, t->code, MARGIN, CODE_Y, INNER_W, 9.0f, 5.0f,
			  AL_CENTER, 1)) != SD_OK)
		goto out;
	HPDF_Page_SetRGBFill(page, 0.45f, 0.47f, 0.52f);
	r = put_text(page, f->regular, "Show this code at the door. Each code admits one person once.",
		     MARGIN, FOOT_Y, INNER_W, 6.5f, 5.0f, AL_CENTER, 0);
	/* drawing calls are not checked one by one: the first failure among
	 * them is in *e, and the page is not good unless that is empty */
	if (r == SD_OK && e->no) {
		snprintf(counter, sizeof counter, "page %d", i + 1);
		r = hp_fail(e, counter);
	}
out:
	qr_free(q);
	return r;
}

/* ======================== rendering ====================================== */

static void page_text_free(struct page_text *t)
{
	free(t->event);
	free(t->venue);
	free(t->starts_at);
	free(t->buyer);
	free(t->order_id);
	free(t->seat);
	free(t->code);
}

/* check_input: refuse what cannot make a ticket before libharu starts, so a
 * bad field in ticket 40 costs no rendering of the first 39. */
static enum sd_result check_input(const struct pdf_order *o, struct page_text *t)
{
	enum sd_result r;
	char what[48];
	char *tmp;
	int i;

	if (!o)
		return err_set(SD_INVALID, "ticket PDF: no order");
	if (o->n_tickets < 1)
		return err_set(SD_INVALID, "ticket PDF: an order needs at least one ticket, got %d",
			       o->n_tickets);
	if (!o->tickets)
		return err_set(SD_INVALID, "ticket PDF: tickets are missing");
	if ((r = winansi_from_utf8("event name", o->event_name, &t->event)) != SD_OK ||
	    (r = winansi_from_utf8("venue", o->venue, &t->venue)) != SD_OK ||
	    (r = winansi_from_utf8("date and time", o->starts_at, &t->starts_at)) != SD_OK ||
	    (r = winansi_from_utf8("buyer name", o->buyer_name, &t->buyer)) != SD_OK ||
	    (r = winansi_from_utf8("order id", o->order_id, &t->order_id)) != SD_OK)
		return r;
	for (i = 0; i < o->n_tickets; i++) {
		snprintf(what, sizeof what, "ticket %d seat label", i + 1);
		if ((r = winansi_from_utf8(what, o->tickets[i].seat_label, &tmp)) != SD_OK)
			return r;
		free(tmp);
		snprintf(what, sizeof what, "ticket %d code", i + 1);
		if ((r = winansi_from_utf8(what, o->tickets[i].code, &tmp)) != SD_OK)
			return r;
		free(tmp);
		if (!*o->tickets[i].code)
			return err_set(SD_INVALID, "ticket PDF: %s is empty", what);
		if (strlen(o->tickets[i].code) > PDF_CODE_MAX)
			return err_set(SD_INVALID, "ticket PDF: %s is longer than %d bytes",
				       what, PDF_CODE_MAX);
	}
	return SD_OK;
}

enum sd_result pdf_render(const struct pdf_order *o, unsigned char **buf, size_t *len)
{
	struct page_text t = { 0 };
	struct hp_err e = { 0, 0 };
	struct fonts f;
	HPDF_Doc pdf = NULL;
	HPDF_UINT32 size = 0, got;
	unsigned char *b = NULL;
	enum sd_result r;
	int i;

	*buf = NULL;
	*len = 0;
	if ((r = check_input(o, &t)) != SD_OK)
		goto out;
	/* the handler is given at creation so that even HPDF_New's own
	 * allocations report through it */
	if (!(pdf = HPDF_New(hp_on_error, &e))) {
		r = err_set(SD_NOMEM, "out of memory starting the ticket PDF");
		goto out;
	}
	HPDF_SetCompressionMode(pdf, HPDF_COMP_ALL);
	HPDF_SetInfoAttr(pdf, HPDF_INFO_CREATOR, "Stagedoor Box");
	f.regular = HPDF_GetFont(pdf, "Helvetica", "WinAnsiEncoding");
	f.bold = HPDF_GetFont(pdf, "Helvetica-Bold", "WinAnsiEncoding");
	f.mono = HPDF_GetFont(pdf, "Courier-Bold", "WinAnsiEncoding");
	if (e.no || !f.regular || !f.bold || !f.mono) {
		r = hp_fail(&e, "fonts");
		goto out;
	}
	for (i = 0; i < o->n_tickets; i++) {
		free(t.seat);
		free(t.code);
		t.seat = t.code = NULL;
		if ((r = winansi_from_utf8("seat label", o->tickets[i].seat_label, &t.seat)) != SD_OK ||
		    (r = winansi_from_utf8("code", o->tickets[i].code, &t.code)) != SD_OK)
			goto out;
		if ((r = put_page(pdf, &e, &f, &t, o->tickets[i].code, i, o->n_tickets)) != SD_OK)
			goto out;
	}
	if (HPDF_SaveToStream(pdf) != HPDF_OK || e.no) {
		r = hp_fail(&e, "saving");
		goto out;
	}
	size = HPDF_GetStreamSize(pdf);
	if (size == 0 || !(b = malloc(size))) {
		r = size ? err_set(SD_NOMEM, "out of memory reading the ticket PDF")
			 : hp_fail(&e, "an empty file");
		goto out;
	}
	/* one read of exactly the stream's size: the memory stream returns
	 * HPDF_OK for it and only reports EOF when asked for more */
	got = size;
	if (HPDF_ReadFromStream(pdf, b, &got) != HPDF_OK || got != size || e.no) {
		r = e.no ? hp_fail(&e, "reading the stream")
			 : err_set(SD_IO, "ticket PDF: read %lu of %lu bytes from libharu",
				   (unsigned long)got, (unsigned long)size);
		goto out;
	}
	*buf = b;
	*len = size;
	b = NULL;
	r = SD_OK;
out:
	free(b);
	if (pdf)
		HPDF_Free(pdf);
	page_text_free(&t);
	return r;
}

const char *pdf_lib_version(void)
{
	return HPDF_GetVersion();
}
