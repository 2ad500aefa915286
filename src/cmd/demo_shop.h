/*
 * demo_shop.h: the demo's shop (`stagedoor demo --shop PAYSINK`): the
 * sample event priced, and a script that runs the demo's box with its shop
 * against tools/paysink, a payment provider on this machine: no network.
 */
#ifndef SD_DEMO_SHOP_H
#define SD_DEMO_SHOP_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"
#include "result.h"

#define DEMO_SHOP_LISTEN "127.0.0.1:8081"
#define DEMO_PAYSINK_LISTEN "127.0.0.1:8082"

/*
 * demo_shop_prepare: price event_id (25.00 EUR), make the demo's provider
 * key and webhook secret (random, files only the user may read), its
 * configuration (dir/stagedoor.conf) and dir/run.sh, which starts paysink
 * (the program at paysink) and the box with the shop and the dashboard on
 * http_listen.  [out] script: the script's path.
 */
enum sd_result demo_shop_prepare(struct db *db, int64_t event_id, const char *dir,
				 const char *paysink, const char *http_listen, char *script,
				 size_t size);

#endif
