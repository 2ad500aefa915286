/*
 * jobkinds.h: the job kinds an order's life queues, by name, in one place.
 * A kind names an intent ("order N's tickets are rendered and queued to
 * send"); the handler that reaches it and the technique that makes its
 * second run harmless are in ticket_jobs.c, shop_jobs.c and event_jobs.c.
 * The names are stored in the outbox, the stream and the done history:
 * never rename one.
 */
#ifndef SD_JOBKINDS_H
#define SD_JOBKINDS_H

#define JOB_KIND_RENDER "render_tickets"	/* check state: tickets.pdf_key */
#define JOB_KIND_SEND "send_tickets"		/* unique claim + provider key */
#define JOB_KIND_COUNT "update_sales_counter"	/* processed_jobs */
#define JOB_KIND_CANCEL "cancel_order"		/* processed_jobs + unique claim + key */
#define JOB_KIND_RECONCILE "reconcile_hold"	/* check state: holds.state, conditional end */
#define JOB_KIND_REFUND "refund_payment"	/* unique claim + provider key */
#define JOB_KIND_REFUND_MAIL "send_refund_notice" /* unique claim + provider key */
#define JOB_KIND_PAYFAIL_MAIL "send_payment_failed" /* unique claim + provider key */
/* a whole event at once (event_jobs.h) */
#define JOB_KIND_EVENT_RUN "event_run"			/* check state: the run's cursor */
#define JOB_KIND_EVENT_CANCEL_ORDER "cancel_event_order" /* conditional steps + claim + key */
#define JOB_KIND_EVENT_MOVE_ORDER "move_event_order"	/* check state: the PDF's version */
#define JOB_KIND_EVENT_NOTICE "send_event_notice"	/* unique claim + provider key */
#define JOB_KIND_REMINDER "send_reminder"		/* check state + claim + key */

#endif
