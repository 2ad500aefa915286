/*
 * version.h: `stagedoor --version`: this program's version, the schema it
 * migrates databases to, and the libraries it runs on as linked.
 */
#ifndef SD_VERSION_H
#define SD_VERSION_H

#include <stdio.h>

/* STAGEDOOR_VERSION comes from the VERSION file, through the Makefile. */
#ifndef STAGEDOOR_VERSION
#define STAGEDOOR_VERSION "unknown"
#endif

/* version_print: the lines of --version on out; 0, or -1 when out failed. */
int version_print(FILE *out);

#endif
