/*
 * serve.h: the HTTP API and dashboard (http.h in front of api.h) in this
 * process, for `stagedoor serve` (a child of `run`) and `stagedoor demo`.
 */
#ifndef SD_SERVE_H
#define SD_SERVE_H

#include <stdint.h>

#include "result.h"

struct serve;

/*
 * serve_start: make the API token when missing (<state dir>/api.token), open
 * the API on db_path and listen on listen ("127.0.0.1:8080", ":0").
 * [in] supervised: /healthz counts the worker processes beside this one
 * (children of the same `run`); 0: it reports them unknown.
 */
enum sd_result serve_start(const char *db_path, const char *state_dir, const char *listen,
			   int64_t key_ttl_ms, int supervised, struct serve **out);

/* serve_port: the port it listens on. */
int serve_port(const struct serve *s);

/* serve_stop: finish the requests in progress, close; accepts NULL. */
void serve_stop(struct serve *s);

#endif
