/*
 * Intel tables (intel_x86_entry_t), read by four encoders: the core one,
 * the Nehalem/Westmere/Sandy Bridge client uncore one, the snbep_unc one
 * (server uncore, Sandy Bridge-EP to Sapphire Rapids, and Knights Landing)
 * and the RAPL one.
 */
#include "dump.h"
#ifdef CONFIG_PFMLIB_ARCH_X86
#include "pfmlib_intel_x86_priv.h"
#include "pfmlib_intel_snbep_unc_priv.h"
#include "events/intel_x86_arch_events.h"

const char *x86_family(pfmlib_pmu_t *p)
{
	int (*perf)(void *, pfmlib_event_desc_t *) = p->get_event_encoding[PFM_OS_PERF_EVENT_EXT];

	if (perf == pfm_intel_snbep_unc_get_perf_encoding)
		return "intel_uncore";
	if (perf == pfm_intel_nhm_unc_get_perf_encoding)
		return "intel_nhm_unc";
	if (perf != pfm_intel_x86_get_perf_encoding)
		return NULL;
	if (p->get_event_encoding[PFM_OS_NONE] == pfm_intel_x86_get_encoding)
		return "intel_x86";
	if (p == &intel_rapl_support)
		return "intel_rapl";
	return "intel_x86?";
}

static void entries(const intel_x86_entry_t *pe, int n)
{
	int i;
	unsigned j;

	for (i = 0; i < n; i++) {
		dump_event_t e = {
			.name = pe[i].name, .desc = pe[i].desc, .equiv = pe[i].equiv,
			.code = pe[i].code, .cntmsk = pe[i].cntmsk, .flags = pe[i].flags,
			.modmsk = pe[i].modmsk, .modmsk_req = pe[i].modmsk_req,
			.ngrp = pe[i].ngrp, .model = pe[i].model,
		};
		out_event(&e);
		for (j = 0; j < pe[i].numasks; j++) {
			const intel_x86_umask_t *um = &pe[i].umasks[j];
			dump_umask_t u = {
				.name = um->uname, .desc = um->udesc, .equiv = um->uequiv,
				.code = um->ucode, .cntmsk = um->ucntmsk,
				.filter0 = um->ufilters[0], .filter1 = um->ufilters[1],
				.flags = um->uflags, .model = um->umodel, .grpid = um->grpid,
				.modhw = um->modhw, .modmsk_req = um->umodmsk_req,
			};
			out_umask(&u);
		}
	}
}

void x86_dump(pfmlib_pmu_t *p)
{
	/*
	 * ix86arch builds its table at initialization from CPUID leaf 0xa:
	 * the architected events the CPU has, with modifiers by PMU version.
	 * The catalog keeps the whole static table it starts from.
	 */
	if (p == &intel_x86_arch_support) {
		entries(intel_x86_arch_pe, LIBPFM_ARRAY_SIZE(intel_x86_arch_pe));
		return;
	}
	entries(p->pe, p->pme_count);
}

/*
 * RAPL's detection swaps in one of several tables by CPU model. Probe every
 * model of family 6 and dump each table once, with the models that pick it.
 */
void x86_variants(pfmlib_pmu_t *p, void (*variant)(pfmlib_pmu_t *p, const int *models))
{
	const void *seen[8];
	int nseen = 0, m, i, k;
	const void *pe0 = p->pe;
	int count0 = p->pme_count;

	if (p != &intel_rapl_support)
		return;
	for (;;) {
		const void *pick = NULL;
		int models[257], n = 0;

		for (m = 1; m < 256; m++) {
			pfm_intel_x86_cfg.family = 6;
			pfm_intel_x86_cfg.model = m;
			p->pe = pe0;
			p->pme_count = count0;
			if (p->pmu_detect(p) != PFM_SUCCESS)
				continue;
			for (k = 0; k < nseen && seen[k] != p->pe; k++)
				;
			if (k < nseen)
				continue;
			if (!pick)
				pick = p->pe;
			if (p->pe == pick)
				models[n++] = m;
		}
		if (!pick)
			break;
		models[n] = 0;
		seen[nseen++] = pick;
		p->pe = pick;
		for (m = 1; m < 256; m++) {
			pfm_intel_x86_cfg.model = m;
			p->pe = pe0;
			p->pme_count = count0;
			if (p->pmu_detect(p) == PFM_SUCCESS && p->pe == pick)
				break;
		}
		variant(p, models);
		if (nseen == (int)(sizeof(seen)/sizeof(seen[0])))
			break;
	}
	(void)i;
	p->pe = pe0;
	p->pme_count = count0;
	memset(&pfm_intel_x86_cfg, 0, sizeof(pfm_intel_x86_cfg));
}
#else
const char *x86_family(pfmlib_pmu_t *p) { return NULL; }
void x86_dump(pfmlib_pmu_t *p) {}
void x86_variants(pfmlib_pmu_t *p, void (*variant)(pfmlib_pmu_t *p, const int *models)) {}
#endif
