/*
 * version.c: what `stagedoor --version` prints.  Each library's version is
 * asked of the module that wraps it.
 */
#include "version.h"

#include "code.h"
#include "db.h"
#include "handler.h"
#include "http.h"
#include "mail_curl.h"
#include "pdf.h"
#include "qr.h"

int version_print(FILE *out)
{
	int pq = db_pg_lib_version();
	char tls[32];

	code_lib_version(tls, sizeof tls);
	fprintf(out, "stagedoor %s\n", STAGEDOOR_VERSION);
	fprintf(out, "schema %d (SQLite), %d (PostgreSQL)\n", db_migration_count,
		db_migration_count_pg);
	fprintf(out, "SQLite %s, libpq %d.%d, libcurl %s, libharu %s, mbedTLS %s, "
		     "libmicrohttpd %s, libqrencode %s, jansson %s\n",
		db_sqlite_lib_version(), pq / 10000, pq % 10000, mail_curl_lib_version(),
		pdf_lib_version(), tls, http_lib_version(), qr_lib_version(),
		handler_json_lib_version());
	return fflush(out) == 0 && !ferror(out) ? 0 : -1;
}
