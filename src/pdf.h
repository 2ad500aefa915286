/*
 * pdf.h: the ticket PDF, rendered with libharu (this module owns it).
 *
 * One page per ticket: event name, venue, date and time, seat label, buyer
 * name, order id, and the ticket code as text and as a QR code.  Text comes
 * in as UTF-8 and is drawn in a standard font with WinAnsi (CP1252)
 * encoding, so Latin-1 names (José Müller, Zoë) render as written; a
 * character the encoding lacks is drawn as '?'.
 *
 * The same input renders to the same bytes every time: no clock, no random
 * id in the file.  A second render of an order stores identical bytes.
 */
#ifndef SD_PDF_H
#define SD_PDF_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

struct pdf_ticket {
	const char *seat_label;		/* "A-12" */
	const char *code;		/* the signed ticket code, also drawn as QR */
};

struct pdf_order {
	const char *event_name;
	const char *venue;
	const char *starts_at;		/* as shown: "2026-12-31 20:00 UTC" */
	const char *buyer_name;
	const char *order_id;		/* the order's public id */
	const struct pdf_ticket *tickets;
	int n_tickets;			/* >= 1: one page each */
};

/*
 * pdf_render: the order's PDF.  Every field must be valid UTF-8 of at most
 * 1,024 bytes and each code at most 80 (one line at the smallest type);
 * anything else is SD_INVALID, naming the field.
 * [out] *buf (free()) and *len: the file's bytes.
 */
enum sd_result pdf_render(const struct pdf_order *o, unsigned char **buf, size_t *len);

/* pdf_lib_version: libharu's version as linked ("2.4.3"). */
const char *pdf_lib_version(void);

#endif
