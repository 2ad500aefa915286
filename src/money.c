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

enum sd_result money_total(int64_t price_minor, int64_t seats, int64_t *total)
{
	*total = 0;
	if (price_minor < 0 || price_minor > MONEY_MINOR_MAX || seats < 0 || seats > 100)
		return err_set(SD_INVALID, "no price of %lld for %lld seats",
			       (long long)price_minor, (long long)seats);
	*total = price_minor * seats;
	return SD_OK;
}
