/*
 * api_auth.c: who is asking.  The bearer token's grant (token.h: looked up
 * by SHA-256 on every request, so a revocation holds at once), checked
 * against the roles a route admits (the route table in api.c).
 *
 * Invariants:
 *  - the operator is admitted by every route that needs a token;
 *  - a refusal writes nothing and names what is missing: 401 when the
 *    token is missing, malformed, unknown, expired or revoked (with
 *    WWW-Authenticate's meaning in the message), 403 when the token is
 *    good but its role is not one the route admits;
 *  - the token is never logged or put into an answer; its name may be.
 */
#define _GNU_SOURCE
#include "api_int.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "timefmt.h"

static const char *const refusals[] = {
	[TOKEN_MISSING] = "an Authorization: Bearer token is required",
	[TOKEN_MALFORMED] = "the Authorization header must be \"Bearer\" and a token of 64 hex "
			    "digits",
	[TOKEN_UNKNOWN] = "this token is not known to the box",
	[TOKEN_EXPIRED] = "this token has expired",
	[TOKEN_REVOKED] = "this token was revoked",
};

/* "box_office or door or operator" for the 403's message */
static void roles_text(int roles, char *buf, size_t size)
{
	size_t n = 0;
	int i;

	buf[0] = '\0';
	for (i = 1; i <= TOKEN_ROLES; i++) {
		int role = i % TOKEN_ROLES;	/* the operator last */

		if (role != TOKEN_OPERATOR && !(roles & (1 << role)))
			continue;
		if (n < size)
			n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? " or " : "",
					      token_role_name(role));
	}
}

int api_auth_admit(struct call *c, int roles)
{
	char need[128], msg[256];
	enum sd_result r;
	int why = TOKEN_MISSING;

	if ((r = token_lookup(c->db, c->req->authorization, clock_now_ms(), &c->grant, &why)) !=
	    SD_OK) {
		api_res_internal(c->res, c->req, r);
		return 0;
	}
	if (why != TOKEN_OK) {
		api_res_fail(c->res, 401, refusals[why], "Authorization");
		return 0;
	}
	if (c->grant.role == TOKEN_OPERATOR || (roles & (1 << c->grant.role)))
		return 1;
	roles_text(roles, need, sizeof need);
	snprintf(msg, sizeof msg, "a %s token may not do this; it needs a token with role %s",
		 token_role_name(c->grant.role), need);
	api_res_fail(c->res, 403, msg, "Authorization");
	return 0;
}

/* GET /v1/whoami: the token's role, name and event, so that a page shows
 * only what the token may do */
/* the venue's zone and its abbreviations by offset ({"3600": "CET", ...}):
 * the pages show every time in it, never in the browser's */
static json_t *zone_names(void)
{
	struct timefmt_name n[TIMEFMT_NAMES_MAX];
	json_t *o = json_object();
	char off[24];
	int i, k = timefmt_names(clock_now_ms(), n, TIMEFMT_NAMES_MAX);

	for (i = 0; o && i < k; i++) {
		snprintf(off, sizeof off, "%ld", n[i].offset);
		json_object_set_new(o, off, json_string(n[i].abbr));
	}
	return o;
}

void api_get_whoami(struct call *c)
{
	api_res_json(c->res, 200,
		     json_pack("{s:s, s:o, s:o, s:b, s:s, s:o}", "role",
			       token_role_name(c->grant.role), "name", api_json_text(c->grant.name),
			       "event_id",
			       c->grant.event_id ? json_integer(c->grant.event_id) : json_null(),
			       "metrics_auth", c->a->metrics_auth, "timezone", timefmt_zone_name(),
			       "zone_names", zone_names()));
}
