/*
 * demo_shop.c: the demo's shop (demo_shop.h).
 */
#define _GNU_SOURCE
#include "cmd/demo_shop.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "event_edit.h"

/* a random word after prefix: a key or a secret no one else has */
static enum sd_result random_word(const char *prefix, char *out, size_t size)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char rnd[24];
	size_t i, n = strlen(prefix);

	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd || size < n + sizeof rnd + 1)
		return err_set(SD_IO, "no random bytes for the demo's keys");
	memcpy(out, prefix, n);
	for (i = 0; i < sizeof rnd; i++)
		out[n + i] = alphabet[rnd[i] % (sizeof alphabet - 1)];
	out[n + sizeof rnd] = '\0';
	return SD_OK;
}

/* path holds text, mode 0600 (0700 for the script) */
static enum sd_result put(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	size_t n = strlen(text);

	if (fd < 0 || write(fd, text, n) != (ssize_t)n || fchmod(fd, mode) != 0) {
		if (fd >= 0)
			close(fd);
		return err_set(SD_IO, "cannot write %s: %s", path, strerror(errno));
	}
	return close(fd) == 0 ? SD_OK : err_set(SD_IO, "cannot write %s", path);
}

static enum sd_result write_files(const char *abs, const char *ps, const char *self,
				  const char *http_listen, const char *key, const char *secret,
				  char *script, size_t size)
{
	char path[PATH_MAX + 32], *text = NULL;
	enum sd_result r;
	int n;

	snprintf(path, sizeof path, "%s/stripe.key", abs);
	if ((r = put(path, key, 0600)) != SD_OK)
		return r;
	snprintf(path, sizeof path, "%s/stripe.whsec", abs);
	if ((r = put(path, secret, 0600)) != SD_OK)
		return r;
	n = asprintf(&text, "# The demo's box with its shop (stagedoor demo --shop)\n"
		     "db = %s/stagedoor.db\nhttp_listen = %s\nworkers = 1\n"
		     "shop_listen = " DEMO_SHOP_LISTEN "\nshop_name = Stagedoor Demo\n"
		     "payment_provider = stripe\nstripe_api_url = http://" DEMO_PAYSINK_LISTEN "\n"
		     "stripe_key_file = %s/stripe.key\n"
		     "stripe_webhook_secret_file = %s/stripe.whsec\n", abs, http_listen, abs, abs);
	snprintf(path, sizeof path, "%s/stagedoor.conf", abs);
	if (n < 0 || (r = put(path, text, 0600)) != SD_OK) {
		free(text);
		return n < 0 ? err_set(SD_NOMEM, "out of memory") : r;
	}
	free(text);
	/* paysink beside the box for as long as it runs; both stop on Ctrl-C */
	n = asprintf(&text, "#!/bin/sh\n# The demo's box and shop, paying at paysink (a "
		     "payment provider on this machine): no network.\n"
		     "'%s' --listen " DEMO_PAYSINK_LISTEN " --api-key-file '%s/stripe.key' "
		     "--record '%s/paysink.json' --webhook-url http://" DEMO_SHOP_LISTEN
		     "/stripe/webhook --webhook-secret-file '%s/stripe.whsec' "
		     "2>>'%s/paysink.log' &\npaysink=$!\ntrap 'kill $paysink 2>/dev/null' EXIT\n"
		     "trap 'exit 0' INT TERM\n"
		     "'%s' run --config '%s/stagedoor.conf'\n", ps, abs, abs, abs, abs, self, abs);
	snprintf(script, size, "%s/run.sh", abs);
	r = n < 0 ? err_set(SD_NOMEM, "out of memory") : put(script, text, 0700);
	free(text);
	return r;
}

enum sd_result demo_shop_prepare(struct db *db, int64_t event_id, const char *dir,
				 const char *paysink, const char *http_listen, char *script,
				 size_t size)
{
	struct event_change c = { .set = EVENT_SET_PRICE };
	char abs[PATH_MAX], ps[PATH_MAX], self[PATH_MAX], key[64], secret[64];
	enum sd_result r;
	ssize_t n;

	if (!realpath(dir, abs) || !realpath(paysink, ps) || access(ps, X_OK) != 0)
		return err_set(SD_INVALID, "--shop: %s is no program here (make build/paysink)",
			       paysink);
	if ((n = readlink("/proc/self/exe", self, sizeof self - 1)) <= 0)
		return err_set(SD_IO, "cannot name this program: %s", strerror(errno));
	self[n] = '\0';
	if (strpbrk(abs, "'\n") || strpbrk(ps, "'\n") || strpbrk(self, "'\n"))
		return err_set(SD_INVALID, "--shop: a path with a quote in it");
	if ((r = event_price_parse("25.00", "EUR", &c.price_minor, c.currency)) != SD_OK ||
	    (r = event_set(db, event_id, &c, NULL, NULL)) != SD_OK ||
	    (r = random_word("sk_test_demo", key, sizeof key)) != SD_OK ||
	    (r = random_word("whsec_demo", secret, sizeof secret)) != SD_OK)
		return r;
	return write_files(abs, ps, self, http_listen, key, secret, script, size);
}
