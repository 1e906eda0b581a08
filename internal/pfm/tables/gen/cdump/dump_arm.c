/* ARM tables (arm_entry_t): the core PMUs, and the ThunderX2 and Kunpeng uncore ones. */
#include "dump.h"
#if defined(CONFIG_PFMLIB_ARCH_ARM) || defined(CONFIG_PFMLIB_ARCH_ARM64)
#include "pfmlib_arm_priv.h"

const char *arm_family(pfmlib_pmu_t *p)
{
	if (p->get_event_encoding[PFM_OS_PERF_EVENT_EXT] == pfm_arm_get_perf_encoding)
		return "arm";
	/* the uncore encoders are private to their files; their PMUs are named by kind */
	if (p->get_event_encoding[PFM_OS_NONE] == pfm_arm_get_encoding)
		return NULL;
	if (!strncmp(p->name, "hisi_", 5))
		return "arm_kunpeng_unc";
	if (!strncmp(p->name, "tx2_", 4))
		return "arm_tx2_unc";
	return NULL;
}

void arm_dump(pfmlib_pmu_t *p)
{
	const arm_entry_t *pe = p->pe;
	int i;

	for (i = 0; i < p->pme_count; i++) {
		dump_event_t e = {
			.name = pe[i].name, .desc = pe[i].desc, .equiv = pe[i].equiv,
			.code = pe[i].code, .modmsk = pe[i].modmsk,
		};
		out_event(&e);
	}
}
#else
const char *arm_family(pfmlib_pmu_t *p) { return NULL; }
void arm_dump(pfmlib_pmu_t *p) {}
#endif
