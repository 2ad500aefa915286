/*
 * test_blob.c: the file store: atomic puts under fixed keys, and keys that
 * could reach outside the store are refused before any file is touched.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blob.h"
#include "testutil.h"

/* Every entry under dir, recursively, as "a/b" lines into out; returns the
 * count.  Used to see exactly what a call left on disk. */
static int list_tree(const char *dir, const char *prefix, char *out, size_t size)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	assert_non_null(d);
	while ((de = readdir(d))) {
		char path[600], rel[600];
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
		snprintf(rel, sizeof rel, "%s%s", prefix, de->d_name);
		if (out && strlen(out) + strlen(rel) + 2 < size) {
			strcat(out, rel);
			strcat(out, "\n");
		}
		n++;
		assert_int_equal(lstat(path, &st), 0);
		if (S_ISDIR(st.st_mode)) {
			char sub[600];

			assert_true(snprintf(sub, sizeof sub, "%s/", rel) < (int)sizeof sub);
			n += list_tree(path, sub, out, size);
		}
	}
	closedir(d);
	return n;
}

static struct blob_store *open_store(struct tu_env *env, char *dir, size_t size)
{
	struct blob_store *s;

	snprintf(dir, size, "%s/store", env->dir);
	assert_int_equal(blob_open(dir, &s), SD_OK);
	return s;
}

static void test_put_get_round_trip(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	unsigned char data[3000], *got;
	char dir[300], path[400];
	size_t len, i;
	struct stat st;

	for (i = 0; i < sizeof data; i++)
		data[i] = (unsigned char)(i * 7 + 3);	/* NULs included */
	s = open_store(env, dir, sizeof dir);
	assert_int_equal(blob_exists(s, "t.pdf"), 0);
	assert_int_equal(blob_get(s, "t.pdf", &got, &len), SD_NOT_FOUND);
	assert_int_equal(blob_put(s, "t.pdf", data, sizeof data), SD_OK);
	assert_int_equal(blob_exists(s, "t.pdf"), 1);
	assert_int_equal(blob_get(s, "t.pdf", &got, &len), SD_OK);
	assert_int_equal(len, sizeof data);
	assert_memory_equal(got, data, sizeof data);
	free(got);

	assert_int_equal(blob_path(s, "t.pdf", path, sizeof path), SD_OK);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_size, sizeof data);

	/* an empty file is a file */
	assert_int_equal(blob_put(s, "empty", "", 0), SD_OK);
	assert_int_equal(blob_get(s, "empty", &got, &len), SD_OK);
	assert_int_equal(len, 0);
	free(got);
	blob_close(s);
}

static void test_put_again_same_bytes(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	unsigned char *got;
	char dir[300], list[1000] = "";
	size_t len;

	s = open_store(env, dir, sizeof dir);
	assert_int_equal(blob_put(s, "tickets/o1.pdf", "same bytes", 10), SD_OK);
	assert_int_equal(blob_put(s, "tickets/o1.pdf", "same bytes", 10), SD_OK);
	assert_int_equal(blob_get(s, "tickets/o1.pdf", &got, &len), SD_OK);
	assert_int_equal(len, 10);
	assert_memory_equal(got, "same bytes", 10);
	free(got);
	/* the store holds the folder and one file, nothing else */
	assert_int_equal(list_tree(dir, "", list, sizeof list), 2);
	assert_string_equal(list, "tickets\ntickets/o1.pdf\n");
	blob_close(s);
}

