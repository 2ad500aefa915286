/*
 * help_gen.c: `stagedoor help`, and what it makes from the command tree's
 * tables: stagedoor(1), stagedoor.conf(5) and the bash completion.
 */
#define _POSIX_C_SOURCE 200809L

#include "help.h"

#include <string.h>

#include "args.h"
#include "config.h"

/* ---- roff ------------------------------------------------------------------ */

/* roff: s as roff text: backslashes, minus signs and a leading dot or quote
 * escaped (options are "\-\-db", as man-pages(7) asks) */
static void roff(FILE *f, const char *s)
{
	int bol = 1;

	for (; *s; s++) {
		if (bol && (*s == '.' || *s == '\''))
			fputs("\\&", f);
		bol = *s == '\n';
		if (*s == '\\')
			fputs("\\e", f);
		else if (*s == '-')
			fputs("\\-", f);
		else
			fputc(*s, f);
	}
}

static int is_file_metavar(const char *m)
{
	return m && (strstr(m, "PATH") || strstr(m, "FILE") || strstr(m, "DIR"));
}

static void man_opt(FILE *f, const struct arg_opt *o)
{
	fputs(".TP\n.BR \"", f);
	roff(f, "--");
	roff(f, o->name);
	fputs("\"", f);
	if (o->type != ARG_FLAG) {
		fputs(" \" \" \"", f);
		roff(f, o->metavar ? o->metavar : o->type == ARG_INT ? "N" : "VALUE");
		fputs("\"", f);
	}
	fputs("\n", f);
	roff(f, o->help ? o->help : "");
	fputs("\n", f);
}

/* man_visit: one command's section of stagedoor(1) */
static void man_visit(const struct cli_cmd *const *path, int depth,
		      const struct help_leaf_desc *leaf, void *arg)
{
	FILE *f = arg;
	int i, settings = 0;

	if (!leaf)
		return;
	fputs(".SS \"stagedoor", f);
	for (i = 0; i < depth; i++) {
		fputc(' ', f);
		roff(f, path[i]->name);
	}
	fputs("\"\n.nf\n.B stagedoor ", f);
	roff(f, leaf->usage);
	fputs("\n.fi\n.PP\n", f);
	roff(f, path[depth - 1]->summary);
	fputs(".\n", f);
	for (i = 0; i < leaf->nopts; i++) {
		if (leaf->opts[i].setting)
			settings++;
		else
			man_opt(f, &leaf->opts[i]);
	}
	if (settings)
		fputs(".TP\n.BI \\-\\- KEY \" VALUE\"\n"
		      "Every setting of\n.BR stagedoor.conf (5),\n"
		      "its name with dashes for underscores (\\-\\-mail\\-url).\n", f);
}

static const char man1_head[] =
	".SH NAME\nstagedoor \\- ticket jobs on one SQLite database, exactly once in effect\n"
	".SH SYNOPSIS\n.B stagedoor\n.I COMMAND\n[\\fIoptions\\fR]\n.br\n"
	".B stagedoor help\n.I COMMAND\n[\\fISUBCOMMAND\\fR]\n.br\n"
	".B stagedoor \\-\\-version\n"
	".SH DESCRIPTION\n"
	"Stagedoor Box runs a ticket seller's background jobs: each order's tickets are\n"
	"rendered into a PDF, emailed to the buyer and counted, through a durable job\n"
	"stream with leases and fencing, a transactional outbox and supervised workers,\n"
	"on one SQLite database in WAL mode (or on PostgreSQL, for several boxes and a\n"
	"standby).  Every job is delivered at least once; the handlers make a second run\n"
	"harmless, so a buyer never gets two emails and a sale is never counted twice,\n"
	"however often a worker is killed.\n"
	".PP\n"
	".B stagedoor run\n"
	"is the appliance (the systemd unit starts it); the other commands set a box up,\n"
	"sell and change orders, admit tickets, and look after the box.\n"
	"Every command answers\n.B \\-\\-help\n"
	"from the table it parses its options with.\n"
	".SH COMMANDS\n";

