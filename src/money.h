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

/*
 * Stripe's units.  Stripe counts an amount in units of its own per
 * currency, which are not always ISO 4217's minor units (its published
 * table, docs.stripe.com/currencies): zero-decimal currencies (JPY, KRW, and
 * MGA, which ISO gives two decimals) are whole units; ISK and UGX, which
 * ISO gives none, are sent with two decimals that are always 00; the
 * three-decimal currencies (BHD, JOD, KWD, OMR, TND) must end in 0.  The box
 * keeps and shows ISO's minor units everywhere; the payment module turns
 * them into Stripe's at the request and back at the answer.
 */

/* money_stripe_units: an amount of ISO minor units of code as Stripe's
 * units.  SD_INVALID (saying why) for a currency Stripe does not take or an
 * amount Stripe cannot charge in it (a fraction of an ariary, a last digit
 * of a dinar's thousandths). */
enum sd_result money_stripe_units(const char *code, int64_t minor, int64_t *units);

/* money_stripe_minor: Stripe's units of code back as ISO minor units.
 * SD_INVALID for an amount that is no whole number of them. */
enum sd_result money_stripe_minor(const char *code, int64_t units, int64_t *minor);

/* money_stripe_minimum: the least Stripe charges in code, in ISO minor units
 * (0.50 EUR: 50); 0 when Stripe publishes none for it (it then asks the
 * equivalent of its settlement currency's, known only at the charge). */
int64_t money_stripe_minimum(const char *code);

/* money_stripe_price_valid: a seat's price in code that Stripe can charge:
 * a currency it takes, its units, and at least its minimum.  A price of 0
 * passes (a free seat is not charged).  SD_INVALID saying why. */
enum sd_result money_stripe_price_valid(const char *code, int64_t minor);

/* money_total: seats times a price, SD_INVALID past MONEY_MINOR_MAX * 100. */
enum sd_result money_total(int64_t price_minor, int64_t seats, int64_t *total);

#endif
