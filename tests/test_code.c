/*
 * test_code.c: signed ticket codes and the key file.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "code.h"
#include "testutil.h"

/* base32 of 32 bytes, unpadded */
#define CODE_LEN 52

/* Entries in a folder, without "." and "..". */
static int count_entries(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static void key_fill(unsigned char key[CODE_KEY_LEN], unsigned char start)
{
	int i;

	for (i = 0; i < CODE_KEY_LEN; i++)
		key[i] = (unsigned char)(start + i);
}

static void test_round_trip(void **state)
{
	unsigned char key[CODE_KEY_LEN];
	char code[CODE_TEXT_MAX];
	int64_t t = 0, e = 0;
	const int64_t ids[][2] = { { 1, 1 }, { 42, 7 }, { INT64_MAX, 0 }, { -1, 1234567890123LL } };
	size_t i;

	(void)state;
	key_fill(key, 0);
	for (i = 0; i < sizeof ids / sizeof ids[0]; i++) {
		code_make(key, ids[i][0], ids[i][1], code);
		assert_int_equal(code_verify(key, code, &t, &e), SD_OK);
		assert_true(t == ids[i][0]);
		assert_true(e == ids[i][1]);
	}
}

/* Known answers computed outside this program (Python's hmac and base64):
 * they pin the byte layout, the MAC, its truncation and the alphabet. */
static void test_known_answers(void **state)
{
	unsigned char key[CODE_KEY_LEN];
	char code[CODE_TEXT_MAX];

	(void)state;
	key_fill(key, 0);
	code_make(key, 42, 7, code);
	assert_string_equal(code, "AAAAAAAAAAACUAAAAAAAAAAAA4LX7N5YOGZSDKM772JHWQPNNPOA");
	code_make(key, -1, 1234567890123LL, code);
	assert_string_equal(code, "7777777777776AAAAEPXD6YEZNDFQPPJKUK4PTLFOGPPLRGVJ62A");
}

static void test_length_and_alphabet(void **state)
{
	unsigned char key[CODE_KEY_LEN];
	char code[CODE_TEXT_MAX];
	size_t i;

	(void)state;
	key_fill(key, 9);
	code_make(key, 123456, 99, code);
	assert_int_equal(strlen(code), CODE_LEN);
	for (i = 0; code[i]; i++)
		assert_non_null(strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", code[i]));
}

/* Every other alphabet character at every position must be refused: this
 * also covers the last character, whose low bits are padding. */
static void test_every_changed_character_is_invalid(void **state)
{
	static const char alpha[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
	unsigned char key[CODE_KEY_LEN];
	char code[CODE_TEXT_MAX], bad[CODE_TEXT_MAX];
	int64_t t, e;
	size_t pos, k;

	(void)state;
	key_fill(key, 3);
	code_make(key, 77, 5, code);
	for (pos = 0; pos < CODE_LEN; pos++) {
		for (k = 0; k < 32; k++) {
			if (alpha[k] == code[pos])
				continue;
			strcpy(bad, code);
			bad[pos] = alpha[k];
			if (code_verify(key, bad, &t, &e) != SD_INVALID)
				fail_msg("changed character %zu to %c still verifies", pos, alpha[k]);
		}
	}
}

static void test_malformed_and_forged_are_invalid(void **state)
{
	unsigned char key[CODE_KEY_LEN], other[CODE_KEY_LEN];
	char code[CODE_TEXT_MAX], buf[CODE_TEXT_MAX * 2];
	int64_t t = -5, e = -5;

	(void)state;
	key_fill(key, 0);
	key_fill(other, 1);
	code_make(key, 10, 20, code);

	/* truncated by one and by many */
	snprintf(buf, sizeof buf, "%.*s", CODE_LEN - 1, code);
	assert_int_equal(code_verify(key, buf, &t, &e), SD_INVALID);
	snprintf(buf, sizeof buf, "%.*s", 26, code);
	assert_int_equal(code_verify(key, buf, &t, &e), SD_INVALID);
	/* one character too many */
	snprintf(buf, sizeof buf, "%sA", code);
	assert_int_equal(code_verify(key, buf, &t, &e), SD_INVALID);
	/* made with another key */
	code_make(other, 10, 20, buf);
	assert_string_not_equal(buf, code);
	assert_int_equal(code_verify(key, buf, &t, &e), SD_INVALID);
	/* garbage, foreign characters of the right length, padding, empty */
	assert_int_equal(code_verify(key, "hello, world", &t, &e), SD_INVALID);
	memset(buf, '1', CODE_LEN);	/* '1' is not base32 */
	buf[CODE_LEN] = '\0';
	assert_int_equal(code_verify(key, buf, &t, &e), SD_INVALID);
	snprintf(buf, sizeof buf, "%.*s=", CODE_LEN - 1, code);
	assert_int_equal(code_verify(key, buf, &t, &e), SD_INVALID);
	snprintf(buf, sizeof buf, "%.26s %s", code, code + 26);	/* a space inside */
	assert_int_equal(code_verify(key, buf, &t, &e), SD_INVALID);
	assert_int_equal(code_verify(key, "", &t, &e), SD_INVALID);
	assert_int_equal(code_verify(key, "     ", &t, &e), SD_INVALID);
	assert_int_equal(code_verify(key, NULL, &t, &e), SD_INVALID);
	/* nothing was reported for any of them */
	assert_true(t == -5 && e == -5);
}

static void test_lower_case_and_spaces_verify(void **state)
{
	unsigned char key[CODE_KEY_LEN];
	char code[CODE_TEXT_MAX], buf[CODE_TEXT_MAX * 2];
	int64_t t = 0, e = 0;
	size_t i;

	(void)state;
	key_fill(key, 0);
	code_make(key, 31337, 4, code);
	snprintf(buf, sizeof buf, "  %s \t\n", code);
	assert_int_equal(code_verify(key, buf, &t, &e), SD_OK);
	assert_true(t == 31337 && e == 4);
	for (i = 0; code[i]; i++)
		buf[i] = (char)tolower((unsigned char)code[i]);
	buf[i] = '\0';
	t = e = 0;
	assert_int_equal(code_verify(key, buf, &t, &e), SD_OK);
	assert_true(t == 31337 && e == 4);
}

static void test_key_path(void **state)
{
	char buf[300];

	(void)state;
	assert_int_equal(code_key_path("/var/lib/stagedoor/box.db", NULL, buf, sizeof buf), SD_OK);
	assert_string_equal(buf, "/var/lib/stagedoor/ticket.key");
	assert_int_equal(code_key_path("box.db", NULL, buf, sizeof buf), SD_OK);
	assert_string_equal(buf, "./ticket.key");
	assert_int_equal(code_key_path("/box.db", NULL, buf, sizeof buf), SD_OK);
	assert_string_equal(buf, "/ticket.key");
	assert_int_equal(code_key_path("/var/lib/stagedoor/box.db", NULL, buf, 10), SD_INVALID);
}

static void test_key_file_created_private_and_kept(void **state)
{
	struct tu_env *env = *state;
	unsigned char key[CODE_KEY_LEN], again[CODE_KEY_LEN];
	unsigned char *raw;
	char path[300], code[CODE_TEXT_MAX];
	struct stat st;
	size_t size;
	int created = -1;
	int64_t t, e;

	assert_int_equal(code_key_path(env->db_path, NULL, path, sizeof path), SD_OK);
	assert_int_equal(code_key_ensure(path, &created), SD_OK);
	assert_int_equal(created, 1);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(st.st_size, CODE_KEY_LEN);
	raw = tu_slurp(path, &size);
	assert_int_equal(size, CODE_KEY_LEN);

	assert_int_equal(code_key_load(path, key), SD_OK);
	assert_memory_equal(key, raw, CODE_KEY_LEN);
	code_make(key, 5, 6, code);

	/* a second ensure leaves the key as it is, and old codes still verify */
	assert_int_equal(code_key_ensure(path, &created), SD_OK);
	assert_int_equal(created, 0);
	assert_int_equal(code_key_load(path, again), SD_OK);
	assert_memory_equal(again, raw, CODE_KEY_LEN);
	assert_int_equal(code_verify(again, code, &t, &e), SD_OK);

	/* no temp file left beside it: the folder holds the key only */
	assert_int_equal(count_entries(env->dir), 1);
	free(raw);
}

static void test_two_keys_differ(void **state)
{
	struct tu_env *env = *state;
	unsigned char a[CODE_KEY_LEN], b[CODE_KEY_LEN];
	char pa[300], pb[300];

	snprintf(pa, sizeof pa, "%s/a.key", env->dir);
	snprintf(pb, sizeof pb, "%s/b.key", env->dir);
	assert_int_equal(code_key_ensure(pa, NULL), SD_OK);
	assert_int_equal(code_key_ensure(pb, NULL), SD_OK);
	assert_int_equal(code_key_load(pa, a), SD_OK);
	assert_int_equal(code_key_load(pb, b), SD_OK);
	assert_memory_not_equal(a, b, CODE_KEY_LEN);
}

static void test_key_file_readable_by_others_refused(void **state)
{
	struct tu_env *env = *state;
	unsigned char key[CODE_KEY_LEN];
	char path[300];

	assert_int_equal(code_key_path(env->db_path, NULL, path, sizeof path), SD_OK);
	assert_int_equal(code_key_ensure(path, NULL), SD_OK);
	assert_int_equal(chmod(path, 0644), 0);
	assert_int_equal(code_key_load(path, key), SD_INVALID);
	assert_non_null(strstr(err_msg(), "0644"));
	assert_non_null(strstr(err_msg(), "chmod 600"));
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(code_key_load(path, key), SD_INVALID);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(code_key_load(path, key), SD_OK);
}

static void test_key_file_wrong_size_or_missing(void **state)
{
	struct tu_env *env = *state;
	unsigned char key[CODE_KEY_LEN];
	char path[300];
	FILE *f;

	snprintf(path, sizeof path, "%s/short.key", env->dir);
	f = fopen(path, "wb");
	assert_non_null(f);
	fputs("too short", f);
	fclose(f);
	assert_int_equal(chmod(path, 0600), 0);
	assert_int_equal(code_key_load(path, key), SD_INVALID);
	assert_non_null(strstr(err_msg(), "32"));
	/* ensure does not replace a file that is there, even a bad one */
	assert_int_equal(code_key_ensure(path, NULL), SD_OK);
	assert_int_equal(code_key_load(path, key), SD_INVALID);

	snprintf(path, sizeof path, "%s/none.key", env->dir);
	assert_int_equal(code_key_load(path, key), SD_NOT_FOUND);
}

/* SHA-256 against FIPS 180-2's test vectors (the API's request hashes). */
static void test_sha256_vectors(void **state)
{
	char h[CODE_SHA256_HEX + 1];
	static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";

	(void)state;
	code_sha256_hex("", 0, h);
	assert_string_equal(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	code_sha256_hex("abc", 3, h);
	assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	code_sha256_hex(two, strlen(two), h);
	assert_string_equal(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* RFC 1321's and RFC 4231's test 2 answers; the raw HMAC is the hex one */
static void test_md5_and_raw_hmac_vectors(void **state)
{
	unsigned char mac[32];
	char hex[65], raw_hex[65];
	int i;

	(void)state;
	code_md5_hex("", 0, hex);
	assert_string_equal(hex, "d41d8cd98f00b204e9800998ecf8427e");
	code_md5_hex("abc", 3, hex);
	assert_string_equal(hex, "900150983cd24fb0d6963f7d28e17f72");
	code_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, mac);
	for (i = 0; i < 32; i++)
		snprintf(raw_hex + 2 * i, 3, "%02x", mac[i]);
	assert_string_equal(raw_hex,
			    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	code_hmac_sha256_hex("Jefe", 4, "", "what do ya want for nothing?", 28, hex);
	assert_string_equal(hex, raw_hex);
}

static void test_ct_equal(void **state)
{
	(void)state;
	assert_true(code_ct_equal("abcdef", "abcdef", 6));
	assert_false(code_ct_equal("abcdef", "abcdeF", 6));
	assert_false(code_ct_equal("Xbcdef", "abcdef", 6));
	assert_true(code_ct_equal("abc", "abX", 2));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_sha256_vectors),
		cmocka_unit_test(test_ct_equal),
		cmocka_unit_test(test_md5_and_raw_hmac_vectors),
		cmocka_unit_test(test_known_answers),
		cmocka_unit_test(test_length_and_alphabet),
		cmocka_unit_test(test_every_changed_character_is_invalid),
		cmocka_unit_test(test_malformed_and_forged_are_invalid),
		cmocka_unit_test(test_lower_case_and_spaces_verify),
		cmocka_unit_test(test_key_path),
		cmocka_unit_test_setup_teardown(test_key_file_created_private_and_kept, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_two_keys_differ, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_key_file_readable_by_others_refused,
						tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_key_file_wrong_size_or_missing, tu_setup_nodb,
						tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
