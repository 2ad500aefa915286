/*
 * event_mail.c: the words of a whole-event change's emails (event_mail.h).
 */
#define _GNU_SOURCE
#include "event_mail.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "money.h"

/* what a cancelled order is paid back, and how, in one sentence */
static void refund_words(const struct order_view *v, char *buf, size_t size)
{
	char amount[MONEY_TEXT_MAX];

	buf[0] = '\0';
	if (!v->currency[0] || v->amount_minor <= 0)
		return;
	money_plain(v->amount_minor, v->currency, amount, sizeof amount);
	if (v->payment_ref[0])
		snprintf(buf, size, "Your payment of %s %s is refunded in full to the card you paid "
			 "with: it shows on your statement within a few days.\n\n", amount,
			 v->currency);
	else if (strcmp(v->payment, "cash") == 0 || strcmp(v->payment, "card") == 0)
		snprintf(buf, size, "You paid %s %s at the box office: bring this email or your "
			 "order number there and it is paid back to you in full.\n\n", amount,
			 v->currency);
}

static int cancel_text(const struct order_view *v, const struct tickets_intent *in,
		       const char *when, char **subject, char **text)
{
	char refund[512];

	refund_words(v, refund, sizeof refund);
	if (asprintf(subject, "Cancelled: %s on %s", v->event_name, when) < 0) {
		*subject = NULL;
		return -1;
	}
	return asprintf(text, "Hello %s,\n\nwe are sorry: %s at %s on %s is cancelled%s%s.\n\n"
			"Your order %s for %d seat%s is cancelled with it, and its tickets no "
			"longer admit anyone.\n\n%sOrder %s\n", v->buyer_name, v->event_name,
			v->venue, when, in->reason && *in->reason ? ": " : "",
			in->reason && *in->reason ? in->reason : "", v->public_id, (int)v->seats,
			v->seats == 1 ? "" : "s", refund, v->public_id);
}

static int moved_text(const struct order_view *v, const struct tickets_intent *in,
		      const char *when, char **subject, char **text)
{
	char ask[1024];

	if (in->refund_link && *in->refund_link)
		snprintf(ask, sizeof ask, "If you cannot come on the new date, ask for your money "
			 "back here, before the event starts:\n%s\n\n", in->refund_link);
	else
		snprintf(ask, sizeof ask, "If you cannot come on the new date, the box office pays "
			 "your tickets back: bring this email or your order number.\n\n");
	if (asprintf(subject, "New date: %s on %s", v->event_name, when) < 0) {
		*subject = NULL;
		return -1;
	}
	return asprintf(text, "Hello %s,\n\n%s has moved.\n\nNow: %s, %s\nBefore: %s\n\n"
			"Your tickets for the new date are attached.  The tickets you have "
			"already still admit you: their codes do not change.\n\n%sOrder %s\n",
			v->buyer_name, v->event_name, when, v->venue, in->was ? in->was : "",
			ask, v->public_id);
}

static int reminder_text(const struct order_view *v, const char *when, char **subject,
			 char **text)
{
	if (asprintf(subject, "Reminder: %s on %s", v->event_name, when) < 0) {
		*subject = NULL;
		return -1;
	}
	return asprintf(text, "Hello %s,\n\na reminder: %s at %s is on %s.\n\nYour %d "
			"ticket%s came in an earlier email; show the code on each at the door.\n\n"
			"Order %s\n", v->buyer_name, v->event_name, v->venue, when, (int)v->seats,
			v->seats == 1 ? "" : "s", v->public_id);
}

enum sd_result event_mail_text(const struct order_view *v, const struct tickets_intent *in,
			       const char *when, char **subject, char **text)
{
	int n;

	*subject = *text = NULL;
	switch (in->mail) {
	case TICKETS_MAIL_EVENT_CANCEL:
		n = cancel_text(v, in, when, subject, text);
		break;
	case TICKETS_MAIL_MOVED:
		n = moved_text(v, in, when, subject, text);
		break;
	case TICKETS_MAIL_REMINDER:
		n = reminder_text(v, when, subject, text);
		break;
	default:
		return err_set(SD_INVALID, "no such event email");
	}
	if (n < 0) {
		free(*subject);
		*subject = *text = NULL;
		return err_set(SD_NOMEM, "out of memory");
	}
	return SD_OK;
}
