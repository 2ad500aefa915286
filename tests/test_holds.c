/*
 * test_holds.c: prices and the shop's holds, on either engine
 * (tools/pg_tests.sh), under the fake clock.
 *
 * Money: ISO 4217 codes and their minor units, prices parsed digit by digit
 * and refused with more decimals than the currency has, amounts as a
 * venue's locale writes them.  Holds: seats held count against the
 * capacity in the very transaction that checks it (a box-office order
 * cannot take them), are free again the moment the lease runs out (no
 * sweeper), become the order of their own payment even on a full house;
 * the caps per client and per email; a renewal allowed once, never for a
 * hold that ran out; the reconcile job queued with the hold; an ending
 * that only one run can win; an order that records what it was charged.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "event_edit.h"
#include "holds.h"
#include "lang.h"
#include "money.h"
#include "orders.h"
#include "testutil.h"
#include "timefmt.h"

#define MIN_MS (60 * 1000LL)

static void test_money(void **state)
{
	char code[4], buf[MONEY_TEXT_MAX];
	int64_t m = -1;
	int e = -1;

	(void)state;
	assert_int_equal(money_currency_norm("eur", code, &e), SD_OK);
	assert_string_equal(code, "EUR");
	assert_int_equal(e, 2);
	assert_int_equal(money_currency_norm("JPY", code, &e), SD_OK);
	assert_int_equal(e, 0);
	assert_int_equal(money_currency_norm("kwd", code, &e), SD_OK);
	assert_int_equal(e, 3);
	assert_int_equal(money_currency_norm("XYZ", code, NULL), SD_INVALID);
	assert_int_equal(money_currency_norm("EU", code, NULL), SD_INVALID);
	assert_int_equal(money_currency_norm("E1R", code, NULL), SD_INVALID);

	assert_int_equal(money_parse("25.00", "EUR", &m), SD_OK);
	assert_int_equal(m, 2500);
	assert_int_equal(money_parse("25", "EUR", &m), SD_OK);
	assert_int_equal(m, 2500);
	assert_int_equal(money_parse("0.5", "EUR", &m), SD_OK);
	assert_int_equal(m, 50);
	assert_int_equal(money_parse("2500", "JPY", &m), SD_OK);
	assert_int_equal(m, 2500);
	assert_int_equal(money_parse("1.234", "KWD", &m), SD_OK);
	assert_int_equal(m, 1234);
	assert_int_equal(money_parse("999999.99", "EUR", &m), SD_OK);
	assert_int_equal(m, 99999999);
	/* refused: more decimals than the currency has, signs, commas, too much */
	assert_int_equal(money_parse("25.001", "EUR", &m), SD_INVALID);
	assert_int_equal(money_parse("25.5", "JPY", &m), SD_INVALID);
	assert_int_equal(money_parse("-1", "EUR", &m), SD_INVALID);
	assert_int_equal(money_parse("25,00", "EUR", &m), SD_INVALID);
	assert_int_equal(money_parse("25.", "EUR", &m), SD_INVALID);
	assert_int_equal(money_parse(".5", "EUR", &m), SD_INVALID);
	assert_int_equal(money_parse("", "EUR", &m), SD_INVALID);
	assert_int_equal(money_parse("1000000.00", "EUR", &m), SD_INVALID);
	assert_int_equal(money_parse("99999999999999999999999", "EUR", &m), SD_INVALID);

	money_plain(2500, "EUR", buf, sizeof buf);
	assert_string_equal(buf, "25.00");
	money_plain(5, "EUR", buf, sizeof buf);
	assert_string_equal(buf, "0.05");
	money_plain(2500, "JPY", buf, sizeof buf);
	assert_string_equal(buf, "2500");
	money_plain(1234, "KWD", buf, sizeof buf);
	assert_string_equal(buf, "1.234");
}

