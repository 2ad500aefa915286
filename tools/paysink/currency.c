/*
 * currency.c: money as Stripe counts it (docs.stripe.com/currencies, as it
 * stood around API version 2024-06-20): which currencies it takes, what an
 * amount of each means, which amounts it refuses, and its minimum charges.
 *
 * Every amount in the API is an integer in the currency's "Stripe units":
 *   - two-decimal currencies (the rest): cents, 1050 is 10.50;
 *   - zero-decimal currencies (BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF VND
 *     VUV XAF XOF XPF): whole units, 500 is 500 JPY;
 *   - ISK and UGX: "transitioned to a zero-decimal currency, but backwards
 *     compatibility requires you to represent it as a two-decimal value,
 *     where the decimal amount is always 00": 500 is 5 ISK, and 550 is
 *     refused.  Stripe's page also lists UGX among the zero-decimal
 *     currencies; its special case is the more specific rule, and the
 *     stricter one, so it is the one kept here;
 *   - three-decimal currencies (BHD JOD KWD OMR TND): thousandths, and "these
 *     API calls require the least-significant (last) digit to be 0";
 *   - HUF and TWD are zero-decimal for payouts only ("even though you can
 *     charge two-decimal amounts"): for charges and refunds, two-decimal.
 *
 * Minimum charges: Stripe's table is per settlement currency and converts
 * other currencies into it; paysink has no settlement currency and no
 * exchange rates, so it applies the table to the charge's own currency and
 * nothing to the currencies the table does not list (the strictest reading
 * it can check).  The table is the one of 2023 and mid-2024.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

/* Stripe's presentment currencies for card payments (mid-2024 copy of
 * docs.stripe.com/currencies), and the three-decimal ones that some account
 * countries get: anything else is "Invalid currency". */
static const char supported[] =
	"usd aed afn all amd ang aoa ars aud awg azn bam bbd bdt bgn bif bmd bnd bob brl bsd bwp "
	"byn bzd cad cdf chf clp cny cop crc cve czk djf dkk dop dzd egp etb eur fjd fkp gbp gel "
	"gip gmd gnf gtq gyd hkd hnl htg huf idr ils inr isk jmd jpy kes kgs khr kmf krw kyd kzt "
	"lak lbp lkr lrd lsl mad mdl mga mkd mmk mnt mop mur mvr mwk mxn myr mzn nad ngn nio nok "
	"npr nzd pab pen pgk php pkr pln pyg qar ron rsd rub rwf sar sbd scr sek sgd shp sle sos "
	"srd std szl thb tjs top try ttd twd tzs uah ugx uyu uzs vnd vuv wst xaf xcd xof xpf yer "
	"zar zmw bhd jod kwd omr tnd";

static const char zero_decimal[] = "bif clp djf gnf jpy kmf krw mga pyg rwf vnd vuv xaf xof xpf";
static const char whole_in_cents[] = "isk ugx";	/* two-decimal, always 00 */
static const char three_decimal[] = "bhd jod kwd omr tnd";

static const struct {
	char cur[4];
	long long min;			/* Stripe's units */
	const char *symbol;		/* as Stripe's message writes it, or "" */
} minimums[] = {
	{ "usd", 50, "$" }, { "aed", 200, "" }, { "aud", 50, "$" }, { "bgn", 100, "" },
	{ "brl", 50, "R$" }, { "cad", 50, "$" }, { "chf", 50, "" }, { "czk", 1500, "" },
	{ "dkk", 250, "" }, { "eur", 50, "€" }, { "gbp", 30, "£" }, { "hkd", 400, "$" },
	{ "huf", 17500, "" }, { "inr", 50, "₹" }, { "jpy", 50, "¥" }, { "mxn", 1000, "$" },
	{ "myr", 200, "" }, { "nok", 300, "" }, { "nzd", 50, "$" }, { "pln", 200, "" },
	{ "ron", 200, "" }, { "sek", 300, "" }, { "sgd", 50, "$" }, { "thb", 1000, "" },
};