static const char man1_tail[] =
	".SH ENVIRONMENT\n"
	".TP\n.B STAGEDOOR_CONFIG\nthe configuration file (default /etc/stagedoor/stagedoor.conf "
	"when it exists)\n"
	".TP\n.B STAGEDOOR_DB\nthe database, when no \\-\\-db is given\n"
	".TP\n.B STAGEDOOR_\\fIKEY\\fP\nany setting of\n.BR stagedoor.conf (5)\n"
	"(STAGEDOOR_MAIL_URL); a flag wins over it, it wins over the file\n"
	".TP\n.B CREDENTIALS_DIRECTORY\nsystemd's credentials: mail_password and http_tls_key "
	"are read from it when their settings are not given\n"
	".SH FILES\n"
	".TP\n.I /etc/stagedoor/stagedoor.conf\nthe settings\n"
	".TP\n.I /var/lib/stagedoor/\nthe state folder: the database, ticket.key, api.token, "
	"blobs/ (PDFs), maildir/, tls/; readable by the box's user only\n"
	".SH EXIT STATUS\n"
	"0 done; 1 failed (the message says why); 2 bad usage or input, or sold out;\n"
	"3 a conflict (an admitted ticket, an order already changed) or a ticket already\n"
	"scanned; 4 an invalid ticket; 5 a cancelled ticket.\n"
	".SH SEE ALSO\n.BR stagedoor.conf (5),\n.BR systemctl (1),\n.BR sqlite3 (1)\n";

static int man1(const struct cli_cmd *root, FILE *f, const char *version, const char *date,
		char *err, size_t errsize)
{
	fprintf(f, ".TH STAGEDOOR 1 \"%s\" \"stagedoor %s\" \"Stagedoor Box\"\n", date, version);
	fputs(man1_head, f);
	if (help_walk(root, man_visit, f, err, errsize) != 0)
		return -1;
	fputs(man1_tail, f);
	return 0;
}

static void man5_key(FILE *f, enum config_key k)
{
	const char *def = config_key_default(k);

	fputs(".TP\n.BR \"", f);
	roff(f, config_key_name(k));
	fputs(" = \" \"", f);
	roff(f, config_key_metavar(k));
	fputs("\"\n", f);
	roff(f, config_key_doc(k));
	fputs(".\n", f);
	if (def) {
		fputs("Default: ", f);
		roff(f, def);
		fputs(".\n", f);
	}
	if (config_key_live(k))
		fputs("SIGHUP applies a new value at once.\n", f);
}

static int man5(FILE *f, const char *version, const char *date)
{
	int k;

	fprintf(f, ".TH STAGEDOOR.CONF 5 \"%s\" \"stagedoor %s\" \"Stagedoor Box\"\n", date,
		version);
	fputs(".SH NAME\nstagedoor.conf \\- the settings of Stagedoor Box\n"
	      ".SH SYNOPSIS\n.I /etc/stagedoor/stagedoor.conf\n"
	      ".SH DESCRIPTION\n"
	      "One setting a line, \\fIkey\\fP = \\fIvalue\\fP; blank lines and lines that\n"
	      "start with # are ignored.  Each key can also be given as \\-\\-\\fIkey\\fP on the\n"
	      "command line (dashes for underscores) or as STAGEDOOR_\\fIKEY\\fP in the\n"
	      "environment: a flag wins over the environment, which wins over the file, which\n"
	      "wins over the default.\n.B stagedoor config show\n"
	      "prints every setting in force and where it came from.  A password is never a\n"
	      "setting: mail_password_file names a file (mode 0600), or systemd's\n"
	      "LoadCredential= hands it over.\n"
	      ".PP\n"
	      "On SIGHUP (\\fBsystemctl reload stagedoor\\fP) the box reads the file again:\n"
	      "the keys marked below apply at once, the others by restarting the workers one\n"
	      "at a time; a file with a mistake changes nothing and says why.\n"
	      ".SH KEYS\n", f);
	for (k = 0; k < CONFIG_N_KEYS; k++)
		man5_key(f, (enum config_key)k);
	fputs(".SH SEE ALSO\n.BR stagedoor (1)\n", f);
	return 0;
}

int help_man(const struct cli_cmd *root, FILE *out, int section, const char *version,
	     const char *date, char *err, size_t errsize)
{
	if (section == 1)
		return man1(root, out, version, date, err, errsize);
	if (section == 5)
		return man5(out, version, date);
	snprintf(err, errsize, "--man takes 1 (stagedoor) or 5 (stagedoor.conf), not %d",
		 section);
	return -1;
}

/* ---- bash completion -------------------------------------------------------- */