static void test_escaping_keys_refused_and_nothing_created(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	unsigned char *got;
	char dir[300], path[400], list[2000] = "";
	char long_key[BLOB_KEY_MAX + 2];
	size_t len, i;
	const char *bad[] = { "../x", "/etc/passwd", "a/../../b", "a//b", ".", "a/./b", "",
			      "..", "a/", "/", "a/..", "sub/.tmp-1234", "a b", "a\\b",
			      "tickets/x\n.pdf", long_key };

	memset(long_key, 'a', BLOB_KEY_MAX + 1);
	long_key[BLOB_KEY_MAX + 1] = '\0';
	s = open_store(env, dir, sizeof dir);
	for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		if (blob_key_valid(bad[i]) != SD_INVALID)
			fail_msg("key '%s' was accepted by blob_key_valid", bad[i]);
		if (blob_put(s, bad[i], "evil", 4) != SD_INVALID)
			fail_msg("key '%s' was accepted by blob_put", bad[i]);
		/* the message may quote the key, but stays one line */
		assert_null(strpbrk(err_msg(), "\r\n"));
		assert_int_equal(blob_get(s, bad[i], &got, &len), SD_INVALID);
		assert_null(got);
		assert_int_equal(blob_exists(s, bad[i]), 0);
		assert_int_equal(blob_path(s, bad[i], path, sizeof path), SD_INVALID);
	}
	assert_non_null(strstr(err_msg(), "longer than"));
	/* the test folder holds the store and the store is empty: nothing was
	 * made beside it ("../x", "a/../../b") or inside it */
	assert_int_equal(list_tree(env->dir, "", list, sizeof list), 1);
	assert_string_equal(list, "store\n");

	/* a key of exactly the longest length is fine */
	long_key[BLOB_KEY_MAX] = '\0';
	assert_int_equal(blob_key_valid(long_key), SD_OK);
	assert_int_equal(blob_key_valid("a.b/c-d_e/F9..x"), SD_OK);
	blob_close(s);
}

