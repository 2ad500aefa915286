/*
 * form.c: Stripe's request bodies, application/x-www-form-urlencoded with
 * bracket names, as a JSON tree:
 *
 *   line_items[0][price_data][currency]=eur&metadata[hold]=H1&expand[]=x
 *   -> {"line_items": {"0": {"price_data": {"currency": "eur"}}},
 *       "metadata": {"hold": "H1"}, "expand": ["x"]}
 *
 * Names and values are percent-decoded ("+" is a space; brackets may come
 * encoded or not, as stripe-node sends them bare).  Every leaf is a string:
 * the handlers read integers out of them and say which parameter was bad.
 * A name used both as a value and as a hash ("a=1&a[b]=2"), or with text
 * after a closing bracket, is malformed.  The last of two equal names wins.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paysink.h"

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

char *form_unescape(const char *s, size_t len)
{
	char *out = malloc(len + 1);
	size_t i, n = 0;

	if (!out)
		return NULL;
	for (i = 0; i < len; i++) {
		if (s[i] == '+') {
			out[n++] = ' ';
		} else if (s[i] == '%' && i + 2 < len && hexval(s[i + 1]) >= 0 &&
			   hexval(s[i + 2]) >= 0) {
			out[n++] = (char)(hexval(s[i + 1]) * 16 + hexval(s[i + 2]));
			i += 2;
		} else {
			out[n++] = s[i];
		}
	}
	out[n] = '\0';
	return out;
}

/* Split a decoded name "a[b][]" into segments: a, b, "" (append).  Returns
 * the count, or -1 when malformed. */
static int name_split(char *name, char **seg, int max)
{
	char *p = strchr(name, '[');
	int n = 0;

	if (p == name || !*name)
		return -1;
	seg[n++] = name;
	while (p) {
		char *close;

		*p = '\0';
		close = strchr(p + 1, ']');
		if (!close || n >= max)
			return -1;
		*close = '\0';
		if (strchr(p + 1, '['))
			return -1;
		seg[n++] = p + 1;
		p = close + 1;
		if (*p && *p != '[')
			return -1;
		if (!*p)
			p = NULL;
	}
	return n;
}

/* Put value at the path seg[0..n) under root; 0, or -1 on a clash. */
static int tree_put(json_t *root, char **seg, int n, const char *value)
{
	json_t *node = root;
	int i;

	for (i = 0; i < n; i++) {
		int last = i == n - 1, append = i + 1 < n && seg[i + 1][0] == '\0';
		json_t *child;

		child = json_object_get(node, seg[i]);
		if (last) {
			if (child && !json_is_string(child))
				return -1;	/* "a[b]=1&a=2" */
			return json_object_set_new(node, seg[i], json_string(value)) == 0 ? 0 : -1;
		}
		if (!child) {
			child = append ? json_array() : json_object();
			if (json_object_set_new(node, seg[i], child) != 0)
				return -1;
		} else if (json_is_string(child) || (append && !json_is_array(child)) ||
			   (!append && json_is_array(child))) {
			return -1;
		}
		node = child;
		if (append) {
			if (i + 2 != n)
				return -1;	/* "a[][b]": not Stripe's */
			return json_array_append_new(node, json_string(value)) == 0 ? 0 : -1;
		}
	}
	return -1;
}

json_t *form_parse(const char *body, size_t len, char *bad, size_t bad_size)
{
	json_t *root = json_object();
	size_t i = 0;

	while (root && i < len) {
		const char *pair = body + i, *amp = memchr(pair, '&', len - i), *eq;
		size_t plen = amp ? (size_t)(amp - pair) : len - i;
		char *name, *value, *seg[16];
		int n, rc;

		i += plen + 1;
		if (plen == 0)
			continue;
		eq = memchr(pair, '=', plen);
		name = form_unescape(pair, eq ? (size_t)(eq - pair) : plen);
		value = eq ? form_unescape(eq + 1, plen - (size_t)(eq - pair) - 1) : strdup("");
		if (!name || !value) {
			free(name);
			free(value);
			json_decref(root);
			snprintf(bad, bad_size, "(out of memory)");
			return NULL;
		}
		snprintf(bad, bad_size, "%s", name);
		n = name_split(name, seg, 16);
		rc = n > 0 ? tree_put(root, seg, n, value) : -1;
		free(name);
		free(value);
		if (rc != 0) {
			json_decref(root);
			return NULL;
		}
	}
	if (bad_size)
		bad[0] = '\0';
	return root;
}
