/*
 * tls.c: `stagedoor tls init|show|renew`: the box CA and the HTTPS
 * server's certificate in <state dir>/tls (cert.h).  Parsing and printing
 * only; the certificates are made and read in cert.c.
 *
 * Neither command opens the database: the state folder is found as every
 * command finds it (--state-dir, $STAGEDOOR_STATE_DIR, the config file's
 * state_dir, else the folder of --db / $STAGEDOOR_DB / the default
 * database), so `tls init --state-dir DIR` works on a box with no database
 * yet.  Every --name and --ip is checked before anything is written: bad
 * input exits 2 with one line on stderr and leaves the folder as it was.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "args.h"
#include "cert.h"
#include "cli.h"
#include "clock.h"
#include "cmd/commands.h"
#include "statedir.h"

static const char tls_init_usage[] =
	"tls init [--name HOST]... [--ip ADDR]... [--ca-key-out FILE | --ca-key FILE] [--new-ca] "
	"[--renew] [--state-dir DIR] [--db PATH]";
static const char tls_renew_usage[] =
	"tls renew [--name HOST]... [--ip ADDR]... [--ca-key FILE] [--state-dir DIR] [--db PATH]";
static const char tls_show_usage[] = "tls show [--state-dir DIR] [--db PATH] [--json]";

/* ======================== shared ========================================= */

/* tls_where: the box's state folder (dir, PATH_MAX bytes) and its TLS
 * paths, without opening its database; 0 or the exit status. */
static int tls_where(const char *dbp, const char *state, char *dir, struct cert_paths *p)
{
	enum sd_result r;

	if ((r = statedir_path(cli_db_path(dbp), cli_state_dir(state), dir, PATH_MAX)) !=
		    SD_OK ||
	    (r = cert_paths(dir, p)) != SD_OK)
		return cli_fail(r);
	return 0;
}

/* tls_abs: path made absolute for printing (the config lines must not
 * depend on the folder `run` starts in); path itself when it cannot be. */
static const char *tls_abs(const char *path, char *buf)
{
	return realpath(path, buf) ? buf : path;
}

/* tls_date: ms since the epoch as "2026-05-01T12:00:00Z". */
static void tls_date(int64_t ms, char *buf, size_t size)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;

	if (!gmtime_r(&t, &tm) || !strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, size, "?");
}

/* tls_names_line: "box.example, 192.0.2.10" */
static void tls_names_line(const struct cert_names *n, char *buf, size_t size)
{
	size_t o = 0;
	int i;

	buf[0] = '\0';
	for (i = 0; i < n->n_dns + n->n_ip && o < size; i++)
		o += (size_t)snprintf(buf + o, size - o, "%s%s", i ? ", " : "",
				      i < n->n_dns ? n->dns[i] : n->ip[i - n->n_dns]);
}

/* ======================== init =========================================== */

/*
 * tls_split: take every --name and --ip (--name V or --name=V, repeatable)
 * out of argv into names, checking each; the other words go to rest.
 * [out] *given: how many were given.  0, or the exit status (printed).
 */
static int tls_split(int argc, char **argv, struct cert_names *names, int *given, char **rest,
		     int *nrest)
{
	int i;

	*given = 0;
	*nrest = 0;
	for (i = 0; i < argc; i++) {
		const char *a = argv[i], *val;
		size_t len = strncmp(a, "--name", 6) == 0 ? 6 : strncmp(a, "--ip", 4) == 0 ? 4 : 0;
		enum sd_result r;

		if (strcmp(a, "--") == 0) {
			while (i < argc)
				rest[(*nrest)++] = argv[i++];
			break;
		}
		if (!len || (a[len] != '\0' && a[len] != '=')) {
			rest[(*nrest)++] = argv[i];
			continue;
		}
		val = a[len] == '=' ? a + len + 1 : i + 1 < argc ? argv[++i] : NULL;
		if (!val) {
			fprintf(stderr, "stagedoor: %.*s needs a value\n", (int)len, a);
			return 2;
		}
		r = len == 6 ? cert_names_add_dns(names, val) : cert_names_add_ip(names, val);
		if (r != SD_OK)
			return cli_fail(r);
		(*given)++;
	}
	return 0;
}