static void test_lang(void **state)
{
	char buf[LANG_TEXT_MAX];
	/* 2026-12-04 19:00 UTC: 20:00 in Berlin, a Friday */
	const int64_t friday = 1796410800000LL;

	(void)state;
	assert_int_equal(timefmt_zone_set("Europe/Berlin"), SD_OK);
	assert_int_equal(lang_set("en-GB"), SD_OK);
	lang_money(123450, "EUR", buf, sizeof buf);
	assert_string_equal(buf, "€1,234.50");
	lang_money(2500, "GBP", buf, sizeof buf);
	assert_string_equal(buf, "£25.00");
	lang_money(2500, "CHF", buf, sizeof buf);
	assert_string_equal(buf, "CHF 25.00");
	lang_when(friday, buf, sizeof buf);
	assert_string_equal(buf, "Fri 4 Dec 2026, 20:00 CET");

	assert_int_equal(lang_set("de-DE"), SD_OK);
	assert_string_equal(lang_tag(), "de-DE");
	lang_money(123450, "EUR", buf, sizeof buf);
	assert_string_equal(buf, "1.234,50 €");
	lang_when(friday, buf, sizeof buf);
	assert_string_equal(buf, "Fr., 4. Dez. 2026, 20:00 CET");

	assert_int_equal(lang_set("fr_fr"), SD_OK);
	lang_money(123450, "EUR", buf, sizeof buf);
	assert_string_equal(buf, "1 234,50 €");

	assert_int_equal(lang_set("en-US"), SD_OK);
	lang_money(2500, "USD", buf, sizeof buf);
	assert_string_equal(buf, "$25.00");
	lang_when(friday, buf, sizeof buf);
	assert_string_equal(buf, "Fri, Dec 4, 2026, 8:00 PM CET");
	lang_money(250000, "JPY", buf, sizeof buf);
	assert_string_equal(buf, "JPY 250,000");

	assert_int_equal(lang_set("xx-YY"), SD_INVALID);
	assert_non_null(strstr(err_msg(), "de-DE"));
	assert_string_equal(lang_tag(), "en-US");	/* a refused tag changes nothing */
	assert_int_equal(lang_set(NULL), SD_OK);
	assert_string_equal(lang_tag(), LANG_DEFAULT);
	assert_int_equal(timefmt_zone_set(NULL), SD_OK);
}

/* ---- holds ---------------------------------------------------------------- */

static const struct hold_rules RULES = { .ttl_ms = 10 * MIN_MS, .renewals = 1, .per_client = 4,
					  .seats_max = 10 };

static int64_t event_priced(const struct tu_env *e, int64_t capacity, const char *price,
			    const char *currency)
{
	struct event_new ev = { "Gig", "Hall", 1900000000000LL, capacity, 0, "" };
	int64_t id = 0;

	if (price)
		assert_int_equal(event_price_parse(price, currency, &ev.price_minor, ev.currency),
				 SD_OK);
	assert_int_equal(event_add(e->db, &ev, &id), SD_OK);
	return id;
}

static enum sd_result hold(const struct tu_env *e, int64_t event, int64_t seats,
			   const char *email, const char *client, struct hold_view *h)
{
	struct hold_new n = { event, seats, "Ada Lovelace", email, client };

	return hold_add(e->db, &n, &RULES, h);
}

static enum sd_result box_office(const struct tu_env *e, int64_t event, int64_t seats,
				 char *public_id)
{
	struct order_new o = { event, "Window Buyer", NULL, seats, NULL, "cash", 0, 0, NULL, NULL };
	int replayed = 0;

	return order_add(e->db, &o, public_id, &replayed);
}

