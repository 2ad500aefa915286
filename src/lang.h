/*
 * lang.h: the venue's language for what a buyer reads in the shop: a date
 * and time ("Fr. 4. Dez. 2026, 20:00") and an amount of money ("25,00 €"),
 * as the `locale` setting names them (a BCP 47 tag: "en-GB", "de-DE").
 * The times are in the venue's zone (timefmt.h); the words of the pages
 * themselves are English.
 *
 * The tags known are a table here (LANG_TAGS), not the system's locales: a
 * box installed from a minimal Debian has none generated, and a shop's
 * page must read the same on every box.
 */
#ifndef SD_LANG_H
#define SD_LANG_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define LANG_TAGS "en-GB, en-US, en-IE, de-DE, de-AT, de-CH, fr-FR, fr-BE, nl-NL, nl-BE, " \
		  "es-ES, it-IT, pt-PT, da-DK, sv-SE, nb-NO, pl-PL"
#define LANG_DEFAULT "en-GB"
#define LANG_TEXT_MAX 64		/* a formatted date or amount, with its NUL */

/* lang_set: the venue's locale from now on (tag as in LANG_TAGS, any case;
 * NULL or "": LANG_DEFAULT).  SD_INVALID naming the tags known.  Call it
 * before any thread starts. */
enum sd_result lang_set(const char *tag);

/* lang_valid: SD_OK when tag is one lang_set takes. */
enum sd_result lang_valid(const char *tag);

/* lang_tag: the tag in force ("de-DE"), for the pages' lang attribute. */
const char *lang_tag(void);

/* lang_when: the date and time at ms in the venue's zone, as the locale
 * writes them, with the zone's abbreviation ("Fri 4 Dec 2026, 20:00 CET"). */
void lang_when(int64_t ms, char *buf, size_t size);

/* lang_money: minor units of currency as the locale writes an amount
 * ("€1,234.50", "1.234,50 €", "CHF 25.00"). */
void lang_money(int64_t minor, const char *currency, char *buf, size_t size);

#endif
