/*
 * cli_check.h: `stagedoor check [--db PATH] [--json]`: run the invariant
 * checks of check.h.  Exit 0 with a short summary on stdout when they hold;
 * 1 with "stagedoor: check failed: <problem>" on stderr naming the first
 * broken one; the usual errors (and statuses) for a missing, foreign or
 * newer database.  --json also prints the report as one JSON object on
 * stdout, in both cases.
 */
#ifndef SD_CLI_CHECK_H
#define SD_CLI_CHECK_H

int cli_check(int argc, char **argv);

#endif
