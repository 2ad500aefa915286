/*
 * sqs_cred.c: access key ids and secrets derived from worker tokens
 * (sqs_cred.h).
 */
#include "sqs_cred.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define SECRET_LABEL "stagedoor sqs secret "

void sqs_cred_key_id(const char *id, char out[SQS_KEY_ID_LEN + 1])
{
	size_t i, p = strlen(SQS_KEY_ID_PREFIX);

	memcpy(out, SQS_KEY_ID_PREFIX, p);
	for (i = 0; i < TOKEN_ID_LEN && id[i]; i++)
		out[p + i] = (char)toupper((unsigned char)id[i]);
	out[p + i] = '\0';
}

enum sd_result sqs_cred_token_id(const char *key_id, char id[TOKEN_ID_LEN + 1])
{
	size_t i, p = strlen(SQS_KEY_ID_PREFIX);

	id[0] = '\0';
	if (!key_id || strlen(key_id) != SQS_KEY_ID_LEN || strncmp(key_id, SQS_KEY_ID_PREFIX, p))
		return err_set(SD_INVALID, "the access key id is not one this box made");
	for (i = 0; i < TOKEN_ID_LEN; i++) {
		char c = key_id[p + i];
		if (!strchr("0123456789ABCDEF", c) || !c)
			return err_set(SD_INVALID, "the access key id is not one this box made");
		id[i] = (char)tolower((unsigned char)c);
	}
	id[i] = '\0';
	return SD_OK;
}

void sqs_cred_secret(const unsigned char key[CODE_KEY_LEN], const char *id,
		     char out[SQS_SECRET_LEN + 1])
{
	char hex[CODE_SHA256_HEX + 1];

	code_hmac_sha256_hex(key, CODE_KEY_LEN, SECRET_LABEL, id, strlen(id), hex);
	snprintf(out, SQS_SECRET_LEN + 1, "%.*s", SQS_SECRET_LEN, hex);
}
