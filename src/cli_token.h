/*
 * cli_token.h: `stagedoor token add|ls|revoke` (cli_token.c).
 */
#ifndef SD_CLI_TOKEN_H
#define SD_CLI_TOKEN_H

int cli_token(int argc, char **argv);

#endif
