/*
 * blob.h: the file store: immutable files under fixed keys, in a folder or
 * in the database (blob_store = db: several boxes on one database).
 *
 * blob_put writes a temp file, fsyncs it, renames it over the key and fsyncs
 * the folder, so a reader sees the old file or the new one, never a part,
 * and a put that returned survives a power cut.  Putting the same bytes
 * under the same key again is harmless (a second store writes the same
 * bytes: dist/doc/design.md §1.2, technique 1).  Keys are relative paths of [A-Za-z0-9._-] segments
 * separated by '/': no "..", no empty or dot segments, never absolute, so a
 * key can never name a file outside the store's folder.  Segments starting
 * ".tmp-" are reserved for put's temp files.
 */
#ifndef SD_BLOB_H
#define SD_BLOB_H

#include <stddef.h>

#include "result.h"

#define BLOB_KEY_MAX 200

struct blob_store;

/* blob_open: the store rooted at dir (created when missing, mode 0700). */
enum sd_result blob_open(const char *dir, struct blob_store **out);

/* blob_open_db: the store in the blobs table of the database at db_path
 * (a connection of its own; safe to use from several threads). */
enum sd_result blob_open_db(const char *db_path, struct blob_store **out);

/* blob_where_set: the blob_store setting, "files" or "db" (NULL or "":
 * by the engine); SD_INVALID for anything else.  blob_where_db: 1 when the
 * box's store is the database: "db", or unset on PostgreSQL. */
enum sd_result blob_where_set(const char *where);
int blob_where_db(const char *db_path);

/* blob_open_box: the box's store: the database or the folder dir. */
enum sd_result blob_open_box(const char *db_path, const char *dir, struct blob_store **out);
void blob_close(struct blob_store *s);

/* blob_key_valid: SD_INVALID, with the reason, for a key that could escape. */
enum sd_result blob_key_valid(const char *key);

enum sd_result blob_put(struct blob_store *s, const char *key, const void *data, size_t len);

/* blob_get: [out] *data (free()), *len.  SD_NOT_FOUND when absent. */
enum sd_result blob_get(struct blob_store *s, const char *key, unsigned char **data,
			size_t *len);

/* blob_exists: 1 when the key holds a file, 0 when not. */
int blob_exists(struct blob_store *s, const char *key);

/* blob_path: the file's path for key (for people: "where to find it"). */
enum sd_result blob_path(struct blob_store *s, const char *key, char *buf, size_t size);

#endif