/* comp_visit: one arm of _stagedoor_words: a command's subcommands, and its
 * flags as --flag (no value), --flag:f (a file), --flag:d (a folder) or
 * --flag:v (any other value) */
static void comp_visit(const struct cli_cmd *const *path, int depth,
		       const struct help_leaf_desc *leaf, void *arg)
{
	const struct cli_cmd *c = path[depth - 1], *s;
	FILE *f = arg;
	int i;

	fputs("\t\"", f);
	for (i = 0; i < depth; i++)
		fprintf(f, "%s%s", i ? " " : "", path[i]->name);
	fputs("\") echo \"", f);
	for (s = c->subs; s && s->name; s++)
		if (!s->hidden)
			fprintf(f, "%s ", s->name);
	for (i = 0; leaf && i < leaf->nopts; i++) {
		const struct arg_opt *o = &leaf->opts[i];

		fprintf(f, "--%s%s ", o->name, o->type == ARG_FLAG ? ""
			: !is_file_metavar(o->metavar) ? ":v"
			: strstr(o->metavar, "DIR") ? ":d" : ":f");
	}
	fputs("--help\" ;;\n", f);
}

static const char comp_body[] =
	"\t*) ;;\n\tesac\n}\n\n"
	"_stagedoor()\n{\n"
	"\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
	"\tlocal path= words list t w i\n"
	"\tCOMPREPLY=()\n"
	"\tfor ((i = 1; i < COMP_CWORD; i++)); do\n"
	"\t\tw=${COMP_WORDS[i]}\n"
	"\t\twords=\" $(_stagedoor_words \"$path\") \"\n"
	"\t\tif [[ $w == --* ]]; then\n"
	"\t\t\t[[ $w != *=* && $words == *\" $w:\"* ]] && ((i++))\n"
	"\t\telif [[ $words == *\" $w \"* ]]; then\n"
	"\t\t\tpath=${path:+$path }$w\n"
	"\t\tfi\n"
	"\tdone\n"
	"\twords=\" $(_stagedoor_words \"$path\") \"\n"
	"\tif [[ $prev == --* && $cur != -* ]]; then\n"
	"\t\tcase $words in\n"
	"\t\t*\" $prev:f \"*) compopt -o filenames 2>/dev/null\n"
	"\t\t\tCOMPREPLY=($(compgen -f -- \"$cur\")); return ;;\n"
	"\t\t*\" $prev:d \"*) compopt -o filenames 2>/dev/null\n"
	"\t\t\tCOMPREPLY=($(compgen -d -- \"$cur\")); return ;;\n"
	"\t\t*\" $prev:v \"*) return ;;\n"
	"\t\tesac\n"
	"\tfi\n"
	"\tfor t in $words; do\n"
	"\t\tif [[ $cur == -* ]]; then\n"
	"\t\t\t[[ $t == --* ]] && list+=\" ${t%%:*}\"\n"
	"\t\telse\n"
	"\t\t\t[[ $t != --* ]] && list+=\" $t\"\n"
	"\t\tfi\n"
	"\tdone\n"
	"\tif [[ -n $list ]]; then\n"
	"\t\tCOMPREPLY=($(compgen -W \"$list\" -- \"$cur\"))\n"
	"\telif [[ $cur != -* ]]; then\n"
	"\t\tcompopt -o filenames 2>/dev/null\n"
	"\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
	"\tfi\n"
	"}\n"
	"complete -F _stagedoor stagedoor\n";

int help_completion(const struct cli_cmd *root, FILE *out, char *err, size_t errsize)
{
	const struct cli_cmd *s;

	fputs("# bash completion for stagedoor(1): commands, subcommands and flags.\n"
	      "# Made by `stagedoor help --completion bash` from the tables the commands\n"
	      "# parse their options with.\n\n"
	      "# _stagedoor_words PATH: PATH's subcommands and flags (FLAG:f a file,\n"
	      "# FLAG:d a folder, FLAG:v another value)\n"
	      "_stagedoor_words()\n{\n\tcase $1 in\n\t\"\") echo \"", out);
	for (s = root->subs; s->name; s++)
		if (!s->hidden)
			fprintf(out, "%s ", s->name);
	fputs("--help --version\" ;;\n", out);
	if (help_walk(root, comp_visit, out, err, errsize) != 0)
		return -1;
	fputs(comp_body, out);
	return 0;
}
