/*
 * cli_migrate.h: `stagedoor migrate --from PATH --to postgresql://...
 * [--state-dir DIR]`: move a box from its SQLite file to PostgreSQL
 * (boxmove.h), then check the target against the source.
 *
 * Exit statuses: 0 the copy committed and `check` says of the target what
 * it says of the source; 1 the copy was refused or failed (nothing was
 * committed) or the checks disagree; 2 bad usage.
 */
#ifndef SD_CLI_MIGRATE_H
#define SD_CLI_MIGRATE_H

int cli_migrate(int argc, char **argv);

#endif
