/*
 * cli_tls.h: `stagedoor tls init` and `stagedoor tls show`: the box CA and
 * the HTTPS server's certificate in <state dir>/tls (cert.h).
 *
 *   stagedoor tls init [--name HOST]... [--ip ADDR]... [--renew]
 *                      [--state-dir DIR] [--db PATH]
 *   stagedoor tls show [--state-dir DIR] [--db PATH] [--json]
 *
 * Exit statuses: 0 done; 1 a file cannot be made or read, or (show) there
 * is no CA or server certificate yet; 2 bad usage (nothing written).
 */
#ifndef SD_CLI_TLS_H
#define SD_CLI_TLS_H

/* cli_tls_subs: init and show (help.h). */
#include "help.h"
extern const struct cli_cmd cli_tls_subs[];

#endif
