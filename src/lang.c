/*
 * lang.c: dates and amounts in the venue's locale (lang.h).
 */
#define _GNU_SOURCE
#include "lang.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "money.h"

struct lang {
	const char *tag;
	const char *days;	/* seven abbreviations from Sunday, by '|' */
	const char *months;	/* twelve, by '|' */
	/* the date: %a weekday, %d day, %m month name, %y year, %t time */
	const char *date;
	int h12;		/* 1: "8:00 PM" */
	char dec, group;	/* separators: decimal, thousands ('\0': none) */
	int symbol_after;	/* 1: "25,00 €"; 0: "€25.00" */
	int symbol_space;	/* a space between symbol and number */
};

#define EN_DAYS "Sun|Mon|Tue|Wed|Thu|Fri|Sat"
#define EN_MONTHS "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
#define DE_DAYS "So.|Mo.|Di.|Mi.|Do.|Fr.|Sa."
#define DE_MONTHS "Jan.|Feb.|März|Apr.|Mai|Juni|Juli|Aug.|Sept.|Okt.|Nov.|Dez."
#define FR_DAYS "dim.|lun.|mar.|mer.|jeu.|ven.|sam."
#define FR_MONTHS "janv.|févr.|mars|avr.|mai|juin|juil.|août|sept.|oct.|nov.|déc."
#define NL_DAYS "zo|ma|di|wo|do|vr|za"
#define NL_MONTHS "jan|feb|mrt|apr|mei|jun|jul|aug|sep|okt|nov|dec"

static const struct lang LANGS[] = {
	{ "en-GB", EN_DAYS, EN_MONTHS, "%a %d %m %y, %t", 0, '.', ',', 0, 0 },
	{ "en-US", EN_DAYS, EN_MONTHS, "%a, %m %d, %y, %t", 1, '.', ',', 0, 0 },
	{ "en-IE", EN_DAYS, EN_MONTHS, "%a %d %m %y, %t", 0, '.', ',', 0, 0 },
	{ "de-DE", DE_DAYS, DE_MONTHS, "%a, %d. %m %y, %t", 0, ',', '.', 1, 1 },
	{ "de-AT", DE_DAYS, DE_MONTHS, "%a, %d. %m %y, %t", 0, ',', '.', 0, 1 },
	{ "de-CH", DE_DAYS, DE_MONTHS, "%a, %d. %m %y, %t", 0, '.', '\'', 0, 1 },
	{ "fr-FR", FR_DAYS, FR_MONTHS, "%a %d %m %y, %t", 0, ',', ' ', 1, 1 },
	{ "fr-BE", FR_DAYS, FR_MONTHS, "%a %d %m %y, %t", 0, ',', '.', 1, 1 },
	{ "nl-NL", NL_DAYS, NL_MONTHS, "%a %d %m %y, %t", 0, ',', '.', 0, 1 },
	{ "nl-BE", NL_DAYS, NL_MONTHS, "%a %d %m %y, %t", 0, ',', '.', 1, 1 },
	{ "es-ES", "dom|lun|mar|mié|jue|vie|sáb", "ene|feb|mar|abr|may|jun|jul|ago|sept|oct|nov|dic",
	  "%a, %d %m %y, %t", 0, ',', '.', 1, 1 },
	{ "it-IT", "dom|lun|mar|mer|gio|ven|sab", "gen|feb|mar|apr|mag|giu|lug|ago|set|ott|nov|dic",
	  "%a %d %m %y, %t", 0, ',', '.', 1, 1 },
	{ "pt-PT", "dom.|seg.|ter.|qua.|qui.|sex.|sáb.",
	  "jan.|fev.|mar.|abr.|mai.|jun.|jul.|ago.|set.|out.|nov.|dez.", "%a, %d %m %y, %t", 0,
	  ',', ' ', 1, 1 },
	{ "da-DK", "søn.|man.|tirs.|ons.|tors.|fre.|lør.",
	  "jan.|feb.|mar.|apr.|maj|jun.|jul.|aug.|sep.|okt.|nov.|dec.", "%a %d. %m %y, %t", 0,
	  ',', '.', 1, 1 },
	{ "sv-SE", "sön|mån|tis|ons|tors|fre|lör", "jan.|feb.|mars|apr.|maj|juni|juli|aug.|sep.|"
	  "okt.|nov.|dec.", "%a %d %m %y, %t", 0, ',', ' ', 1, 1 },
	{ "nb-NO", "søn.|man.|tir.|ons.|tor.|fre.|lør.", "jan.|feb.|mar.|apr.|mai|jun.|jul.|aug.|"
	  "sep.|okt.|nov.|des.", "%a %d. %m %y, %t", 0, ',', ' ', 1, 1 },
	{ "pl-PL", "niedz.|pon.|wt.|śr.|czw.|pt.|sob.", "sty|lut|mar|kwi|maj|cze|lip|sie|wrz|paź|"
	  "lis|gru", "%a, %d %m %y, %t", 0, ',', ' ', 1, 1 },
};

