/*
 * money.h: amounts of money as the box keeps them: an integer count of a
 * currency's minor units (cents, pence; yen have none) and the currency's
 * ISO 4217 code.  Nothing here is a float: a price is parsed from and
 * printed as decimal text, digit by digit.
 *
 * How an amount reads to a buyer (symbol, separators) is the venue's
 * locale's (locale.h); this module gives the plain form, "25.00 EUR".
 */
#ifndef SD_MONEY_H
#define SD_MONEY_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define MONEY_CURRENCY_LEN 3
#define MONEY_MINOR_MAX 99999999LL	/* a seat's price at most, in minor units */
#define MONEY_TEXT_MAX 32		/* a formatted amount, with its NUL */

/*
 * money_currency_norm: in names an ISO 4217 currency ("eur" or "EUR");
 * [out] out (4 bytes) its code in capitals, *exponent (may be NULL) its
 * minor units' digits (EUR 2, JPY 0, KWD 3).  SD_INVALID when in is no
 * current ISO 4217 code.
 */
enum sd_result money_currency_norm(const char *in, char *out, int *exponent);

/* money_exponent: the digits of code's minor unit; -1 for no known code. */
int money_exponent(const char *code);

/*
 * money_parse: a price as a person writes it for currency code ("25",
 * "25.00", "25.5", "0.99"; JPY "2500") into minor units.  SD_INVALID for a
 * sign, a comma, more decimals than the currency has, no digits, or more
 * than MONEY_MINOR_MAX minor units.
 */
enum sd_result money_parse(const char *s, const char *code, int64_t *minor);

/* money_plain: minor units of code as decimal text, "25.00" (JPY "2500"). */
void money_plain(int64_t minor, const char *code, char *buf, size_t size);

/* money_total: seats times a price, SD_INVALID past MONEY_MINOR_MAX * 100. */
enum sd_result money_total(int64_t price_minor, int64_t seats, int64_t *total);

#endif
