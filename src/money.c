/*
 * money.c: ISO 4217 codes, prices parsed and printed in minor units.
 */
#include "money.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* The current ISO 4217 codes (list one, 2024), by the digits of their
 * minor unit; every code not listed under 0, 3 or 4 has 2. */
static const char CODES_0[] = "BIF CLP DJF GNF ISK JPY KMF KRW PYG RWF UGX UYI VND VUV XAF XOF XPF";
static const char CODES_3[] = "BHD IQD JOD KWD LYD OMR TND";
static const char CODES_4[] = "CLF UYW";
static const char CODES_2[] =
	"AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BOV BRL BSD "
	"BTN BWP BYN BZD CAD CDF CHE CHF CHW CNY COP COU CRC CUP CVE CZK DKK DOP DZD EGP "
	"ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR "
	"JMD KES KGS KHR KPW KYD KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MRU "
	"MUR MVR MWK MXN MXV MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN QAR "
	"RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC SYP SZL THB TJS "
	"TMT TOP TRY TTD TWD TZS UAH USD USN UYU UZS VED VES WST XCD YER ZAR ZMW ZWG ZWL";

static int listed(const char *list, const char *code)
{
	size_t i, n = strlen(list);

	for (i = 0; i + 3 <= n; i += 4)
		if (memcmp(list + i, code, 3) == 0)
			return 1;
	return 0;
}

int money_exponent(const char *code)
{
	if (!code || strlen(code) != MONEY_CURRENCY_LEN)
		return -1;
	if (listed(CODES_2, code))
		return 2;
	if (listed(CODES_0, code))
		return 0;
	if (listed(CODES_3, code))
		return 3;
	if (listed(CODES_4, code))
		return 4;
	return -1;
}

enum sd_result money_currency_norm(const char *in, char *out, int *exponent)
{
	int i, e;

	out[0] = '\0';
	if (!in || strlen(in) != MONEY_CURRENCY_LEN)
		return err_set(SD_INVALID, "a currency is three letters of ISO 4217 (EUR, GBP, "
			       "USD)");
	for (i = 0; i < MONEY_CURRENCY_LEN; i++) {
		if (!isalpha((unsigned char)in[i]))
			return err_set(SD_INVALID, "a currency is three letters of ISO 4217 (EUR, "
				       "GBP, USD)");
		out[i] = (char)toupper((unsigned char)in[i]);
	}
	out[MONEY_CURRENCY_LEN] = '\0';
	if ((e = money_exponent(out)) < 0) {
		out[0] = '\0';
		return err_set(SD_INVALID, "no ISO 4217 currency is called '%.3s'", in);
	}
	if (exponent)
		*exponent = e;
	return SD_OK;
}

enum sd_result money_parse(const char *s, const char *code, int64_t *minor)
{
	int e = money_exponent(code), digits = 0, decimals = -1;
	int64_t v = 0;
	const char *p;

	*minor = 0;
	if (e < 0)
		return err_set(SD_INVALID, "no ISO 4217 currency is called '%s'", code ? code : "");
	for (p = s ? s : ""; *p; p++) {
		if (*p == '.' && decimals < 0 && digits > 0) {
			decimals = 0;
			continue;
		}
		if (!isdigit((unsigned char)*p))
			return err_set(SD_INVALID, "a price is digits with at most one '.' (25.00), "
				       "not '%.40s'", s);
		if (decimals >= 0 && ++decimals > e)
			return err_set(SD_INVALID, "%s has %d decimal%s, '%.40s' has more", code, e,
				       e == 1 ? "" : "s", s);
		if (v > MONEY_MINOR_MAX)
			break;
		v = v * 10 + (*p - '0');
		digits++;
	}
	if (!digits || decimals == 0)
		return err_set(SD_INVALID, "a price is digits with at most one '.' (25.00), "
			       "not '%.40s'", s ? s : "");
	for (decimals = decimals < 0 ? 0 : decimals; decimals < e && v <= MONEY_MINOR_MAX;
	     decimals++)
		v *= 10;
	if (v > MONEY_MINOR_MAX)
		return err_set(SD_INVALID, "a price may be at most %lld minor units of %s",
			       MONEY_MINOR_MAX, code);
	*minor = v;
	return SD_OK;
}

void money_plain(int64_t minor, const char *code, char *buf, size_t size)
{
	int e = money_exponent(code), i;
	char frac[8];
	int64_t div = 1, f;

	if (e <= 0 || minor < 0) {
		snprintf(buf, size, "%lld", (long long)minor);
		return;
	}
	for (i = 0; i < e; i++)
		div *= 10;
	for (f = minor % div, i = e; i > 0; i--, f /= 10)
		frac[i - 1] = (char)('0' + f % 10);
	frac[e] = '\0';
	snprintf(buf, size, "%lld.%s", (long long)(minor / div), frac);
}

/* ---- Stripe's units (money.h) ------------------------------------------- */

/* The currencies Stripe takes for card payments (its presentment list,
 * docs.stripe.com/currencies, 2024) and the three-decimal ones it takes for
 * some accounts; ISO codes missing here (IQD, LYD, CLF, XDR...) it does not. */
