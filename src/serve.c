/*
 * serve.c: the box's front door: the HTTP server (http.h) in front of the
 * intake API (api.h), in one process (`stagedoor serve`, src/cmd/serve.c;
 * `run` starts it as a supervised child when http_listen is not "off").
 *
 * The glue is a copy: the server's request fields into the API's, the API's
 * answer (its body malloc'd, freed by the server) back.  SIGTERM/SIGINT stop
 * it: libmicrohttpd finishes the requests in progress and closes.
 */
#define _GNU_SOURCE
#include "serve.h"

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api.h"
#include "cert.h"
#include "clock.h"
#include "config.h"
#include "cred.h"
#include "db.h"
#include "http.h"
#include "log.h"
#include "statedir.h"

static void glue(void *arg, const struct http_request *req, struct http_response *res)
{
	struct api_request a;
	struct api_response r;

	memset(&a, 0, sizeof a);
	a.method = req->method;
	a.path = req->path;
	a.query = req->query;
	a.authorization = req->authorization;
	a.idempotency_key = req->idempotency_key;
	a.content_type = req->content_type;
	a.body = req->body;
	a.body_len = req->body_len;
	memset(&r, 0, sizeof r);
	api_handle(arg, &a, &r);
	res->status = r.status;
	snprintf(res->content_type, sizeof res->content_type, "%s", r.content_type);
	snprintf(res->retry_after, sizeof res->retry_after, "%s", r.retry_after);
	res->body = r.body;		/* the server frees it */
	res->body_len = r.body_len;
}

/* siblings: under `run`, the worker processes beside this one (children of
 * the same supervisor whose command line is a worker's): /healthz's count. */
static int siblings(void *arg)
{
	pid_t parent = getppid();
	DIR *d = opendir("/proc");
	struct dirent *de;
	int n = 0;

	(void)arg;
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		char path[300], cmd[512], comm[64], st = 0;
		long pid = strtol(de->d_name, NULL, 10), ppid = 0;
		size_t len, i;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof path, "/proc/%ld/stat", pid);
		if (!(f = fopen(path, "r")))
			continue;
		if (fscanf(f, "%*d %63s %c %ld", comm, &st, &ppid) != 3)
			ppid = 0;
		fclose(f);
		if (ppid != (long)parent || st == 'Z')
			continue;
		snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
		if (!(f = fopen(path, "r")))
			continue;
		len = fread(cmd, 1, sizeof cmd - 1, f);
		fclose(f);
		for (i = 0; i < len; i++)
			if (cmd[i] == '\0')
				cmd[i] = ' ';
		cmd[len] = '\0';
		n += strstr(cmd, " worker ") != NULL;
	}
	closedir(d);
	return n;
}

#define SERVE_HOSTS_MAX (2 * CERT_NAMES_MAX + 8)

struct serve {
	struct api *api;
	struct http_server *srv;
	char host_buf[SERVE_HOSTS_MAX][CERT_DNS_MAX];	/* the Host names allowed */
	const char *hosts[SERVE_HOSTS_MAX + 1];		/* pointers into host_buf */
	int n_hosts;
};

static void host_add(struct serve *s, const char *name, size_t len)
{
	int i;

	if (!len || len >= CERT_DNS_MAX || s->n_hosts == SERVE_HOSTS_MAX)
		return;
	memcpy(s->host_buf[s->n_hosts], name, len);
	s->host_buf[s->n_hosts][len] = '\0';
	for (i = 0; i < s->n_hosts; i++)
		if (strcasecmp(s->host_buf[i], s->host_buf[s->n_hosts]) == 0)
			return;
	s->hosts[s->n_hosts] = s->host_buf[s->n_hosts];
	s->hosts[++s->n_hosts] = NULL;
}

/*
 * hosts_make: the names a request's Host may carry: http_hosts when set (in
 * place of http.h's defaults); else, with a certificate, its names on top of
 * the defaults (the address the client dialled, localhost, loopback).
 * [out] *extra: 1 when s->hosts adds to the defaults.
 */
static enum sd_result hosts_make(struct serve *s, const struct serve_opts *o, int *extra)
{
	struct cert_info ci;
	const char *p;
	enum sd_result r;
	int i;

