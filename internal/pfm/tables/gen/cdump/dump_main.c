/*
 * The walk over libpfm4's PMU list. pfmlib_pmus[] is private to
 * pfmlib_common.c, so this file is that file plus a main: the generator
 * links it in place of the library's own pfmlib_common.o. The library is
 * never initialized, so every table is as compiled, untouched by detection
 * on the machine that runs the dump.
 */
#include "pfmlib_common.c"
#include "dump.h"

void out_str(const char *s)
{
	if (!s)
		return;
	for (; *s; s++) {
		switch (*s) {
		case '\\': fputs("\\\\", stdout); break;
		case '\t': fputs("\\t", stdout); break;
		case '\n': fputs("\\n", stdout); break;
		case '\r': fputs("\\r", stdout); break;
		default: putchar(*s);
		}
	}
}

void out_tab(void) { putchar('\t'); }
void out_nl(void) { putchar('\n'); }
void out_hex(uint64_t v) { printf("%#" PRIx64, v); }
void out_dec(long long v) { printf("%lld", v); }

void out_event(const dump_event_t *e)
{
	fputs("E\t", stdout);
	out_str(e->name); out_tab();
	out_hex(e->code); out_tab();
	out_hex(e->cntmsk); out_tab();
	out_hex(e->flags); out_tab();
	out_hex(e->modmsk); out_tab();
	out_hex(e->modmsk_req); out_tab();
	out_dec(e->ngrp); out_tab();
	out_dec(e->model); out_tab();
	out_dec(e->type); out_tab();
	out_str(e->equiv); out_tab();
	out_str(e->desc); out_tab();
	out_str(e->longdesc); out_nl();
}

void out_umask(const dump_umask_t *u)
{
	fputs("U\t", stdout);
	out_str(u->name); out_tab();
	out_hex(u->code); out_tab();
	out_hex(u->cntmsk); out_tab();
	out_hex(u->filter0); out_tab();
	out_hex(u->filter1); out_tab();
	out_hex(u->flags); out_tab();
	out_dec(u->model); out_tab();
	out_dec(u->grpid); out_tab();
	out_hex(u->modhw); out_tab();
	out_hex(u->modmsk_req); out_tab();
	out_str(u->equiv); out_tab();
	out_str(u->desc); out_nl();
}

static const char *attr_type(pfm_attr_t t)
{
	switch (t) {
	case PFM_ATTR_NONE: return "none";
	case PFM_ATTR_UMASK: return "umask";
	case PFM_ATTR_MOD_BOOL: return "bool";
	case PFM_ATTR_MOD_INTEGER: return "int";
	case PFM_ATTR_RAW_UMASK: return "raw_umask";
	default: return "?";
	}
}

static const char *pmu_type(pfm_pmu_type_t t)
{
	switch (t) {
	case PFM_PMU_TYPE_CORE: return "core";
	case PFM_PMU_TYPE_UNCORE: return "uncore";
	case PFM_PMU_TYPE_OS_GENERIC: return "os_generic";
	default: return "unknown";
	}
}

static const char *family(pfmlib_pmu_t *p)
{
	const char *f;

	if ((f = x86_family(p)) || (f = amd64_family(p)) || (f = netburst_family(p)) ||
	    (f = arm_family(p)) || (f = power_family(p)) || (f = perf_family(p)))
		return f;
	return "unknown";
}

static void models(const int *m)
{
	int first = 1;

	for (; m && *m; m++) {
		if (!first)
			putchar(',');
		printf("%d", *m);
		first = 0;
	}
}

static int order;

static void header(pfmlib_pmu_t *p, const int *variant_models)
{
	fputs(variant_models ? "V\t" : "P\t", stdout);
	out_dec(order); out_tab();
	out_dec(p->pmu); out_tab();
	out_str(p->name); out_tab();
	out_str(family(p)); out_tab();
	out_str(pmu_type(p->type)); out_tab();
	out_str(p->perf_name); out_tab();
	out_hex((unsigned)p->flags); out_tab();
	out_dec(p->pmu_rev); out_tab();
	out_dec(p->num_cntrs); out_tab();
	out_dec(p->num_fixed_cntrs); out_tab();
	out_hex((unsigned)p->supported_plm); out_tab();
	out_dec(p->max_encoding); out_tab();
	out_dec(p->cpu_family); out_tab();
	models(variant_models ? variant_models : p->cpu_models); out_tab();
	out_dec(p->pme_count); out_tab();
	out_str(p->desc); out_nl();
}

static void mods(pfmlib_pmu_t *p)
{
	const pfmlib_attr_desc_t *a;
	int i = 0;

	for (a = p->atdesc; a && a->name; a++, i++) {
		fputs("M\t", stdout);
		out_dec(i); out_tab();
		out_str(a->name); out_tab();
		out_str(attr_type(a->type)); out_tab();
		out_str(a->desc); out_nl();
	}
}

static void table(pfmlib_pmu_t *p)
{
	mods(p);
	if (x86_family(p))
		x86_dump(p);
	else if (amd64_family(p))
		amd64_dump(p);
	else if (netburst_family(p))
		netburst_dump(p);
	else if (arm_family(p))
		arm_dump(p);
	else if (power_family(p))
		power_dump(p);
	else if (perf_family(p))
		perf_dump(p);
}

static void variant(pfmlib_pmu_t *p, const int *m)
{
	header(p, m);
	table(p);
}

int main(void)
{
	fputs("#P\torder\tid\tname\tfamily\ttype\tperf_name\tflags\trev\tnum_cntrs\tnum_fixed\tsupported_plm\tmax_encoding\tcpu_family\tcpu_models\tnevents\tdesc\n", stdout);
	fputs("#V\t(a P record: a variant table of the PMU before it, for the CPU models listed)\n", stdout);
	fputs("#M\tindex\tname\ttype\tdesc\n", stdout);
	fputs("#E\tname\tcode\tcntmsk\tflags\tmodmsk\tmodmsk_req\tngrp\tmodel\ttype\tequiv\tdesc\tlongdesc\n", stdout);
	fputs("#U\tname\tcode\tcntmsk\tfilter0\tfilter1\tflags\tmodel\tgrpid\tmodhw\tmodmsk_req\tequiv\tdesc\n", stdout);
	for (order = 0; order < PFMLIB_NUM_PMUS; order++) {
		pfmlib_pmu_t *p = pfmlib_pmus[order];

		header(p, NULL);
		table(p);
		if (x86_family(p))
			x86_variants(p, variant);
	}
	return 0;
}
