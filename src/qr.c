/*
 * qr.c: QR codes with libqrencode (this module owns it), for pdf.c.
 *
 * The symbol is handed back as plain 0/1 bytes so that pdf.c draws it
 * without knowing libqrencode's layout (its module bytes carry flags in the
 * high bits; only bit 0 says dark).
 *
 * Invariants:
 *  - a struct qr from qr_encode has width >= 21 (version 1) and exactly
 *    width * width bytes in dark, each 0 or 1;
 *  - the same text gives the same symbol: version and mask are chosen by
 *    libqrencode from the text alone, so a re-rendered PDF stays identical.
 */
#define _POSIX_C_SOURCE 200809L
#include "qr.h"

#include <errno.h>
#include <qrencode.h>
#include <stdlib.h>
#include <string.h>

enum sd_result qr_encode(const char *text, struct qr **out)
{
	QRcode *c = NULL;
	struct qr *q = NULL;
	enum sd_result r = SD_OK;
	size_t n, i;

	*out = NULL;
	if (!text || !*text)
		return err_set(SD_INVALID, "QR code text is empty");
	/* version 0: the smallest that fits; 8-bit mode, case-sensitive, so
	 * the scanner reads back exactly the bytes we were given */
	errno = 0;
	c = QRcode_encodeString(text, 0, QR_ECLEVEL_M, QR_MODE_8, 1);
	if (!c) {
		if (errno == ENOMEM)
			r = err_set(SD_NOMEM, "out of memory encoding a QR code");
		else if (errno == ERANGE)
			r = err_set(SD_INVALID, "text of %zu bytes is too long for a QR code",
				    strlen(text));
		else
			r = err_set(SD_INVALID, "QR encoding failed: %s", strerror(errno));
		goto out;
	}
	n = (size_t)c->width * (size_t)c->width;
	q = malloc(sizeof *q);
	if (!q || !(q->dark = malloc(n))) {
		free(q);
		q = NULL;
		r = err_set(SD_NOMEM, "out of memory encoding a QR code");
		goto out;
	}
	q->width = c->width;
	for (i = 0; i < n; i++)
		q->dark[i] = c->data[i] & 1;
	*out = q;
out:
	QRcode_free(c);
	return r;
}

void qr_free(struct qr *q)
{
	if (!q)
		return;
	free(q->dark);
	free(q);
}

const char *qr_lib_version(void)
{
	return QRcode_APIVersionString();
}