static void test_held_seats_count_until_the_lease_runs_out(void **state)
{
	const struct tu_env *e = *state;
	struct hold_view h;
	char pid[16];
	int64_t ev = event_priced(e, 5, "25.00", "EUR"), held = -1;

	assert_int_equal(hold(e, ev, 3, "ada@example.org", "192.0.2.1", &h), SD_OK);
	assert_int_equal(h.state, HOLD_OPEN);
	assert_int_equal(h.amount_minor, 7500);
	assert_string_equal(h.currency, "EUR");
	assert_int_equal(h.expires_at, clock_now_ms() + 10 * MIN_MS);
	assert_int_equal(strlen(h.public_id), HOLD_ID_LEN);
	assert_int_equal(h.public_id[0], 'H');
	assert_int_equal(strlen(h.link), HOLD_LINK_LEN);
	assert_null(strstr(h.link, h.public_id + 1));	/* the link is not the id */
	{
		struct hold_view byl;

		assert_int_equal(hold_get_link(e->db, h.link, &byl), SD_OK);
		assert_int_equal(byl.id, h.id);
		assert_int_equal(hold_get_link(e->db, h.public_id, &byl), SD_NOT_FOUND);
	}
	assert_int_equal(holds_held(e->db, ev, 0, clock_now_ms(), &held), SD_OK);
	assert_int_equal(held, 3);

	/* the window cannot sell the held seats, nor another buyer hold them */
	assert_int_equal(box_office(e, ev, 3, pid), SD_SOLD_OUT);
	assert_non_null(strstr(err_msg(), "only 2 seats left"));
	assert_int_equal(hold(e, ev, 3, "bob@example.org", "192.0.2.2", &h),
			 SD_SOLD_OUT);
	assert_int_equal(box_office(e, ev, 2, pid), SD_OK);
	assert_int_equal(box_office(e, ev, 1, pid), SD_SOLD_OUT);
	assert_non_null(strstr(err_msg(), "buyers are paying"));

	/* one millisecond before the end it still holds; at the end it does not */
	clock_fake_advance(10 * MIN_MS - 1);
	assert_int_equal(box_office(e, ev, 1, pid), SD_SOLD_OUT);
	clock_fake_advance(1);
	assert_int_equal(holds_held(e->db, ev, 0, clock_now_ms(), &held), SD_OK);
	assert_int_equal(held, 0);
	assert_int_equal(box_office(e, ev, 3, pid), SD_OK);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM holds WHERE state = 'open'"), 1);
}

static void test_a_hold_becomes_its_own_order_on_a_full_house(void **state)
{
	const struct tu_env *e = *state;
	struct hold_view h;
	char pid[16];
	int64_t ev = event_priced(e, 4, "12.50", "GBP");
	int replayed = 0;

	assert_int_equal(hold(e, ev, 2, "ada@example.org", "192.0.2.1", &h), SD_OK);
	assert_int_equal(box_office(e, ev, 2, pid), SD_OK);	/* the house is full now */
	{
		struct order_new o = { ev, h.name, h.email, h.seats, "hold-x", "online", h.id,
				       h.amount_minor, h.currency, "pi_test_1" };

		assert_int_equal(order_add(e->db, &o, pid, &replayed), SD_OK);
	}
	assert_int_equal(tu_countf(e->db_path, "SELECT amount_minor FROM orders WHERE public_id "
				   "= '%s' AND currency = 'GBP' AND payment = 'online' AND "
				   "payment_ref = 'pi_test_1'", pid), 2500);
	/* the box office's order was charged the event's price */
	assert_int_equal(tu_count(e->db_path, "SELECT amount_minor FROM orders WHERE payment = "
				  "'cash'"), 2500);
}

/* held from a client in a network (an IPv6 /64 in its /56) */
static enum sd_result hold_net(const struct tu_env *e, int64_t event, const char *email,
			       const char *client, const char *net, struct hold_view *h)
{
	struct hold_new n = { event, 1, "Ada Lovelace", email, client, net };

	return hold_add(e->db, &n, &RULES, h);
}

static void test_caps_per_client_and_network_never_email(void **state)
{
	const struct tu_env *e = *state;
	struct hold_view h;
	char email[64], client[64];
	int64_t ev = event_priced(e, 100, "5", "EUR");
	int i;

	for (i = 0; i < 4; i++) {
		snprintf(email, sizeof email, "b%d@example.org", i);
		assert_int_equal(hold(e, ev, 1, email, "198.51.100.7", &h), SD_OK);
	}
	assert_int_equal(hold(e, ev, 1, "b9@example.org", "198.51.100.7", &h), SD_LIMITED);
	assert_non_null(strstr(err_msg(), "your address"));
	/* an email is no key of the caps: a stranger who types a victim's
	 * address locks nobody out of buying */
	for (i = 0; i < 4; i++) {
		snprintf(client, sizeof client, "203.0.113.%d", i + 1);
		assert_int_equal(hold(e, ev, 1, "victim@example.org", client, &h), SD_OK);
	}
	assert_int_equal(hold(e, ev, 1, "Victim@Example.org", "203.0.113.99", &h), SD_OK);
	/* IPv6: four /64s of one /56 fill its cap, a fifth /64 of it is refused */
	for (i = 0; i < 4; i++) {
		snprintf(client, sizeof client, "2001:db8:0:%x::/64", 0x10 + i);
		assert_int_equal(hold_net(e, ev, "v6@example.org", client, "2001:db8::/56", &h),
				 SD_OK);
	}
	assert_int_equal(hold_net(e, ev, "v6@example.org", "2001:db8:0:20::/64", "2001:db8::/56",
				  &h), SD_LIMITED);
	assert_non_null(strstr(err_msg(), "your network"));
	assert_int_equal(hold_net(e, ev, "v6@example.org", "2001:db8:0:120::/64",
				  "2001:db8:0:100::/56", &h), SD_OK);
	/* the caps count live holds only */
	clock_fake_advance(10 * MIN_MS);
	assert_int_equal(hold(e, ev, 1, "b9@example.org", "198.51.100.7", &h), SD_OK);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM holds"), 15);
}

