/*
 * cli_token.h: `stagedoor token add|ls|revoke` (cli_token.c).
 */
#ifndef SD_CLI_TOKEN_H
#define SD_CLI_TOKEN_H

#include "help.h"
extern const struct cli_cmd cli_token_subs[];

#endif
