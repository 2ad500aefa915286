/*
 * backup.h: a running box's backup, the check of one, and a box made from
 * one (backup.c).
 */
#ifndef SD_BACKUP_H
#define SD_BACKUP_H

#include <stdint.h>

#include "db.h"
#include "result.h"

#define BACKUP_FORMAT 1
#define BACKUP_MANIFEST "manifest.json"

/* The failpoint backup_make passes with the database copied into the
 * partial folder, before the rest: a crash there is a backup killed
 * midway (failpoint.h). */
#define FP_BACKUP_AFTER_DB "backup_after_db"

struct backup_info {
	int schema_version;	/* the database's PRAGMA user_version */
	int64_t created_at_ms;	/* when the copy was taken */
	int files;		/* files listed in the manifest, the database included */
	int64_t bytes;		/* their sizes added up */
};

/* backup_info_format: "N files, X MiB, schema S, taken 2026-...Z", the
 * summary the backup and restore commands print */
void backup_info_format(const struct backup_info *in, char *buf, size_t size);

/*
 * backup_make: a consistent copy of the box on db (opened on db_path, with
 * state_dir: NULL or "" for the database's folder) into the folder dest,
 * which must not exist, without stopping it.  [out] info (may be NULL).
 * Made in "dest.partial-<pid>", every file and folder fsynced, then renamed
 * to dest and its parent fsynced: a crash leaves dest absent, never half.
 */
enum sd_result backup_make(struct db *db, const char *db_path, const char *state_dir,
			   const char *dest, struct backup_info *info);

/*
 * backup_verify: every file of dest's manifest is there with its size and
 * SHA-256, no file is missing from it, and the database passes
 * integrity_check with the schema version the manifest names.  [out] info
 * (may be NULL).  SD_INVALID naming the first problem.
 */
enum sd_result backup_verify(const char *dest, struct backup_info *info);

/*
 * backup_restore: a box at db_path (state folder state_dir) from the backup
 * dest, verified first.  Refuses (SD_INVALID) when db_path exists: a box is
 * never overwritten.  Every file written 0600 (folders 0700) and fsynced.
 */
enum sd_result backup_restore(const char *dest, const char *db_path, const char *state_dir,
			      struct backup_info *info);

/*
 * backup_take_over: on the box just restored (db), what the backed-up box's
 * processes held is given back in one transaction: its running leases end
 * now (queue_expire_leases) and its unsent mail claims are released
 * (idem_release_unsent), so the new box takes that work up at once instead
 * of a lease later.  Nothing of the new box holds them; a run of the old
 * one that still finishes writes to the old database, and the provider's
 * key absorbs its send.  [out] *leases, *claims.
 */
enum sd_result backup_take_over(struct db *db, int64_t *leases, int64_t *claims);

/*
 * backup_remove: the folder dir and everything in it, depth first, links
 * not followed (a link is removed, never what it names).  For a partial
 * backup left by a dead process and for a pruned one; best effort.
 */
void backup_remove(const char *dir);

#endif
