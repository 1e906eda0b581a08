/*
 * tabledump: prints every PMU table that a libpfm4 build carries, as the
 * line-oriented text that internal/pfm/tables holds. It is compiled inside a
 * copy of a libpfm4 source tree's lib/ directory, with that directory's own
 * flags, so that each family file sees the same private headers and
 * configuration the library itself was built with.
 *
 * Records, one per line, fields separated by tabs (strings escaped: \\ \t \n \r):
 *   P  a PMU header (see dump_main.c for its columns)
 *   M  a modifier of the PMU's attribute table, by position
 *   E  an event
 *   U  a unit mask of the event before it
 *   V  a variant table of the PMU before it, chosen by CPU model at detection
 */
#ifndef TABLEDUMP_H
#define TABLEDUMP_H

#include <stdio.h>
#include <stdint.h>
#include "pfmlib_priv.h"

void out_str(const char *s);	/* escaped, NULL as "" */
void out_tab(void);
void out_nl(void);
void out_hex(uint64_t v);
void out_dec(long long v);

/* One E or U record; unused fields are zero or NULL. */
typedef struct {
	const char *name, *desc, *longdesc, *equiv;
	uint64_t code, cntmsk;
	unsigned flags, modmsk, modmsk_req, ngrp, model, type;
} dump_event_t;

typedef struct {
	const char *name, *desc, *equiv;
	uint64_t code, cntmsk, filter0, filter1;
	unsigned flags, model, grpid, modhw, modmsk_req;
} dump_umask_t;

void out_event(const dump_event_t *e);
void out_umask(const dump_umask_t *u);

/*
 * Family hooks: each returns its family's name for a PMU it owns (NULL
 * otherwise) and dumps that PMU's events.
 */
const char *x86_family(pfmlib_pmu_t *p);
void x86_dump(pfmlib_pmu_t *p);
void x86_variants(pfmlib_pmu_t *p, void (*header)(pfmlib_pmu_t *p, const int *models));
const char *amd64_family(pfmlib_pmu_t *p);
void amd64_dump(pfmlib_pmu_t *p);
const char *netburst_family(pfmlib_pmu_t *p);
void netburst_dump(pfmlib_pmu_t *p);
const char *arm_family(pfmlib_pmu_t *p);
void arm_dump(pfmlib_pmu_t *p);
const char *power_family(pfmlib_pmu_t *p);
void power_dump(pfmlib_pmu_t *p);
const char *perf_family(pfmlib_pmu_t *p);
void perf_dump(pfmlib_pmu_t *p);

#endif