/* cur (three lower-case letters) is a word of list */
static int in_list(const char *list, const char *cur)
{
	const char *p;

	if (strlen(cur) != 3)
		return 0;
	for (p = list; (p = strstr(p, cur)); p += 3)
		if ((p == list || p[-1] == ' ') && (p[3] == ' ' || p[3] == '\0'))
			return 1;
	return 0;
}

int currency_supported(const char *cur)
{
	return in_list(supported, cur);
}

const char *currency_list(void)
{
	static char list[sizeof supported * 2];
	size_t i, n = 0;

	if (!list[0]) {
		for (i = 0; supported[i]; i++) {
			if (supported[i] == ' ')
				list[n++] = ',';
			list[n++] = supported[i];
		}
		list[n] = '\0';
	}
	return list;
}

/* the digits after the point in Stripe's units, and those worth showing */
static int api_decimals(const char *cur)
{
	if (in_list(zero_decimal, cur))
		return 0;
	return in_list(three_decimal, cur) ? 3 : 2;
}

int currency_amount_ok(const char *cur, long long amount, const char *param, struct ps_err *e)
{
	char up[4] = { 0 };
	size_t i;

	for (i = 0; i < 3 && cur[i]; i++)
		up[i] = (char)(cur[i] - 32);
	/* Stripe's wording for these refusals is not published; this says
	 * what its currencies page says */
	if (in_list(whole_in_cents, cur) && amount % 100 != 0) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_integer", param,
			"Invalid amount: %lld. %s amounts are given with two decimals that are "
			"always 00 (for example, 500 for 5 %s); they must be evenly divisible by "
			"100.", amount, up, up);
		return -1;
	}
	if (in_list(three_decimal, cur) && amount % 10 != 0) {
		err_set(e, 400, "invalid_request_error", "parameter_invalid_integer", param,
			"Invalid amount: %lld. %s is a three-decimal currency and the last digit of "
			"its amounts must be 0 (round to the nearest ten).", amount, up);
		return -1;
	}
	return 0;
}

long long currency_minimum(const char *cur)
{
	size_t i;

	for (i = 0; i < sizeof minimums / sizeof minimums[0]; i++)
		if (strcmp(minimums[i].cur, cur) == 0)
			return minimums[i].min;
	return 0;
}

/* amount's number as it reads: "12.50", "500", "5" (5 ISK), "5.120" */
static void amount_number(char *out, size_t size, long long amount, const char *cur)
{
	int dec = api_decimals(cur);
	long long unit = dec == 0 ? 1 : dec == 2 ? 100 : 1000;
	long long whole = amount / unit, frac = amount % unit;
	const char *sign = amount < 0 ? "-" : "";

	if (whole < 0)
		whole = -whole;
	if (frac < 0)
		frac = -frac;
	if (dec == 0 || in_list(whole_in_cents, cur))
		snprintf(out, size, "%s%lld", sign, whole);
	else
		snprintf(out, size, "%s%lld.%0*lld", sign, whole, dec, frac);
}

void amount_format(char *out, size_t size, long long amount, const char *currency)
{
	char num[40], up[4] = { 0 };
	size_t i;

	for (i = 0; i < 3 && currency[i]; i++)
		up[i] = (char)(currency[i] >= 'a' && currency[i] <= 'z' ? currency[i] - 32
									: currency[i]);
	amount_number(num, sizeof num, amount, currency);
	snprintf(out, size, "%s %s", num, up);
}

void amount_format_stripe(char *out, size_t size, long long amount, const char *currency)
{
	const char *symbol = "";
	char num[40];
	size_t i;

	for (i = 0; i < sizeof minimums / sizeof minimums[0]; i++)
		if (strcmp(minimums[i].cur, currency) == 0)
			symbol = minimums[i].symbol;
	amount_number(num, sizeof num, amount, currency);
	snprintf(out, size, "%s%s %s", symbol, num, currency);
}
