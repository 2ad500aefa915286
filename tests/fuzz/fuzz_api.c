/*
 * fuzz_api.c: libFuzzer target for the API's pure layer (no database):
 * api_parse_order, api_parse_event, api_parse_scan, api_parse_email,
 * api_parse_cancel, api_query_get,
 * api_key_valid, api_content_type_json and code_sha256_hex.
 *
 * Framing of one input: lines up to the first empty line are
 *   1: method, 2: path[?query], 3: Content-Type, 4: Idempotency-Key
 * (missing lines are NULL); the rest, after the empty line, is the body,
 * handed over in a buffer of exactly its length (no NUL after it), so a
 * read past the end is an AddressSanitizer report.
 *
 *   make fuzz   (clang -fsanitize=fuzzer,address,undefined, bounded time)
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "code.h"

#define LINES 4

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *line[LINES] = { NULL };
	const uint8_t *p = data, *end = data + size;
	char *body, *query, buf[64], hash[CODE_SHA256_HEX + 1], email[256];
	char reason[ORDER_REASON_MAX + 1];
	struct api_scan scan;
	size_t body_len;
	struct api_order o;
	struct api_event e;
	struct api_error err;
	int n = 0, i;

	while (p < end && n < LINES) {
		const uint8_t *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (len == 0) {
			p = nl + 1;
			break;
		}
		line[n] = malloc(len + 1);
		memcpy(line[n], p, len);
		line[n][len] = '\0';
		n++;
		p = nl ? nl + 1 : end;
	}
	body_len = (size_t)(end - p);
	body = malloc(body_len ? body_len : 1);
	if (body_len)
		memcpy(body, p, body_len);

	query = line[1] ? strchr(line[1], '?') : NULL;
	if (query) {
		*query++ = '\0';
		api_query_get(query, "state", buf, sizeof buf);
		api_query_get(query, "kind", buf, sizeof buf);
		api_query_get(query, "limit", buf, 4);
	}
	api_content_type_json(line[2]);
	api_key_valid(line[3]);
	code_sha256_hex(body, body_len, hash);
	if (!line[1] || strstr(line[1], "orders")) {
		if (api_parse_order(body, body_len, &o, &err) == SD_OK) {
			/* what order_add relies on */
			if (o.o.seats < 1 || o.o.seats > TICKETS_SEATS_MAX || o.o.event_id < 1 ||
			    text_field_valid("name", o.o.name) != SD_OK)
				abort();
			api_parse_free(o.json);
		} else if (strlen(err.msg) == 0) {
			abort();	/* a refusal always says why */
		}
	}
	if (!line[1] || strstr(line[1], "events")) {
		if (api_parse_event(body, body_len, &e, &err) == SD_OK) {
			if (e.e.capacity < 1 || e.e.capacity > 1000000)
				abort();
			api_parse_free(e.json);
		}
	}
	if (!line[1] || strstr(line[1], "scan")) {
		if (api_parse_scan(body, body_len, &scan, &err) == SD_OK &&
		    (strlen(scan.code) >= CODE_TEXT_MAX || strlen(scan.nonce) > SCAN_NONCE_MAX))
			abort();
	}
	if (!line[1] || strstr(line[1], "orders")) {
		if (api_parse_email(body, body_len, email, &err) == SD_OK && !strchr(email, '@'))
			abort();
		if (api_parse_cancel(body, body_len, reason, &err) == SD_OK &&
		    strlen(reason) > ORDER_REASON_MAX)
			abort();
	}
	for (i = 0; i < n; i++)
		free(line[i]);
	free(body);
	return 0;
}
