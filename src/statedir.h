/*
 * statedir.h: the state folder, where a box keeps its own files.
 */
#ifndef SD_STATEDIR_H
#define SD_STATEDIR_H

#include <stddef.h>

#include "blob.h"
#include "result.h"

/*
 * The state folder holds the box's files: ticket.key, blobs/ (the PDFs) and
 * maildir/ (the default mail transport).  It is the state_dir setting, or,
 * when that is NULL or "", the database's own folder.  Every function below
 * takes db_path and state_dir and works that out the same way.
 */

/* statedir_path: [out] buf = the state folder. */
enum sd_result statedir_path(const char *db_path, const char *state_dir, char *buf,
				 size_t size);

/* statedir_init: what `init` makes in the state folder: the folder
 * itself and the ticket key. */
enum sd_result statedir_init(const char *db_path, const char *state_dir);

/* statedir_blobs_open: the box's PDF store: the database (blob_store = db,
 * the default on PostgreSQL) or <state folder>/blobs. */
enum sd_result statedir_blobs_open(const char *db_path, const char *state_dir,
				  struct blob_store **out);

/* statedir_mail_url: "maildir:<state folder>/maildir". */
void statedir_mail_url(const char *db_path, const char *state_dir, char *buf, size_t size);

#endif
