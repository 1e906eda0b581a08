/* POWER tables (pme_power_entry_t), and the PowerBus (torrent) one. */
#include "dump.h"
#ifdef CONFIG_PFMLIB_ARCH_POWERPC
#include "pfmlib_power_priv.h"

extern pfmlib_pmu_t torrent_support;

const char *power_family(pfmlib_pmu_t *p)
{
	int (*perf)(void *, pfmlib_event_desc_t *) = p->get_event_encoding[PFM_OS_PERF_EVENT_EXT];

	/* torrent has its own table and encoder, and borrows the perf layer */
	if (p == &torrent_support)
		return "power_torrent";
	if (perf == pfm_gen_powerpc_get_perf_encoding || perf == pfm_gen_powerpc_get_nest_perf_encoding)
		return "power";
	return NULL;
}

void power_dump(pfmlib_pmu_t *p)
{
	int i;

	if (p == &torrent_support) {
		const pme_torrent_entry_t *pe = p->pe;
		for (i = 0; i < p->pme_count; i++) {
			dump_event_t e = {
				.name = pe[i].pme_name, .desc = pe[i].pme_desc,
				.code = pe[i].pme_code, .modmsk = (unsigned)pe[i].pme_modmsk,
			};
			out_event(&e);
		}
		return;
	}
	const pme_power_entry_t *pe = p->pe;
	for (i = 0; i < p->pme_count; i++) {
		dump_event_t e = {
			.name = pe[i].pme_name, .desc = pe[i].pme_short_desc,
			.longdesc = pe[i].pme_long_desc, .code = pe[i].pme_code,
		};
		out_event(&e);
	}
}
#else
const char *power_family(pfmlib_pmu_t *p) { return NULL; }
void power_dump(pfmlib_pmu_t *p) {}
#endif