	*extra = 0;
	if (o->hosts && *o->hosts) {
		for (p = o->hosts; *p; p += strspn(p, ", ")) {
			size_t n = strcspn(p, ", ");
			host_add(s, p, n);
			p += n;
		}
		return SD_OK;
	}
	if (!o->tls_cert || !*o->tls_cert)
		return SD_OK;
	if ((r = cert_info_load(o->tls_cert, &ci)) != SD_OK)
		return r;
	for (i = 0; i < ci.names.n_dns; i++)
		host_add(s, ci.names.dns[i], strlen(ci.names.dns[i]));
	for (i = 0; i < ci.names.n_ip; i++)
		host_add(s, ci.names.ip[i], strlen(ci.names.ip[i]));
	*extra = 1;
	return SD_OK;
}

void serve_renew_warn(const char *cert)
{
	int64_t days;

	if (cert && *cert && cert_days_left(cert, clock_now_ms(), &days) == SD_OK &&
	    days < CERT_RENEW_WARN_DAYS)
		log_event(LOG_WARN, "the HTTPS certificate expires soon; renew it with "
			  "`stagedoor tls renew` and restart", "cert=%s days_left=%lld",
			  cert, (long long)days);
}

/* ca_file: the box CA beside a certificate `tls init` made, for /ca.pem */
static void ca_file(const struct serve_opts *o, char *buf, size_t size)
{
	char dir[PATH_MAX];
	struct cert_paths cp;

	buf[0] = '\0';
	if (statedir_path(o->db_path, o->state_dir, dir, sizeof dir) == SD_OK &&
	    cert_paths(dir, &cp) == SD_OK && access(cp.ca_cert, R_OK) == 0)
		snprintf(buf, size, "%s", cp.ca_cert);
}

enum sd_result serve_start(const struct serve_opts *o, struct serve **out)
{
	struct serve *s;
	struct api_opts ao;
	struct http_opts ho;
	char ca[PATH_MAX], key[PATH_MAX];
	enum sd_result r;
	int extra = 0;

	*out = NULL;
	if (!(s = calloc(1, sizeof *s)))
		return err_set(SD_NOMEM, "out of memory");
	memset(&ao, 0, sizeof ao);
	ao.db_path = o->db_path;
	ao.state_dir = o->state_dir;
	ao.idem_ttl_ms = o->key_ttl_ms;
	ao.disk_warn_bytes = o->disk_warn_bytes;
	ao.backup_dir = o->backup_dir;
	ao.backup_interval_ms = o->backup_interval_ms;
	ao.workers_alive = o->supervised ? siblings : NULL;
	ao.metrics_auth = o->metrics_auth;
	ao.doors_open_before_ms = o->doors_open_before_ms;
	ao.doors_close_after_ms = o->doors_close_after_ms;
	ao.resend_per_hour = o->resend_per_hour;
	ao.resend_per_day = o->resend_per_day;
	ao.scan_rate = o->scan_rate;
	ao.scan_burst = o->scan_burst;
	ca_file(o, ca, sizeof ca);
	ao.ca_file = ca;
	memset(&ho, 0, sizeof ho);
	ho.listen = o->listen;
	ho.tls_cert = o->tls_cert;
	/* systemd's LoadCredential=http_tls_key, when the file names none */
	if ((ho.tls_key = cred_tls_key(o->tls_cert, o->tls_key, "http_tls_key", key,
				       sizeof key)) == key)
		log_event(LOG_INFO, "http TLS key from the service's credentials", "path=%s", key);
	ho.per_client_max = o->per_client_max > 0 ? (unsigned)o->per_client_max : 0;
	if ((r = hosts_make(s, o, &extra)) != SD_OK)
		goto fail;
	if (s->n_hosts) {
		if (extra)
			ho.hosts_extra = s->hosts;
		else
			ho.hosts = s->hosts;
	}
	serve_renew_warn(o->tls_cert);
	if ((r = token_ensure(o->db_path, o->state_dir)) != SD_OK ||
	    (r = api_open(&ao, &s->api)) != SD_OK ||
	    (r = http_start_opts(&ho, glue, s->api, &s->srv)) != SD_OK)
		goto fail;
	*out = s;
	return SD_OK;
fail:
	serve_stop(s);
	return r;
}

int serve_port(const struct serve *s)
{
	return http_port(s->srv);
}

void serve_stop(struct serve *s)
{
	if (!s)
		return;
	http_stop(s->srv);
	api_close(s->api);
	free(s);
}
