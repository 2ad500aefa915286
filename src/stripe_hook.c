/*
 * stripe_hook.c: Stripe's webhooks: the signature checked before anything
 * else, then the event read (stripe.h).
 *
 * Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...][,v0=...]
 * where each v1 is HMAC-SHA256 keyed with an endpoint secret over
 * "<t>.<body>"; several v1 while a secret rotates.  The body is the bytes
 * as received: nothing may parse or change it before the check.
 */
#define _GNU_SOURCE
#include "stripe.h"

#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "code.h"
#include "cred.h"
#include "text.h"

#define HEADER_MAX 4096
#define SIGS_MAX 8
#define SECRET_MAX 256

/* the header's t and up to SIGS_MAX v1 values; -1 when it is no header */
static int header_parse(const char *header, long long *t, char sigs[][CODE_SHA256_HEX + 1],
			int *n)
{
	char buf[HEADER_MAX], *save = NULL, *part;
	int have_t = 0;

	*n = 0;
	if (!header || strlen(header) >= sizeof buf)
		return -1;
	snprintf(buf, sizeof buf, "%s", header);
	for (part = strtok_r(buf, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
		while (*part == ' ')
			part++;
		if (strncmp(part, "t=", 2) == 0) {
			char *end;

			*t = strtoll(part + 2, &end, 10);
			if (end == part + 2 || *end || have_t)
				return -1;
			have_t = 1;
		} else if (strncmp(part, "v1=", 3) == 0 && *n < SIGS_MAX &&
			   strlen(part + 3) == CODE_SHA256_HEX) {
			snprintf(sigs[(*n)++], CODE_SHA256_HEX + 1, "%s", part + 3);
		}
	}
	return have_t ? 0 : -1;
}

enum sd_result stripe_hook_verify(const char *const *secrets, int n, const char *header,
				  const char *body, size_t len, int64_t now_s)
{
	char sigs[SIGS_MAX][CODE_SHA256_HEX + 1], want[CODE_SHA256_HEX + 1], prefix[32];
	long long t = 0;
	int ns = 0, i, j, ok = 0;

	if (header_parse(header, &t, sigs, &ns) != 0)
		return err_set(SD_INVALID, "no Stripe-Signature header with a timestamp t=");
	if (!ns)
		return err_set(SD_INVALID, "the Stripe-Signature header holds no v1 signature");
	if (t < now_s - STRIPE_TOLERANCE_S || t > now_s + STRIPE_TOLERANCE_S)
		return err_set(SD_INVALID, "the signature's timestamp is %lld s off this box's "
			       "clock (at most %d: a replay, or a clock to set right)",
			       (long long)(t > now_s ? t - now_s : now_s - t), STRIPE_TOLERANCE_S);
	snprintf(prefix, sizeof prefix, "%lld.", t);
	for (i = 0; i < n && !ok; i++) {
		code_hmac_sha256_hex(secrets[i], strlen(secrets[i]), prefix, body, len, want);
		for (j = 0; j < ns && !ok; j++) {
			for (char *p = sigs[j]; *p; p++)
				*p = (char)tolower((unsigned char)*p);
			ok = want[0] && code_ct_equal(want, sigs[j], CODE_SHA256_HEX);
		}
	}
	explicit_bzero(want, sizeof want);
	return ok ? SD_OK : err_set(SD_INVALID, "no v1 signature matches a webhook secret");
}

/* data.object read by its kind, by the same code as an API answer */
static void object_read(json_t *obj, struct stripe_event *ev)
{
	const char *kind;

	ev->kind = STRIPE_OBJ_OTHER;
	if (!json_is_object(obj) || !json_is_string(json_object_get(obj, "object")) ||
	    !json_is_string(json_object_get(obj, "id")))
		return;
	kind = json_string_value(json_object_get(obj, "object"));
	if (strcmp(kind, "checkout.session") == 0) {
		ev->kind = STRIPE_OBJ_SESSION;
		stripe_session_from_json(obj, &ev->session);
	} else if (strcmp(kind, "charge") == 0) {
		ev->kind = STRIPE_OBJ_CHARGE;
		stripe_charge_from_json(obj, &ev->charge);
	} else if (strcmp(kind, "dispute") == 0) {
		ev->kind = STRIPE_OBJ_DISPUTE;
		stripe_dispute_from_json(obj, &ev->dispute);
	} else if (strcmp(kind, "refund") == 0) {
		ev->kind = STRIPE_OBJ_REFUND;
		stripe_refund_from_json(obj, &ev->refund);
	}
}

enum sd_result stripe_hook_event(const char *body, size_t len, struct stripe_event *ev)
{
	json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
	json_t *data, *obj;
	const char *id, *type;

	memset(ev, 0, sizeof *ev);
	if (!json_is_object(doc) || !json_is_string(json_object_get(doc, "id")) ||
	    !json_is_string(json_object_get(doc, "type"))) {
		json_decref(doc);
		return err_set(SD_INVALID, "the body is no Stripe event (id, type)");
	}
	id = json_string_value(json_object_get(doc, "id"));
	type = json_string_value(json_object_get(doc, "type"));
	if (strncmp(id, "evt_", 4) != 0 || strlen(id) >= sizeof ev->id ||
	    strlen(type) >= sizeof ev->type || text_check("event id", id, STRIPE_ID_MAX) != SD_OK) {
		json_decref(doc);
		return err_set(SD_INVALID, "the event's id or type is not Stripe's");
	}
	text_copy(ev->id, sizeof ev->id, id);
	text_copy(ev->type, sizeof ev->type, type);
	data = json_object_get(doc, "data");
	obj = data ? json_object_get(data, "object") : NULL;
	object_read(obj, ev);
	json_decref(doc);
	return SD_OK;
}

enum sd_result stripe_secrets_read(const char *path, char **secrets, int *n)
{
	char cred[4096], *all = NULL, *save = NULL, *line;
	enum sd_result r;

	*n = 0;
	if (!path && cred_find("stripe_webhook_secret", cred, sizeof cred))
		path = cred;
	if (!path)
		return err_set(SD_INVALID, "payment_provider = stripe needs its webhook secret: "
			       "stripe_webhook_secret_file, or the systemd credential "
			       "stripe_webhook_secret");
	if ((r = cred_read(path, "Stripe webhook secret file", STRIPE_SECRETS_MAX * SECRET_MAX,
			   STRIPE_SECRETS_MAX, &all)) != SD_OK)
		return r;
	for (line = strtok_r(all, "\n", &save); line && *n < STRIPE_SECRETS_MAX;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "whsec_", 6) != 0 || strlen(line) >= SECRET_MAX ||
		    !(secrets[*n] = strdup(line))) {
			r = err_set(SD_INVALID, "the Stripe webhook secret file %s must hold one or "
				    "two secrets (whsec_...), the current first", path);
			break;
		}
		(*n)++;
	}
	explicit_bzero(all, strlen(all));
	free(all);
	if (r != SD_OK) {
		stripe_secrets_free(secrets, *n);
		*n = 0;
	}
	return r;
}

void stripe_secrets_free(char **secrets, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		explicit_bzero(secrets[i], strlen(secrets[i]));
		free(secrets[i]);
		secrets[i] = NULL;
	}
}