static void test_refusals_write_nothing(void **state)
{
	const struct tu_env *e = *state;
	struct hold_view h;
	struct hold_new n = { 0, 1, "Ada", "ada@example.org", "192.0.2.1" };
	int64_t free_ev = event_priced(e, 10, NULL, NULL), ev = event_priced(e, 10, "5", "EUR");

	assert_int_equal(hold(e, free_ev, 1, "ada@example.org", "192.0.2.1", &h), SD_CONFLICT);
	assert_non_null(strstr(err_msg(), "not sold online"));
	assert_int_equal(hold(e, ev, 11, "ada@example.org", "192.0.2.1", &h), SD_INVALID);
	assert_int_equal(hold(e, ev, 0, "ada@example.org", "192.0.2.1", &h), SD_INVALID);
	assert_int_equal(hold(e, ev, 1, "not an address", "192.0.2.1", &h), SD_INVALID);
	n.event_id = ev;
	n.name = "";
	assert_int_equal(hold_add(e->db, &n, &RULES, &h), SD_INVALID);
	n.name = "Ada\x01";
	assert_int_equal(hold_add(e->db, &n, &RULES, &h), SD_INVALID);
	assert_int_equal(hold(e, 999, 1, "ada@example.org", "192.0.2.1", &h), SD_NOT_FOUND);
	assert_int_equal(event_close(e->db, ev, NULL, NULL), SD_OK);
	assert_int_equal(hold(e, ev, 1, "ada@example.org", "192.0.2.1", &h), SD_CONFLICT);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM holds"), 0);
	assert_int_equal(tu_count(e->db_path, "SELECT count(*) FROM outbox"), 0);
}

static void test_renewal_once_and_never_after_the_end(void **state)
{
	const struct tu_env *e = *state;
	struct hold_view h, r;
	int64_t ev = event_priced(e, 10, "5", "EUR");

	assert_int_equal(hold(e, ev, 1, "ada@example.org", "192.0.2.1", &h), SD_OK);
	clock_fake_advance(9 * MIN_MS);
	assert_int_equal(hold_renew(e->db, h.public_id, &RULES, &r), SD_OK);
	assert_int_equal(r.expires_at, clock_now_ms() + 10 * MIN_MS);
	assert_int_equal(r.renewals, 1);
	assert_int_equal(hold_renew(e->db, h.public_id, &RULES, &r), SD_LIMITED);
	clock_fake_advance(10 * MIN_MS);
	assert_int_equal(hold(e, ev, 1, "bo@example.org", "192.0.2.2", &h), SD_OK);
	clock_fake_advance(10 * MIN_MS);
	assert_int_equal(hold_renew(e->db, h.public_id, &RULES, &r), SD_CONFLICT);
	assert_int_equal(hold_renew(e->db, "Hnosuchholdnosuchholdnosuch", &RULES, &r),
			 SD_NOT_FOUND);
	assert_int_equal(hold_renew(e->db, "x", &RULES, &r), SD_NOT_FOUND);
}