static void test_nested_key_makes_folders(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	unsigned char *got;
	char dir[300], sub[400], list[1000] = "";
	struct stat st;
	size_t len;

	s = open_store(env, dir, sizeof dir);
	assert_int_equal(blob_put(s, "events/7/tickets/42.pdf", "%PDF", 4), SD_OK);
	snprintf(sub, sizeof sub, "%s/events/7/tickets", dir);
	assert_int_equal(stat(sub, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	{
		mode_t mask = umask(0);

		umask(mask);
		assert_int_equal(st.st_mode & 0777, 0700 & ~mask);
	}
	assert_int_equal(blob_get(s, "events/7/tickets/42.pdf", &got, &len), SD_OK);
	assert_int_equal(len, 4);
	free(got);
	/* a folder is not a blob */
	assert_int_equal(blob_exists(s, "events/7"), 0);
	assert_int_equal(blob_get(s, "events/7", &got, &len), SD_NOT_FOUND);
	assert_int_equal(list_tree(dir, "", list, sizeof list), 4);
	assert_string_equal(list, "events\nevents/7\nevents/7/tickets\nevents/7/tickets/42.pdf\n");
	blob_close(s);
}

static void test_no_temp_files_left(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	char dir[300], key[64], list[4000] = "";
	int i;

	s = open_store(env, dir, sizeof dir);
	for (i = 0; i < 20; i++) {
		snprintf(key, sizeof key, "%s/k%d", i % 2 ? "odd" : "even", i % 5);
		assert_int_equal(blob_put(s, key, key, strlen(key)), SD_OK);
	}
	/* twenty puts over ten keys: two folders of k0..k4 each, and no
	 * leftovers */
	list_tree(dir, "", list, sizeof list);
	assert_null(strstr(list, ".tmp-"));
	assert_int_equal(list_tree(dir, "", NULL, 0), 2 + 10);
	blob_close(s);
}

static void test_open_makes_the_folder(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	char dir[300];
	struct stat st;

	snprintf(dir, sizeof dir, "%s/deep/er/store/", env->dir);
	assert_int_equal(blob_open(dir, &s), SD_OK);
	assert_int_equal(stat(dir, &st), 0);
	assert_true(S_ISDIR(st.st_mode));
	assert_int_equal(blob_put(s, "x", "1", 1), SD_OK);
	assert_int_equal(blob_exists(s, "x"), 1);
	blob_close(s);
	blob_close(NULL);
}

/* ======================== blob_store = db ============================== */

/* The same store in the database: bytes (NULs and all) round-trip, a second
 * put of a key replaces it with the same bytes, and escaping keys are
 * refused before the database is touched. */
static void test_db_store_round_trip(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	static unsigned char data[300000];
	unsigned char *got;
	char where[400];
	size_t len, i;

	for (i = 0; i < sizeof data; i++)
		data[i] = (unsigned char)(i * 7 + 3);
	assert_int_equal(blob_open_db(env->db_path, &s), SD_OK);
	assert_int_equal(blob_exists(s, "tickets/T1.pdf"), 0);
	assert_int_equal(blob_get(s, "tickets/T1.pdf", &got, &len), SD_NOT_FOUND);
	assert_int_equal(blob_put(s, "tickets/T1.pdf", data, sizeof data), SD_OK);
	assert_int_equal(blob_put(s, "tickets/T1.pdf", data, sizeof data), SD_OK);
	assert_int_equal(blob_exists(s, "tickets/T1.pdf"), 1);
	assert_int_equal(blob_get(s, "tickets/T1.pdf", &got, &len), SD_OK);
	assert_int_equal(len, sizeof data);
	assert_memory_equal(got, data, sizeof data);
	free(got);
	assert_int_equal(blob_put(s, "empty", "", 0), SD_OK);
	assert_int_equal(blob_get(s, "empty", &got, &len), SD_OK);
	assert_int_equal(len, 0);
	free(got);
	assert_int_equal(blob_put(s, "../escape", "x", 1), SD_INVALID);
	assert_int_equal(blob_put(s, ".tmp-x", "x", 1), SD_INVALID);
	assert_int_equal(tu_countf(env->db_path, "SELECT count(*) FROM blobs"), 2);
	assert_int_equal(tu_countf(env->db_path, "SELECT bytes FROM blobs WHERE key = 'tickets/T1.pdf'"),
			 (int64_t)sizeof data);
	assert_int_equal(blob_path(s, "tickets/T1.pdf", where, sizeof where), SD_OK);
	assert_non_null(strstr(where, "blobs table"));
	blob_close(s);
}

/* blob_store: files on SQLite and db on PostgreSQL unless set; "db" and
 * "files" choose; anything else is refused. */
static void test_blob_store_setting(void **state)
{
	struct tu_env *env = *state;
	struct blob_store *s;
	char dir[300];

	snprintf(dir, sizeof dir, "%s/store", env->dir);
	assert_int_equal(blob_where_set(NULL), SD_OK);
	assert_int_equal(blob_where_db(env->db_path), tu_pg());
	assert_int_equal(blob_where_db("/var/lib/stagedoor/stagedoor.db"), 0);
	assert_int_equal(blob_where_db("postgresql://box@db.venue/stagedoor"), 1);
	assert_int_equal(blob_where_set("db"), SD_OK);
	assert_int_equal(blob_where_db("/var/lib/stagedoor/stagedoor.db"), 1);
	assert_int_equal(blob_open_box(env->db_path, dir, &s), SD_OK);
	assert_int_equal(blob_put(s, "k", "v", 1), SD_OK);
	blob_close(s);
	assert_int_equal(tu_countf(env->db_path, "SELECT count(*) FROM blobs WHERE key = 'k'"), 1);
	assert_int_equal(blob_where_set("files"), SD_OK);
	assert_int_equal(blob_where_db("postgresql://box@db.venue/stagedoor"), 0);
	assert_int_equal(blob_open_box(env->db_path, dir, &s), SD_OK);
	assert_int_equal(blob_put(s, "k2", "v", 1), SD_OK);
	blob_close(s);
	assert_int_equal(tu_countf(env->db_path, "SELECT count(*) FROM blobs WHERE key = 'k2'"), 0);
	strcat(dir, "/k2");
	assert_int_equal(access(dir, F_OK), 0);
	assert_int_equal(blob_where_set("disk"), SD_INVALID);
	assert_int_equal(blob_where_set(NULL), SD_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_db_store_round_trip, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_blob_store_setting, tu_setup_real, tu_teardown),
		cmocka_unit_test_setup_teardown(test_put_get_round_trip, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_put_again_same_bytes, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_escaping_keys_refused_and_nothing_created,
						tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_nested_key_makes_folders, tu_setup_nodb,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_no_temp_files_left, tu_setup_nodb, tu_teardown),
		cmocka_unit_test_setup_teardown(test_open_makes_the_folder, tu_setup_nodb,
						tu_teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
