/*
 * sqs.h: the SQS listener: Amazon SQS's two wire protocols (query and AWS
 * JSON 1.0, sqs_wire.h) on a listener of its own, so that any SQS client
 * (boto3, the AWS SDKs) is a worker of the box's stream.
 *
 * What it promises:
 *   - every request is signed (AWS Signature Version 4, sigv4.h) with the
 *     credentials of a live worker token (sqs_cred.h), within 15 minutes of
 *     the box's time; anything else is refused before any parameter is read
 *     (MissingAuthenticationToken, IncompleteSignature,
 *     InvalidClientTokenId, SignatureDoesNotMatch), and a token reaches only
 *     the queues it was given (AccessDenied);
 *   - a ReceiveMessage that waits holds no thread: its connection is
 *     suspended and the listener's waker resumes it when a commit may have
 *     made a message visible (the workers' wake-ups, notify.h), when a
 *     delayed or leased message comes due, or when its wait is over;
 *   - the listener's limits: request bodies of SQS_BODY_MAX bytes (a 256 KiB
 *     message form-encoded), the HTTP server's connection caps and deadlines
 *     (http.h; on a loopback listener, where every worker has one address,
 *     SQS_LOOPBACK_PER_CLIENT connections from it at least), SQS_PARKED_MAX
 *     waiting receives (more answer at once, empty).
 */
#ifndef SD_SQS_H
#define SD_SQS_H

#include "result.h"

#define SQS_BODY_MAX (1024 * 1024)
#define SQS_PARKED_MAX 1024
#define SQS_THREADS 8
#define SQS_LOOPBACK_PER_CLIENT 512	/* connections from 127.0.0.1 to a loopback
					 * listener, at least (its workers' address) */

struct sqs_opts {
	const char *db_path;
	const char *state_dir;		/* the ticket key's folder (NULL: the database's) */
	const char *listen;		/* ADDRESS:PORT */
	const char *tls_cert, *tls_key;	/* needed beyond loopback */
	int per_client_max;		/* 0: the HTTP default */
};

struct sqs_server;

/* sqs_start: listen as o says and serve until sqs_stop.  [out] *out. */
enum sd_result sqs_start(const struct sqs_opts *o, struct sqs_server **out);

/* sqs_stop: answer every waiting receive, stop, free.  Accepts NULL. */
void sqs_stop(struct sqs_server *s);

/* sqs_port: the port s listens on. */
int sqs_port(const struct sqs_server *s);

#endif