static void test_reconcile_queued_and_one_ending_wins(void **state)
{
	const struct tu_env *e = *state;
	struct hold_view h, again;
	int64_t ev = event_priced(e, 10, "5", "EUR");
	int won = -1;

	assert_int_equal(hold(e, ev, 2, "ada@example.org", "192.0.2.1", &h), SD_OK);
	assert_int_equal(tu_countf(e->db_path, "SELECT count(*) FROM outbox WHERE kind = "
				   "'reconcile_hold' AND job_id = 'outbox:%s:reconcile' AND "
				   "delay_ms = %lld", h.public_id,
				   (long long)(10 * MIN_MS + HOLD_RECONCILE_DELAY_MS)), 1);
	assert_int_equal(hold_set_session(e->db, h.id, "cs_test_1", "https://pay.example/1",
					  &again), SD_OK);
	assert_string_equal(again.session_id, "cs_test_1");
	/* a second session never replaces the first */
	assert_int_equal(hold_set_session(e->db, h.id, "cs_test_2", "https://pay.example/2",
					  &again), SD_OK);
	assert_string_equal(again.session_id, "cs_test_1");
	assert_int_equal(hold_get_session(e->db, "cs_test_1", &again), SD_OK);
	assert_int_equal(again.id, h.id);

	assert_int_equal(db_begin(e->db), SD_OK);
	assert_int_equal(hold_settle(e->db, h.id, HOLD_EXPIRED, NULL, NULL, &won), SD_OK);
	assert_int_equal(db_commit(e->db), SD_OK);
	assert_int_equal(won, 1);
	assert_int_equal(db_begin(e->db), SD_OK);
	assert_int_equal(hold_settle(e->db, h.id, HOLD_EXPIRED, NULL, NULL, &won), SD_OK);
	assert_int_equal(db_commit(e->db), SD_OK);
	assert_int_equal(won, 0);
	/* a payment that comes late may still settle an expired hold, once */
	assert_int_equal(db_begin(e->db), SD_OK);
	assert_int_equal(hold_settle(e->db, h.id, HOLD_REFUNDED, NULL, "pi_late", &won), SD_OK);
	assert_int_equal(db_commit(e->db), SD_OK);
	assert_int_equal(won, 1);
	assert_int_equal(db_begin(e->db), SD_OK);
	assert_int_equal(hold_settle(e->db, h.id, HOLD_REFUNDED, NULL, "pi_late", &won), SD_OK);
	assert_int_equal(db_commit(e->db), SD_OK);
	assert_int_equal(won, 0);
	assert_int_equal(hold_get(e->db, h.public_id, &again), SD_OK);
	assert_int_equal(again.state, HOLD_REFUNDED);
	assert_string_equal(again.payment_ref, "pi_late");
}

/* ended unpaid holds go a while after their end; those that made an order
 * or a refund, and open ones, stay */
static void test_prune_takes_unpaid_ends_only(void **state)
{
	const struct tu_env *e = *state;
	struct hold_view a, b, c;
	int64_t ev = event_priced(e, 10, "5", "EUR"), n = -1;
	int won = 0;

	assert_int_equal(hold(e, ev, 1, "a@example.org", "192.0.2.1", &a), SD_OK);
	assert_int_equal(hold(e, ev, 1, "b@example.org", "192.0.2.2", &b), SD_OK);
	assert_int_equal(hold(e, ev, 1, "c@example.org", "192.0.2.3", &c), SD_OK);
	assert_int_equal(db_begin(e->db), SD_OK);
	assert_int_equal(hold_settle(e->db, a.id, HOLD_EXPIRED, NULL, NULL, &won), SD_OK);
	assert_int_equal(hold_settle(e->db, b.id, HOLD_REFUNDED, NULL, "pi_b", &won), SD_OK);
	assert_int_equal(db_commit(e->db), SD_OK);
	assert_int_equal(holds_prune(e->db, clock_now_ms(), 100, &n), SD_OK);
	assert_int_equal(n, 0);		/* ended just now: kept */
	clock_fake_advance(1);
	assert_int_equal(holds_prune(e->db, clock_now_ms(), 100, &n), SD_OK);
	assert_int_equal(n, 1);
	assert_int_equal(hold_get(e->db, a.public_id, &a), SD_NOT_FOUND);
	assert_int_equal(hold_get(e->db, b.public_id, &b), SD_OK);
	assert_int_equal(hold_get(e->db, c.public_id, &c), SD_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_money),
		cmocka_unit_test(test_lang),
		cmocka_unit_test_setup_teardown(test_held_seats_count_until_the_lease_runs_out,
						tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_a_hold_becomes_its_own_order_on_a_full_house,
						tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_caps_per_client_and_network_never_email, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_refusals_write_nothing, tu_setup, tu_teardown),
		cmocka_unit_test_setup_teardown(test_renewal_once_and_never_after_the_end, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_reconcile_queued_and_one_ending_wins, tu_setup,
						tu_teardown),
		cmocka_unit_test_setup_teardown(test_prune_takes_unpaid_ends_only, tu_setup,
						tu_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