/* tls_init_print: what init made or kept, and the lines to configure. */
static int tls_init_print(const struct cert_paths *p, const struct cert_init_report *rep)
{
	char a[PATH_MAX], b[PATH_MAX], names[CERT_NAMES_MAX * 2 * (CERT_DNS_MAX + 2)], until[32];
	struct cert_info ca, srv;
	enum sd_result r;
	int64_t days;

	if ((r = cert_info_load(p->ca_cert, &ca)) != SD_OK ||
	    (r = cert_info_load(p->server_cert, &srv)) != SD_OK)
		return cli_fail(r);
	printf("%s box CA: %s (key %s)\n",
	       rep->ca_made ? "made a new" : rep->ca_remade ? "made the certificate of the" : "kept the",
	       tls_abs(p->ca_cert, a), tls_abs(rep->ca_key_path, b));
	if (rep->ca_remade)
		printf("  ca.pem was missing: made again from the existing ca.key (a new "
		       "fingerprint; give devices the new ca.pem)\n");
	if (rep->ca_replaced)
		printf("  a new CA in place of the old one: give devices the new ca.pem and remove "
		       "the old one from them\n");
	if (rep->ca_key_moved || strcmp(rep->ca_key_path, p->ca_key) != 0)
		printf("  the CA's key is kept off the box, in %s: keep it safe and away from the "
		       "box; stagedoor tls renew --ca-key %s renews the server certificate\n",
		       tls_abs(rep->ca_key_path, b), rep->ca_key_path);
	if (!ca.name_constrained)
		printf("  warning: this CA may sign for any name (made before name constraints): "
		       "stagedoor tls init --new-ca makes one that signs for the box's names only\n");
	tls_names_line(&srv.names, names, sizeof names);
	tls_date(srv.not_after_ms, until, sizeof until);
	days = (srv.not_after_ms - clock_now_ms()) / (86400LL * 1000);
	printf("%s server certificate: %s (key %s)\n",
	       rep->server_made ? "made the" : rep->server_renewed ? "renewed the" : "kept the",
	       tls_abs(p->server_cert, a), tls_abs(p->server_key, b));
	printf("  for %s; valid until %s (%lld days; %lld left)\n", names, until,
	       (long long)((srv.not_after_ms - srv.not_before_ms) / (86400LL * 1000)),
	       (long long)days);
	if (!rep->server_made && !rep->server_renewed)
		printf("  kept as it is: stagedoor tls renew issues a new one under the same CA\n");
	if (rep->names_ignored)
		printf("  the names given were not applied: stagedoor tls renew issues a certificate "
		       "for them\n");
	if (days < CERT_RENEW_WARN_DAYS)
		printf("  warning: it expires in %lld days: stagedoor tls renew\n", (long long)days);
	printf("CA fingerprint (SHA-256): %s\n", ca.fingerprint);
	printf("devices trust %s (the box serves it at GET /ca.pem)\n", tls_abs(p->ca_cert, a));
	printf("in the config file:\n  http_tls_cert = %s\n  http_tls_key = %s\n",
	       tls_abs(p->server_cert, a), tls_abs(p->server_key, b));
	return 0;
}

/* --name and --ip repeat: tls_split takes them before the rest is parsed */
#define TLS_NAME_OPTS(v)                                                             \
	{ "name", ARG_STR, (v), 0, 0, 0, "HOST",                                     \
	  "a name of the box the certificate is for (repeat for more)", 0 },         \
	{ "ip", ARG_STR, (v), 0, 0, 0, "ADDR",                                       \
	  "an address of the box the certificate is for (repeat for more)", 0 }

