/*
 * commands.h: the program's top-level commands, one file each in src/cmd/
 * (as git's builtin/), each file's one entry point its node of the command
 * tree (help.h): name, function or subcommands, summary.  commands.c puts
 * them in the order `stagedoor help` lists them; nothing else names them.
 * A command's file may use any module below it and cli.h, never another
 * command.
 */
#ifndef SD_CMD_COMMANDS_H
#define SD_CMD_COMMANDS_H

#include "help.h"

extern const struct cli_cmd cmd_run;		/* run.c */
extern const struct cli_cmd cmd_serve;		/* serve.c */
extern const struct cli_cmd cmd_shop;		/* shop.c */
extern const struct cli_cmd cmd_sqs;		/* sqs.c */
extern const struct cli_cmd cmd_init;		/* init.c */
extern const struct cli_cmd cmd_config;		/* config.c */
extern const struct cli_cmd cmd_enqueue;	/* enqueue.c */
extern const struct cli_cmd cmd_worker;		/* worker.c */
extern const struct cli_cmd cmd_relay;		/* relay.c */
extern const struct cli_cmd cmd_jobs;		/* jobs.c */
extern const struct cli_cmd cmd_schedule;	/* schedule.c */
extern const struct cli_cmd cmd_event;		/* event.c */
extern const struct cli_cmd cmd_order;		/* order.c */
extern const struct cli_cmd cmd_scan;		/* scan.c */
extern const struct cli_cmd cmd_token;		/* token.c */
extern const struct cli_cmd cmd_tls;		/* tls.c */
extern const struct cli_cmd cmd_demo;		/* demo.c */
extern const struct cli_cmd cmd_backup;		/* backup.c */
extern const struct cli_cmd cmd_restore;	/* restore.c */
extern const struct cli_cmd cmd_migrate;	/* migrate.c */
extern const struct cli_cmd cmd_check;		/* check.c */
extern const struct cli_cmd cmd_mail;		/* mail.c */
extern const struct cli_cmd cmd_help;		/* help.c */

/* commands_root: "stagedoor" and its commands, the tree main dispatches */
const struct cli_cmd *commands_root(void);

#endif