static const char STRIPE_CODES[] =
	"USD AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BIF BMD BND BOB BRL "
	"BSD BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CVE CZK DJF DKK DOP DZD EGP ETB EUR "
	"FJD FKP GBP GEL GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR ISK JMD JPY KES "
	"KGS KHR KMF KRW KYD KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD MMK MNT MOP MUR MVR "
	"MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP PKR PLN PYG QAR RON RSD "
	"RUB RWF SAR SBD SCR SEK SGD SHP SLE SOS SRD SZL THB TJS TOP TRY TTD TWD TZS UAH "
	"UGX UYU UZS VND VUV WST XAF XCD XOF XPF YER ZAR ZMW BHD JOD KWD OMR TND";
/* Stripe's zero-decimal currencies; ISK and UGX are zero-decimal too, but
 * Stripe keeps them two-decimal "for backwards compatibility" (amounts
 * divisible by 100), so they are not listed */
static const char STRIPE_ZERO[] = "BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF VND VUV XAF XOF XPF";
static const char STRIPE_THREE[] = "BHD JOD KWD OMR TND";	/* the last digit 0 */
#define STRIPE_UNITS_MAX 99999999LL	/* eight digits, whatever the currency */

/* Stripe's minimum charge per currency, in ISO minor units (its table of
 * 2024, where the charge is in the settlement currency) */
static const struct {
	char code[4];
	int64_t minor;
} STRIPE_MINIMUM[] = {
	{ "USD", 50 }, { "AED", 200 }, { "AUD", 50 }, { "BGN", 100 }, { "BRL", 50 },
	{ "CAD", 50 }, { "CHF", 50 }, { "CZK", 1500 }, { "DKK", 250 }, { "EUR", 50 },
	{ "GBP", 30 }, { "HKD", 400 }, { "HUF", 17500 }, { "INR", 50 }, { "JPY", 50 },
	{ "MXN", 1000 }, { "MYR", 200 }, { "NOK", 300 }, { "NZD", 50 }, { "PLN", 200 },
	{ "RON", 200 }, { "SEK", 300 }, { "SGD", 50 }, { "THB", 1000 },
};

static int stripe_exponent(const char *code)
{
	if (money_exponent(code) < 0 || !listed(STRIPE_CODES, code))
		return -1;
	return listed(STRIPE_ZERO, code) ? 0 : listed(STRIPE_THREE, code) ? 3 : 2;
}

enum sd_result money_stripe_units(const char *code, int64_t minor, int64_t *units)
{
	int iso = money_exponent(code), st = stripe_exponent(code);
	int64_t v = minor;

	*units = 0;
	if (st < 0)
		return err_set(SD_INVALID, "Stripe takes no payments in %s", code ? code : "");
	for (; iso < st; iso++)
		v *= 10;
	for (; iso > st; iso--) {
		if (v % 10)
			return err_set(SD_INVALID, "Stripe charges %s in whole units only", code);
		v /= 10;
	}
	if (st == 3 && v % 10)
		return err_set(SD_INVALID, "Stripe charges %s in hundredths only (the third "
			       "decimal 0)", code);
	if (v < 0 || v > STRIPE_UNITS_MAX)
		return err_set(SD_INVALID, "Stripe charges at most %lld of its units of %s at once",
			       STRIPE_UNITS_MAX, code);
	*units = v;
	return SD_OK;
}

enum sd_result money_stripe_minor(const char *code, int64_t units, int64_t *minor)
{
	int iso = money_exponent(code), st = stripe_exponent(code);
	int64_t v = units;

	*minor = 0;
	if (st < 0)
		return err_set(SD_INVALID, "Stripe takes no payments in %s", code ? code : "");
	if (units < 0 || units > STRIPE_UNITS_MAX)
		return err_set(SD_INVALID, "%lld is no amount of Stripe's", (long long)units);
	for (; st < iso; st++)
		v *= 10;
	for (; st > iso; st--) {
		if (v % 10)
			return err_set(SD_INVALID, "%lld of Stripe's units is no whole amount of %s",
				       (long long)units, code);
		v /= 10;
	}
	*minor = v;
	return SD_OK;
}

int64_t money_stripe_minimum(const char *code)
{
	size_t i;

	for (i = 0; code && i < sizeof STRIPE_MINIMUM / sizeof STRIPE_MINIMUM[0]; i++)
		if (strcmp(STRIPE_MINIMUM[i].code, code) == 0)
			return STRIPE_MINIMUM[i].minor;
	return 0;
}

enum sd_result money_stripe_price_valid(const char *code, int64_t minor)
{
	char least[MONEY_TEXT_MAX];
	int64_t units, min = money_stripe_minimum(code);
	enum sd_result r;

	if (minor == 0 && money_exponent(code) >= 0)
		return SD_OK;
	if ((r = money_stripe_units(code, minor, &units)) != SD_OK)
		return r;
	if (minor < min) {
		money_plain(min, code, least, sizeof least);
		return err_set(SD_INVALID, "Stripe charges at least %s %s: a lower price cannot be "
			       "paid online (0 makes the seats free)", least, code);
	}
	return SD_OK;
}

enum sd_result money_total(int64_t price_minor, int64_t seats, int64_t *total)
{
	*total = 0;
	if (price_minor < 0 || price_minor > MONEY_MINOR_MAX || seats < 0 || seats > 100)
		return err_set(SD_INVALID, "no price of %lld for %lld seats",
			       (long long)price_minor, (long long)seats);
	*total = price_minor * seats;
	return SD_OK;
}
