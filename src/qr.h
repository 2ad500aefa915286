/*
 * qr.h: QR codes with libqrencode (this module owns it), for pdf.c.
 */
#ifndef SD_QR_H
#define SD_QR_H

#include "result.h"

struct qr {
	int width;		/* modules per side */
	unsigned char *dark;	/* width * width, row-major: 1 = dark module */
};

/* qr_encode: text as a QR code, error correction M.  [out] *out, qr_free(). */
enum sd_result qr_encode(const char *text, struct qr **out);

void qr_free(struct qr *q);

/* qr_lib_version: libqrencode's version as linked ("4.1.1"). */
const char *qr_lib_version(void);

#endif
