/*
 * sqs_cred.h: the SQS listener's credentials, made from a worker token.
 *
 * An access key id is "SDBX" and the token's id (its SHA-256's first 16
 * hex digits) in capitals: 20 characters, as AWS's are.  Its secret is not
 * stored anywhere: it is HMAC-SHA256 under the box's ticket key (the state
 * folder's ticket.key, which boxes on one database share) of the id, its
 * first 40 hex digits.  So the database holds no secret (a copy of it signs
 * nothing), the listener derives the secret of the id a request names, and
 * revoking or expiring the token ends its credentials with it.
 */
#ifndef SD_SQS_CRED_H
#define SD_SQS_CRED_H

#include "code.h"
#include "result.h"
#include "token.h"

#define SQS_KEY_ID_PREFIX "SDBX"
#define SQS_KEY_ID_LEN 20
#define SQS_SECRET_LEN 40

/* sqs_cred_key_id: the access key id of the token whose id is id. */
void sqs_cred_key_id(const char *id, char out[SQS_KEY_ID_LEN + 1]);

/* sqs_cred_token_id: the token id an access key id names; SD_INVALID when
 * key_id is not one the box makes. */
enum sd_result sqs_cred_token_id(const char *key_id, char id[TOKEN_ID_LEN + 1]);

/* sqs_cred_secret: the secret access key of the token whose id is id. */
void sqs_cred_secret(const unsigned char key[CODE_KEY_LEN], const char *id,
		     char out[SQS_SECRET_LEN + 1]);

#endif
