/*
 * Pentium 4 tables (netburst_entry_t), which have no counterpart among the
 * other families. Catalogued with this mapping: Code is event_select, CntMask
 * escr_select, Flags the perf_event P4 event code, ModMask and ModMaskReq the
 * two allowed ESCRs; a unit mask's Code is its bit.
 */
#include "dump.h"
#ifdef CONFIG_PFMLIB_ARCH_X86
#include "pfmlib_intel_netburst_priv.h"

const char *netburst_family(pfmlib_pmu_t *p)
{
	return p->get_event_encoding[PFM_OS_PERF_EVENT_EXT] == pfm_netburst_get_perf_encoding ? "netburst" : NULL;
}

void netburst_dump(pfmlib_pmu_t *p)
{
	const netburst_entry_t *pe = p->pe;
	int i, j;

	for (i = 0; i < p->pme_count; i++) {
		dump_event_t e = {
			.name = pe[i].name, .desc = pe[i].desc, .code = pe[i].event_select,
			.cntmsk = pe[i].escr_select, .flags = pe[i].perf_code,
			.modmsk = (unsigned)pe[i].allowed_escrs[0],
			.modmsk_req = (unsigned)pe[i].allowed_escrs[1],
		};
		out_event(&e);
		for (j = 0; j < EVENT_MASK_BITS; j++) {
			const netburst_event_mask_t *um = &pe[i].event_masks[j];
			if (!um->name)
				continue;
			dump_umask_t u = {
				.name = um->name, .desc = um->desc, .code = um->bit, .flags = um->flags,
			};
			out_umask(&u);
		}
	}
}
#else
const char *netburst_family(pfmlib_pmu_t *p) { return NULL; }
void netburst_dump(pfmlib_pmu_t *p) {}
#endif
