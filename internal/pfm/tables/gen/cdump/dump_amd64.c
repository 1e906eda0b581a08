/* AMD tables (amd64_entry_t): K7 to Zen 6, the fam15h northbridge, the Zen 3, 5 and 6 L3 and RAPL. */
#include "dump.h"
#ifdef CONFIG_PFMLIB_ARCH_X86
#include "pfmlib_amd64_priv.h"

const char *amd64_family(pfmlib_pmu_t *p)
{
	return p->get_event_encoding[PFM_OS_PERF_EVENT_EXT] == pfm_amd64_get_perf_encoding ? "amd64" : NULL;
}

void amd64_dump(pfmlib_pmu_t *p)
{
	const amd64_entry_t *pe = p->pe;
	int i;
	unsigned j;

	for (i = 0; i < p->pme_count; i++) {
		dump_event_t e = {
			.name = pe[i].name, .desc = pe[i].desc, .code = pe[i].code,
			.flags = pe[i].flags, .modmsk = pe[i].modmsk, .ngrp = pe[i].ngrp,
		};
		out_event(&e);
		for (j = 0; j < pe[i].numasks; j++) {
			const amd64_umask_t *um = &pe[i].umasks[j];
			dump_umask_t u = {
				.name = um->uname, .desc = um->udesc, .code = um->ucode,
				.flags = um->uflags, .grpid = um->grpid,
			};
			out_umask(&u);
		}
	}
}
#else
const char *amd64_family(pfmlib_pmu_t *p) { return NULL; }
void amd64_dump(pfmlib_pmu_t *p) {}
#endif
