package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// libpfmKnows reads models out of C shaped like libpfm4's detect code.
func TestLibpfmKnows(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"pfmlib_intel_spr.c":         "static const int spr_models[] = {\n\t143, /* SapphireRapid */\n\t0\n};\nstatic const int emr_models[] = {\n\t207, /* EmeraldRapid */\n\t0\n};\n",
		"pfmlib_intel_adl.c":         "static const int adl_glc_models[] = {\n\t0x97, /* Alderlake */\n\t0xb7, /* Raptorlake */\n\t0\n};\n",
		"pfmlib_intel_snbep_unc.c":   "int\npfm_intel_spr_unc_detect(void *this)\n{\n\tswitch(pfm_intel_x86_cfg.model) {\n\t\tcase 143: /* SapphireRapids */\n\t\tcase 207: /* EmeraldRapids */\n\t\t\tbreak;\n\t}\n}\n",
		"pfmlib_intel_spr_unc_imc.c": "",
		"pfmlib_intel_spr_unc_cha.c": "",
		"pfmlib_arm_armv8.c":         "\tarm_cpuid_t attr = { .impl = 0x41, .arch = 8, .part = 0xd0c };\n\tarm_cpuid_t attr = { .impl = 0x42, .arch = 8, .part = 0x516 };\n\tattr.impl = 0x43;\n",
	}
	for n, text := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	k, err := libpfmKnows(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []int{143, 207, 0x97, 0xb7} {
		if !k.intelCore[m] {
			t.Errorf("model %#x not known", m)
		}
	}
	if k.intelCore[0] || len(k.intelCore) != 4 {
		t.Errorf("core models %v", k.intelCore)
	}
	for _, m := range []int{143, 207} {
		if u := k.intelUnc[m]; !slices.Equal(u, []string{"cha", "imc"}) {
			t.Errorf("model %d: uncore units %v, want cha imc", m, u)
		}
	}
	for _, p := range [][2]int{{0x41, 0xd0c}, {0x42, 0x516}, {0x43, 0x516}} {
		if !k.armParts[p] {
			t.Errorf("Arm %#x:%#x not known", p[0], p[1])
		}
	}
}

func TestIntelTerms(t *testing.T) {
	for _, c := range []struct {
		e    intelEvent
		want string
	}{
		{intelEvent{EventCode: "0x00", UMask: "0x01"}, "event=0x0,umask=0x1"},
		{intelEvent{EventCode: "0x2A,0x2B", UMask: "0x01", MSRIndex: "0x1a6,0x1a7", MSRValue: "0x10001"}, "event=0x2a,umask=0x1,offcore_rsp=0x10001"},
		{intelEvent{EventCode: "0xcd", UMask: "0x01", MSRIndex: "0x3F6", MSRValue: "0x80"}, "event=0xcd,umask=0x1,ldlat=0x80"},
		{intelEvent{EventCode: "0xc6", UMask: "0x03", MSRIndex: "0x3F7", MSRValue: "0x11"}, "event=0xc6,umask=0x3,frontend=0x11"},
		{intelEvent{EventCode: "0xa3", UMask: "0x06", CounterMask: "6", Invert: "1", EdgeDetect: "1"}, "event=0xa3,umask=0x6,cmask=0x6,inv=0x1,edge=0x1"},
		{intelEvent{EventCode: "0x35", UMask: "0x01", UMaskExt: "0x00C807FD", MSRIndex: "0x00"}, "event=0x35,umask=0x1,umask_ext=0xc807fd"},
		{intelEvent{EventCode: "0x83", UMask: "0x04", PortMask: "0x01", FCMask: "0x07"}, "event=0x83,umask=0x4,ch_mask=0x1,fc_mask=0x7"},
		// An MSR the kernel has no term for: left out, not counted wrong.
		{intelEvent{EventCode: "0xd1", UMask: "0x01", MSRIndex: "0x3E0,0x3E1", MSRValue: "0x3"}, ""},
	} {
		if got := intelTerms("test.json", c.e); got != c.want {
			t.Errorf("%+v: %q, want %q", c.e, got, c.want)
		}
	}
}

func TestNames(t *testing.T) {
	for in, want := range map[string]string{"UPI LL": "upi", "iMC": "imc", "HAC_ARB": "hac_arb", "CHA": "cha"} {
		if got := kernelUnit(in); got != want {
			t.Errorf("kernelUnit(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]string{"Cortex-A78": "arm_ac78", "Cortex-X1C": "arm_x1c", "Neoverse V3AE": "arm_v3ae", "Neoverse E1": "arm_e1"} {
		if got := armPMUName(in); got != want {
			t.Errorf("armPMUName(%q) = %q, want %q", in, got, want)
		}
	}
}

// cpuids lists the CPUID strings of mapfile.csv's patterns, literal or
// not, and refuses a pattern that matches without bound.
func TestCPUIDs(t *testing.T) {
	for _, c := range []struct{ pattern, want string }{
		{"GenuineIntel-6-AF", "GenuineIntel-6-AF"},
		{"GenuineIntel-6-55-[01234]", "GenuineIntel-6-55-0 GenuineIntel-6-55-1 GenuineIntel-6-55-2 GenuineIntel-6-55-3 GenuineIntel-6-55-4"},
		{"GenuineIntel-6-(97|9A)(-[0-2])?", "GenuineIntel-6-97 GenuineIntel-6-97-0 GenuineIntel-6-97-1 GenuineIntel-6-97-2 GenuineIntel-6-9A GenuineIntel-6-9A-0 GenuineIntel-6-9A-1 GenuineIntel-6-9A-2"},
		{"GenuineIntel-6-(2C|2C)", "GenuineIntel-6-2C"},
		{"GenuineIntel-6-5[5-6]-[5-9A-F]", "GenuineIntel-6-55-5 GenuineIntel-6-55-6 GenuineIntel-6-55-7 GenuineIntel-6-55-8 GenuineIntel-6-55-9 GenuineIntel-6-55-A GenuineIntel-6-55-B GenuineIntel-6-55-C GenuineIntel-6-55-D GenuineIntel-6-55-E GenuineIntel-6-55-F " +
			"GenuineIntel-6-56-5 GenuineIntel-6-56-6 GenuineIntel-6-56-7 GenuineIntel-6-56-8 GenuineIntel-6-56-9 GenuineIntel-6-56-A GenuineIntel-6-56-B GenuineIntel-6-56-C GenuineIntel-6-56-D GenuineIntel-6-56-E GenuineIntel-6-56-F"},
	} {
		got, err := cpuids(c.pattern)
		if err != nil || strings.Join(got, " ") != c.want {
			t.Errorf("cpuids(%q) = %q, %v; want %q", c.pattern, got, err, c.want)
		}
	}
	for _, p := range []string{"GenuineIntel-6-55-.*", "GenuineIntel-6-55-[0-9]+", "(?i)genuineintel-6-55", "GenuineIntel-6-55-.", "GenuineIntel-6-[0-9A-F][0-9A-F]-[0-9A-F]", "GenuineIntel-6-55("} {
		if got, err := cpuids(p); err == nil {
			t.Errorf("cpuids(%q) = %q, want an error", p, got)
		}
	}
}