/* tls_init_run: `tls init` (renew_cmd 0) and `tls renew` (1) */
static int tls_init_run(int argc, char **argv, int renew_cmd)
{
	const char *dbp = NULL, *state = NULL, *split = NULL;
	int renew = renew_cmd, given = 0, npos, nrest, rc;
	struct cert_init_opts o = { 0 };
	struct arg_opt init_opts[] = {
		TLS_NAME_OPTS(&split),
		{ "ca-key-out", ARG_STR, &o.ca_key_out, 0, 0, 0, "FILE",
		  "keep the CA's key in FILE, off the box (a new CA's, or moved from tls/)", 0 },
		{ "ca-key", ARG_STR, &o.ca_key, 0, 0, 0, "FILE",
		  "the CA's key, kept off the box (to sign a server certificate)", 0 },
		{ "new-ca", ARG_FLAG, &o.new_ca, 0, 0, 0, NULL,
		  "a new CA in place of the old one (devices must trust the new ca.pem)", 0 },
		{ "renew", ARG_FLAG, &renew, 0, 0, 0, NULL, "as stagedoor tls renew", 0 },
		ARG_STATE_DIR(&state),
		ARG_DB(&dbp),
		ARG_END,
	};
	struct arg_opt renew_opts[] = {
		TLS_NAME_OPTS(&split),
		{ "ca-key", ARG_STR, &o.ca_key, 0, 0, 0, "FILE",
		  "the CA's key, kept off the box (tls init --ca-key-out)", 0 },
		ARG_STATE_DIR(&state),
		ARG_DB(&dbp),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], **rest, dir[PATH_MAX];
	struct cert_names names;
	struct cert_init_report rep;
	struct cert_paths p;
	enum sd_result r;

	memset(&names, 0, sizeof names);
	if (!(rest = calloc((size_t)argc + 1, sizeof *rest)))
		return cli_fail(err_set(SD_NOMEM, "out of memory"));
	rc = tls_split(argc, argv, &names, &given, rest, &nrest);
	if (rc == 0)
		rc = cli_parse(nrest, rest, renew_cmd ? renew_opts : init_opts, pos, &npos, 0, 0,
			       renew_cmd ? tls_renew_usage : tls_init_usage);
	free(rest);
	if (rc != 0 || (rc = tls_where(dbp, state, dir, &p)) != 0)
		return rc;
	o.names = given ? &names : NULL;
	o.renew = renew;
	/* a file that is not what it should be is no usage error: exit 1 */
	if ((r = cert_init(dir, &o, clock_now_ms(), &rep)) != SD_OK)
		return cli_fail(r == SD_INVALID ? SD_IO : r);
	return tls_init_print(&p, &rep);
}

static int tls_init(int argc, char **argv)
{
	return tls_init_run(argc, argv, 0);
}

static int tls_renew(int argc, char **argv)
{
	return tls_init_run(argc, argv, 1);
}

/* ======================== show =========================================== */

static void tls_json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

/* tls_json_cert: one certificate as a JSON object (no newline). */
static void tls_json_cert(const char *path, const struct cert_info *in, int64_t days)
{
	char a[PATH_MAX], from[32], until[32];
	int i;

	tls_date(in->not_before_ms, from, sizeof from);
	tls_date(in->not_after_ms, until, sizeof until);
	printf("{\"path\":");
	tls_json_str(tls_abs(path, a));
	printf(",\"subject\":");
	tls_json_str(in->subject);
	printf(",\"issuer\":");
	tls_json_str(in->issuer);
	printf(",\"serial\":\"%s\",\"fingerprint_sha256\":\"%s\",\"not_before\":\"%s\","
	       "\"not_after\":\"%s\",\"days_left\":%lld,", in->serial, in->fingerprint, from, until,
	       (long long)days);
	if (in->is_ca)
		printf("\"name_constrained\":%s,", in->name_constrained ? "true" : "false");
	printf("\"dns\":[");
	for (i = 0; i < in->names.n_dns; i++) {
		printf(i ? "," : "");
		tls_json_str(in->names.dns[i]);
	}
	printf("],\"ip\":[");
	for (i = 0; i < in->names.n_ip; i++)
		printf("%s\"%s\"", i ? "," : "", in->names.ip[i]);
	printf("]}");
}

/* tls_show_text: one certificate, for people. */
static void tls_show_text(const char *title, const char *path, const struct cert_info *in,
			  int64_t days)
{
	char a[PATH_MAX], until[32], names[CERT_NAMES_MAX * 2 * (CERT_DNS_MAX + 2)];

	tls_date(in->not_after_ms, until, sizeof until);
	printf("%s %s\n  subject  %s\n  SHA-256  %s\n  serial   %s\n", title, tls_abs(path, a),
	       in->subject, in->fingerprint, in->serial);
	if (in->names.n_dns + in->names.n_ip) {
		tls_names_line(&in->names, names, sizeof names);
		printf("  names    %s\n", names);
	}
	printf("  expires  %s (%lld days left)\n", until, (long long)days);
}

