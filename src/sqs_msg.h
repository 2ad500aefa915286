/*
 * sqs_msg.h: one Amazon SQS message checked and digested as SQS does it,
 * apart from any wire protocol (the SQS listener's messages).
 *
 * A message is a body, a string of UTF-8, and up to SQS_MSG_ATTRS_MAX
 * attributes, a jansson object in the shape of the AWS JSON 1.0 protocol:
 *
 *     {"Name": {"DataType": "String" | "Number" | "Binary" [".label"],
 *               "StringValue": "...", "BinaryValue": "<base64>"}}
 *
 * The body and every string value may hold only the characters SQS
 * allows (#x9 | #xA | #xD | #x20-#xD7FF | #xE000-#xFFFD |
 * #x10000-#x10FFFF); the body and the attributes together count toward
 * SQS_MSG_MAX.  The digests are those a client's SDK checks: the MD5 of
 * the body's bytes (MD5OfMessageBody) and of the attributes in SQS's own
 * encoding (MD5OfMessageAttributes).  Hashing and base64 are code.h's.
 */
#ifndef SD_SQS_MSG_H
#define SD_SQS_MSG_H

#include <stddef.h>

#include <jansson.h>

#include "result.h"

#define SQS_MSG_MAX (256 * 1024)	/* body + attribute names, types and values, bytes */
#define SQS_MSG_ATTRS_MAX 10
#define SQS_ATTR_NAME_MAX 256		/* an attribute's name, characters */
#define SQS_ATTR_LABEL_MAX 256		/* a DataType's ".label", characters */
#define SQS_NUMBER_DIGITS_MAX 38	/* a Number's significant digits */
#define SQS_MD5_HEX 32

/*
 * sqs_body_valid: SD_OK for a non-empty body of valid UTF-8 whose
 * characters SQS allows: #x9 #xA #xD #x20-#xD7FF #xE000-#xFFFD
 * #x10000-#x10FFFF.  SD_INVALID naming the offset of the first bad byte
 * otherwise ("... at byte N"): the start of a character SQS does not
 * allow, or of a sequence that is not UTF-8 (overlong, a surrogate, past
 * U+10FFFF, cut short).
 */
enum sd_result sqs_body_valid(const char *body, size_t len);

/*
 * sqs_attrs_valid: the attributes checked as SQS checks them.  attrs may
 * be NULL or a JSON null (none); else an object of at most
 * SQS_MSG_ATTRS_MAX members.  Each name: 1-256 characters of
 * [A-Za-z0-9_.-], not starting with "AWS." or "Amazon." (any case), no
 * leading or trailing '.', no "..".  Each value an object whose DataType
 * is String, Number or Binary (that case), optionally followed by ".label"
 * (1-256 characters of the same alphabet).  String and Number need a
 * StringValue and no BinaryValue; a Number's is a decimal number (an
 * optional sign, digits with an optional '.', at least one digit, then an
 * optional exponent: e or E, an optional sign, digits) of at most 38
 * significant digits (leading and trailing zeros do not count).  Binary needs a BinaryValue
 * of canonical base64 (padded, no white space) and no StringValue.  No
 * value may be empty; a StringValue obeys sqs_body_valid's characters.
 * StringListValues and BinaryListValues (reserved by SQS) may only be
 * empty.  [out] *size_out (may be NULL) the bytes the attributes count
 * toward SQS_MSG_MAX: each name + DataType + value (a binary's decoded
 * length).  SD_INVALID with a message naming the attribute.
 */
enum sd_result sqs_attrs_valid(json_t *attrs, size_t *size_out);

/*
 * sqs_msg_valid: a whole message: sqs_body_valid, sqs_attrs_valid, and
 * the body and attributes together at most SQS_MSG_MAX bytes (SD_INVALID
 * saying how long it is).  [out] *size_out (may be NULL) the attributes'
 * bytes, as sqs_attrs_valid gives them: len + *size_out is the message's
 * size, for a queue whose MaximumMessageSize is below SQS_MSG_MAX.
 */
enum sd_result sqs_msg_valid(const char *body, size_t len, json_t *attrs, size_t *size_out);

/* sqs_md5_hex: the MD5 of data as 32 hex digits and a NUL (MD5OfMessageBody
 * of a body's bytes). */
void sqs_md5_hex(const void *data, size_t len, char out[SQS_MD5_HEX + 1]);

/*
 * sqs_attrs_md5: MD5OfMessageAttributes as SQS computes it.  The
 * attributes sorted by name (byte order); for each, a 4-byte big-endian
 * length and the name, the length and the DataType, then the byte 1 and
 * the length and StringValue for a String or Number type, or the byte 2
 * and the length and the decoded BinaryValue for a Binary type; the MD5 of
 * all that, in hex.  attrs must be valid (sqs_attrs_valid first): SD_INVALID
 * when it is not, SD_NOMEM.  No attributes (NULL, null, {}): out is ""
 * (SQS then sends no MD5OfMessageAttributes).
 */
enum sd_result sqs_attrs_md5(json_t *attrs, char out[SQS_MD5_HEX + 1]);

/*
 * sqs_attrs_pick: a new object with only the attributes of attrs named by
 * names, a JSON array of strings (ReceiveMessage's MessageAttributeNames):
 * "All" or ".*" means all, "prefix.*" every name starting with "prefix.",
 * any other string that exact name (case counts).  Members that are not
 * strings are passed over.  NULL names, an empty array or NULL attrs: an
 * empty object.  The values are attrs' own (shared, with a reference
 * each).  NULL when out of memory.
 */
json_t *sqs_attrs_pick(json_t *attrs, json_t *names);

#endif