static const struct lang *cur = &LANGS[0];

static const struct lang *lang_find(const char *tag)
{
	size_t i;

	if (!tag || !*tag)
		return &LANGS[0];
	for (i = 0; i < sizeof LANGS / sizeof LANGS[0]; i++)
		if (strcasecmp(LANGS[i].tag, tag) == 0 ||
		    (strlen(tag) == 5 && tag[2] == '_' && strncasecmp(LANGS[i].tag, tag, 2) == 0 &&
		     strcasecmp(LANGS[i].tag + 3, tag + 3) == 0))
			return &LANGS[i];
	return NULL;
}

enum sd_result lang_valid(const char *tag)
{
	if (!lang_find(tag))
		return err_set(SD_INVALID, "locale '%.16s' is not one of %s", tag, LANG_TAGS);
	return SD_OK;
}

enum sd_result lang_set(const char *tag)
{
	const struct lang *l = lang_find(tag);

	if (!l)
		return lang_valid(tag);
	cur = l;
	return SD_OK;
}

const char *lang_tag(void)
{
	return cur->tag;
}

/* word: the nth '|'-separated word of list into buf */
static void word(const char *list, int n, char *buf, size_t size)
{
	const char *p = list, *e;

	while (n-- > 0 && (p = strchr(p, '|')))
		p++;
	if (!p) {
		snprintf(buf, size, "?");
		return;
	}
	e = strchr(p, '|');
	snprintf(buf, size, "%.*s", (int)(e ? (size_t)(e - p) : strlen(p)), p);
}

/* put: append s at *at in buf, never past size */
static void put(char *buf, size_t size, size_t *at, const char *s)
{
	int n = snprintf(buf + *at, size - *at, "%s", s);

	if (n > 0)
		*at = *at + (size_t)n < size ? *at + (size_t)n : size - 1;
}

void lang_when(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
	struct tm tm;
	const char *f;
	char w[24];
	size_t at = 0;

	if (!size)
		return;
	buf[0] = '\0';
	if (!localtime_r(&t, &tm))
		gmtime_r(&t, &tm);
	for (f = cur->date; *f && at + 1 < size; f++) {
		if (*f != '%' || !f[1]) {
			snprintf(w, sizeof w, "%c", *f);
		} else {
			switch (*++f) {
			case 'a': word(cur->days, tm.tm_wday, w, sizeof w); break;
			case 'm': word(cur->months, tm.tm_mon, w, sizeof w); break;
			case 'd': snprintf(w, sizeof w, "%d", tm.tm_mday); break;
			case 'y': snprintf(w, sizeof w, "%d", tm.tm_year + 1900); break;
			default:
				if (cur->h12)
					snprintf(w, sizeof w, "%d:%02d %s",
						 tm.tm_hour % 12 ? tm.tm_hour % 12 : 12, tm.tm_min,
						 tm.tm_hour < 12 ? "AM" : "PM");
				else
					snprintf(w, sizeof w, "%02d:%02d", tm.tm_hour, tm.tm_min);
			}
		}
		put(buf, size, &at, w);
	}
	snprintf(w, sizeof w, " %s", tm.tm_zone ? tm.tm_zone : "");
	put(buf, size, &at, w);
}

/* symbol: how the locale names a currency: its sign for the few that have
 * one everyone reads the same, else its code */
static const char *symbol(const char *code)
{
	if (strcmp(code, "EUR") == 0)
		return "€";
	if (strcmp(code, "GBP") == 0)
		return "£";
	if (strcmp(code, "USD") == 0)
		return strcmp(cur->tag, "en-US") == 0 ? "$" : "US$";
	return code;
}

void lang_money(int64_t minor, const char *currency, char *buf, size_t size)
{
	char plain[MONEY_TEXT_MAX], num[MONEY_TEXT_MAX * 2];
	const char *sym = symbol(currency), *dot;
	size_t n = 0, i, whole;

	money_plain(minor, currency, plain, sizeof plain);
	dot = strchr(plain, '.');
	whole = dot ? (size_t)(dot - plain) : strlen(plain);
	for (i = 0; i < whole && n + 2 < sizeof num; i++) {
		if (i && cur->group && (whole - i) % 3 == 0)
			num[n++] = cur->group;
		num[n++] = plain[i];
	}
	if (dot && n + 1 < sizeof num) {
		num[n++] = cur->dec;
		snprintf(num + n, sizeof num - n, "%s", dot + 1);
	} else {
		num[n] = '\0';
	}
	/* a code (not a sign) always stands apart from the number */
	if (cur->symbol_after)
		snprintf(buf, size, "%s %s", num, sym);
	else
		snprintf(buf, size, "%s%s%s", sym,
			 cur->symbol_space || sym == currency ? " " : "", num);
}
