/*
 * sigv4.h: AWS Signature Version 4, as a server verifies it and as a client
 * makes it (the SQS listener's authentication; the benchmark's client).
 *
 * A request is signed with a key derived from the caller's secret, the
 * request's day, region and service: HMAC-SHA256 over a canonical form of
 * the method, path, query, the headers the caller chose to sign and the
 * SHA-256 of the body (code.h does the hashing).  The server rebuilds the
 * same canonical form from what it received and compares the signatures in
 * constant time; a body other than the one signed, a header changed or
 * left out, or another key makes another signature.
 *
 * Only the Authorization header form is taken (AWS4-HMAC-SHA256 with
 * Credential, SignedHeaders and Signature), with X-Amz-Date; a presigned
 * URL (X-Amz-Algorithm in the query) and UNSIGNED-PAYLOAD are refused: the
 * SDKs sign SQS requests in the header, body included.
 */
#ifndef SD_SIGV4_H
#define SD_SIGV4_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

#define SIGV4_KEY_ID_MAX 128		/* an access key id's length, at most */
#define SIGV4_SCOPE_PART_MAX 32		/* a region's or service's length */
#define SIGV4_SIGNED_MAX 1024		/* the SignedHeaders list's length */
#define SIGV4_HEX 64			/* a signature in hex */
#define SIGV4_SKEW_MS (15 * 60 * 1000LL) /* X-Amz-Date this far from now, at most */

struct sigv4_header {
	const char *name;		/* any case */
	const char *value;		/* as received */
};

struct sigv4_request {
	const char *method;		/* "POST" */
	const char *path;		/* as received, before any '?' */
	const char *query;		/* after the '?', "" or NULL for none */
	const struct sigv4_header *headers;
	size_t n_headers;
	const void *body;
	size_t body_len;
};

/* what an Authorization header says */
struct sigv4_auth {
	char key_id[SIGV4_KEY_ID_MAX + 1];
	char date[9];			/* the scope's day, YYYYMMDD */
	char region[SIGV4_SCOPE_PART_MAX + 1];
	char service[SIGV4_SCOPE_PART_MAX + 1];
	char signed_headers[SIGV4_SIGNED_MAX + 1];	/* "content-type;host;x-amz-date" */
	char signature[SIGV4_HEX + 1];
};

/*
 * sigv4_parse: the Authorization header's parts into a.  SD_INVALID with
 * the reason (an algorithm other than AWS4-HMAC-SHA256, a part missing or
 * too long, a scope that is not DAY/REGION/SERVICE/aws4_request, a
 * signature that is not 64 hex digits, SignedHeaders not lower case and
 * sorted, or without host).
 */
enum sd_result sigv4_parse(const char *authorization, struct sigv4_auth *a);

/* sigv4_header: the first header named name (any case), NULL when none. */
const char *sigv4_header(const struct sigv4_request *rq, const char *name);

/*
 * sigv4_time: the request's X-Amz-Date (YYYYMMDDTHHMMSSZ) as ms since the
 * epoch into *ms.  SD_INVALID when it is missing or malformed, or its day
 * is not the scope's.
 */
enum sd_result sigv4_time(const struct sigv4_request *rq, const struct sigv4_auth *a,
			  int64_t *ms);

/* sigv4_key: the signing key of secret for day, region and service. */
void sigv4_key(const void *secret, size_t secret_len, const char *day, const char *region,
	       const char *service, unsigned char key[32]);

/*
 * sigv4_signature: the signature of rq under key, for the scope and
 * signed headers of a and the time amz_date, as hex into out.  SD_INVALID
 * with the reason when a signed header is missing, the body's hash header
 * is not the body's (or is UNSIGNED-PAYLOAD), or the query presigns.
 */
enum sd_result sigv4_signature(const struct sigv4_request *rq, const struct sigv4_auth *a,
			       const char *amz_date, const unsigned char key[32],
			       char out[SIGV4_HEX + 1]);

/*
 * sigv4_verify: rq's signature checked against a, signed with key: SD_OK
 * when it is the one a carries (compared in constant time), SD_DENIED
 * ("the request signature ... does not match") when not, SD_INVALID as
 * sigv4_signature.
 */
enum sd_result sigv4_verify(const struct sigv4_request *rq, const struct sigv4_auth *a,
			    const unsigned char key[32]);

/*
 * sigv4_sign: the Authorization header for rq (which must carry the
 * X-Amz-Date amz_date and every header in signed, a ';'-list in lower case
 * and sorted) by key_id with secret, into buf.  For clients (benchmarks,
 * tests).
 */
enum sd_result sigv4_sign(const struct sigv4_request *rq, const char *key_id, const char *secret,
			  const char *region, const char *service, const char *amz_date,
			  const char *signed_headers, char *buf, size_t size);

#endif
