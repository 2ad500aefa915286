/*
 * event_mail.h: the words of the emails a whole-event change sends each
 * buyer: its cancellation (and what is paid back, and how), its move (the
 * start and venue before and after, and how to ask for a refund), and the
 * reminder before it starts.  Text only: which run sends them, and under
 * which key, is the handlers' (event_jobs.h) and tickets.h's.
 */
#ifndef SD_EVENT_MAIL_H
#define SD_EVENT_MAIL_H

#include "result.h"
#include "tickets.h"

/* event_mail_text: [out] *subject and *text (free()) of the intent's email
 * (TICKETS_MAIL_EVENT_CANCEL, _MOVED, _REMINDER) to v's buyer; when: v's
 * start as the venue writes it. */
enum sd_result event_mail_text(const struct order_view *v, const struct tickets_intent *in,
			       const char *when, char **subject, char **text);

#endif
