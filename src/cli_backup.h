/*
 * cli_backup.h: `stagedoor backup DEST [--db PATH] [--state-dir DIR]`,
 * `stagedoor backup verify DEST`, `stagedoor restore DEST --db PATH
 * [--state-dir DIR]` (cli_backup.c).
 */
#ifndef SD_CLI_BACKUP_H
#define SD_CLI_BACKUP_H

int cli_backup(int argc, char **argv);
int cli_restore(int argc, char **argv);

/* cli_backup_subs: backup verify (help.h); `backup DEST` is cli_backup. */
#include "help.h"
extern const struct cli_cmd cli_backup_subs[];

#endif