static int tls_show(int argc, char **argv)
{
	const char *dbp = NULL, *state = NULL;
	int json = 0, npos, rc, have_srv;
	struct arg_opt opts[] = {
		ARG_STATE_DIR(&state),
		ARG_DB(&dbp),
		ARG_JSON(&json),
		ARG_END,
	};
	char *pos[ARGS_MAX_POS], a[PATH_MAX], dir[PATH_MAX];
	struct cert_info ca, srv;
	struct cert_paths p;
	int64_t now = clock_now_ms(), ca_days = 0, srv_days = 0;
	enum sd_result r, key = SD_OK;

	if ((rc = cli_parse(argc, argv, opts, pos, &npos, 0, 0, tls_show_usage)) != 0 ||
	    (rc = tls_where(dbp, state, dir, &p)) != 0)
		return rc;
	if ((r = cert_info_load(p.ca_cert, &ca)) == SD_NOT_FOUND) {
		fprintf(stderr, "stagedoor: no box CA in %s: run stagedoor tls init\n",
			tls_abs(p.dir, a));
		return 1;
	}
	if (r != SD_OK || (r = cert_days_left(p.ca_cert, now, &ca_days)) != SD_OK)
		return cli_fail(r == SD_INVALID ? SD_IO : r);
	r = cert_info_load(p.server_cert, &srv);
	if (r != SD_OK && r != SD_NOT_FOUND)
		return cli_fail(r == SD_INVALID ? SD_IO : r);
	have_srv = r == SD_OK;
	if (have_srv) {
		(void)cert_days_left(p.server_cert, now, &srv_days);
		key = cert_key_check(p.server_cert, p.server_key);
	}
	if (json) {
		printf("{\"ca\":");
		tls_json_cert(p.ca_cert, &ca, ca_days);
		printf(",\"ca_url_path\":\"/ca.pem\",\"server\":");
		if (have_srv)
			tls_json_cert(p.server_cert, &srv, srv_days);
		else
			printf("null");
		printf(",\"server_key_ok\":%s}\n", have_srv && key == SD_OK ? "true" : "false");
	} else {
		tls_show_text("box CA:", p.ca_cert, &ca, ca_days);
		printf("  give devices this file to trust; the box serves it at GET /ca.pem\n");
		printf("  %s\n", ca.name_constrained
			   ? "signs only for the box's names and private names and addresses"
			   : "warning: may sign for any name (made before name constraints): "
			     "stagedoor tls init --new-ca makes one that signs for the box's only");
		if (have_srv) {
			tls_show_text("server certificate:", p.server_cert, &srv, srv_days);
			printf("  key      %s%s\n", tls_abs(p.server_key, a),
			       key == SD_OK ? " (matches, mode 0600)" : "");
			if (srv_days < CERT_RENEW_WARN_DAYS)
				printf("  warning: expires in %lld days: stagedoor tls renew\n",
				       (long long)srv_days);
		}
	}
	fflush(stdout);
	if (!have_srv) {
		fprintf(stderr, "stagedoor: no server certificate in %s: run stagedoor tls init\n",
			tls_abs(p.dir, a));
		return 1;
	}
	return key == SD_OK ? 0 : cli_fail(SD_IO);
}

/* ======================== dispatch ======================================= */

static const struct cli_cmd tls_subs[] = {
	{ "init", tls_init, "make the box CA and a server certificate for the box's names and "
			    "addresses in <state dir>/tls (kept if there; --renew: a new one)",
	  NULL, 0 },
	{ "renew", tls_renew, "a new server certificate under the same CA, for the names given "
			      "or the old ones (--ca-key FILE: the CA's key kept off the box)",
	  NULL, 0 },
	{ "show", tls_show, "the CA's SHA-256 fingerprint, where ca.pem is, the names and the days "
			    "left", NULL, 0 },
	{ NULL, NULL, NULL, NULL, 0 },
};

const struct cli_cmd cmd_tls = CLI_NODE("tls", NULL, tls_subs,
		"the box CA and the HTTPS certificate");
