/*
 * pfmoracle: what libpfm4 makes of event names, for comparing package pfm
 * with the library PCP's C pmdaperfevent links.
 *
 *   pfmoracle < names      one line per name read:
 *                          name OK type config config1 config2 excludes pmu fstr
 *                          name ERR reason
 *   pfmoracle -l           one line per PMU libpfm4 initialized:
 *                          name id nevents present
 *   pfmoracle -e PMU       the events libpfm4 offers on PMU, as its public
 *                          API lists them: "E name code" for an event, then
 *                          "U name code" for each of its unit masks
 *
 * Each name is encoded as the C agent does, with
 * pfm_get_os_event_encoding(name, PFM_PLM0|PFM_PLM3, PFM_OS_PERF_EVENT_EXT).
 * "excludes" spells the perf_event_attr exclude bits that are set, in the
 * order u k h i H G (user, kernel, hv, idle, host, guest), or "-". Fields
 * are separated by tabs. Only libpfm4's public API is used.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <perfmon/pfmlib_perf_event.h>

static void list_pmus(void)
{
	pfm_pmu_info_t info;
	int pmu;

	pfm_for_all_pmus(pmu) {
		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		if (pfm_get_pmu_info(pmu, &info) != PFM_SUCCESS)
			continue;
		printf("%s\t%d\t%d\t%d\n", info.name, info.pmu, info.nevents, info.is_present);
	}
}

static int list_events(const char *name)
{
	pfm_pmu_info_t info;
	pfm_event_info_t ev;
	pfm_event_attr_info_t at;
	int pmu, idx, i;

	pfm_for_all_pmus(pmu) {
		memset(&info, 0, sizeof(info));
		info.size = sizeof(info);
		if (pfm_get_pmu_info(pmu, &info) != PFM_SUCCESS || strcmp(info.name, name))
			continue;
		for (idx = info.first_event; idx != -1; idx = pfm_get_event_next(idx)) {
			memset(&ev, 0, sizeof(ev));
			ev.size = sizeof(ev);
			if (pfm_get_event_info(idx, PFM_OS_NONE, &ev) != PFM_SUCCESS)
				continue;
			printf("E\t%s\t%#llx\n", ev.name, (unsigned long long)ev.code);
			for (i = 0; i < ev.nattrs; i++) {
				memset(&at, 0, sizeof(at));
				at.size = sizeof(at);
				if (pfm_get_event_attr_info(idx, i, PFM_OS_NONE, &at) != PFM_SUCCESS ||
				    at.type != PFM_ATTR_UMASK)
					continue;
				printf("U\t%s\t%#llx\n", at.name, (unsigned long long)at.code);
			}
		}
		return 0;
	}
	fprintf(stderr, "pfmoracle: no PMU %s\n", name);
	return 1;
}

static const char *pmu_of(int idx)
{
	pfm_event_info_t ev;
	pfm_pmu_info_t pmu;

	memset(&ev, 0, sizeof(ev));
	ev.size = sizeof(ev);
	memset(&pmu, 0, sizeof(pmu));
	pmu.size = sizeof(pmu);
	if (pfm_get_event_info(idx, PFM_OS_NONE, &ev) != PFM_SUCCESS ||
	    pfm_get_pmu_info(ev.pmu, &pmu) != PFM_SUCCESS)
		return "?";
	return pmu.name;
}

static void encode(const char *name)
{
	struct perf_event_attr attr;
	pfm_perf_encode_arg_t arg;
	char *fstr = NULL;
	char excl[8], *x = excl;
	int ret;

	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.attr = &attr;
	arg.fstr = &fstr;

	ret = pfm_get_os_event_encoding(name, PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
	if (ret != PFM_SUCCESS) {
		printf("%s\tERR\t%s\n", name, pfm_strerror(ret));
		return;
	}
	if (attr.exclude_user)   *x++ = 'u';
	if (attr.exclude_kernel) *x++ = 'k';
	if (attr.exclude_hv)     *x++ = 'h';
	if (attr.exclude_idle)   *x++ = 'i';
	if (attr.exclude_host)   *x++ = 'H';
	if (attr.exclude_guest)  *x++ = 'G';
	if (x == excl)
		*x++ = '-';
	*x = '\0';
	printf("%s\tOK\t%u\t%#llx\t%#llx\t%#llx\t%s\t%s\t%s\n", name, attr.type,
	       (unsigned long long)attr.config, (unsigned long long)attr.config1,
	       (unsigned long long)attr.config2, excl, pmu_of(arg.idx), fstr ? fstr : "");
	free(fstr);
}

int main(int argc, char **argv)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int ret;

	ret = pfm_initialize();
	if (ret != PFM_SUCCESS) {
		fprintf(stderr, "pfmoracle: pfm_initialize: %s\n", pfm_strerror(ret));
		return 1;
	}
	if (argc == 2 && !strcmp(argv[1], "-l")) {
		list_pmus();
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "-e"))
		return list_events(argv[2]);
	if (argc != 1) {
		fprintf(stderr, "usage: pfmoracle [-l | -e PMU] < names\n");
		return 2;
	}
	while ((n = getline(&line, &cap, stdin)) >= 0) {
		while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
			line[--n] = '\0';
		if (n == 0)
			continue;
		encode(line);
		fflush(stdout);
	}
	free(line);
	return 0;
}
