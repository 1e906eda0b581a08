/*
 * libpfm4's perf_events pseudo-PMUs. The perf table is private to its file
 * and only installed by initialization (which also appends the tracepoints
 * of the machine it runs on), so this file is that file plus a reader of
 * its static table: the generator links it in place of the library's own
 * pfmlib_perf_event_pmu.o.
 */
#include "pfmlib_perf_event_pmu.c"
#include "dump.h"

const char *perf_family(pfmlib_pmu_t *p)
{
	if (p == &perf_event_support)
		return "perf";
	if (p->get_event_encoding[PFM_OS_PERF_EVENT_EXT] && !strcmp(p->name, "perf_raw"))
		return "perf";
	return NULL;
}

/* the catalog's flag for events that exist only if the kernel lists them */
#define DUMP_PERF_FL_OPTIONAL 0x10000

static void dump_umasks(const perf_event_t *pe)
{
	int j;

	for (j = 0; j < pe->numasks && j < PERF_MAX_UMASKS; j++) {
		const perf_umask_t *um = &pe->umasks[j];
		dump_umask_t u = {
			.name = um->uname, .desc = um->udesc, .code = um->uid,
			.flags = um->uflags, .grpid = um->grpid,
		};
		out_umask(&u);
	}
}

void perf_dump(pfmlib_pmu_t *p)
{
	size_t i;

	if (p != &perf_event_support) {
		/* perf_raw: one event with no table, described by its callbacks */
		int idx;
		for (idx = p->get_event_first(p); idx != -1; idx = p->get_event_next(p, idx)) {
			pfm_event_info_t info;
			memset(&info, 0, sizeof(info));
			info.size = sizeof(info);
			if (p->get_event_info(p, idx, &info) != PFM_SUCCESS)
				continue;
			dump_event_t e = { .name = info.name, .desc = info.desc, .equiv = info.equiv, .code = info.code };
			out_event(&e);
		}
		return;
	}
	for (i = 0; i < PME_PERF_EVENT_COUNT; i++) {
		const perf_event_t *pe = &perf_static_events[i];
		dump_event_t e = {
			.name = pe->name, .desc = pe->desc, .equiv = pe->equiv, .code = pe->id,
			.flags = pe->flags, .modmsk = pe->modmsk, .ngrp = pe->ngrp, .type = pe->type,
		};
		out_event(&e);
		dump_umasks(pe);
	}
	/*
	 * Initialization appends these when the kernel's core PMU lists them
	 * (/sys/devices/cpu/events/NAME): flagged so, as the catalog's own flag.
	 */
	for (i = 0; i < PME_PERF_EVENT_OPT_COUNT; i++) {
		const perf_event_t *pe = &perf_optional_events[i];
		dump_event_t e = {
			.name = pe->name, .desc = pe->desc, .equiv = pe->equiv, .code = pe->id,
			.flags = pe->flags | DUMP_PERF_FL_OPTIONAL, .modmsk = pe->modmsk,
			.ngrp = pe->ngrp, .type = pe->type,
		};
		out_event(&e);
		dump_umasks(pe);
	}
}
