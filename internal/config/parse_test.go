package config

import (
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

const name = "perfevent.conf"

func at(line int) Pos { return Pos{File: name, Line: line} }

func mustParse(t *testing.T, src string) *File {
	t.Helper()
	f, err := Parse(name, []byte(src))
	if err != nil {
		t.Fatalf("Parse: unexpected errors:\n%v", err)
	}
	return f
}

func TestParseConstructs(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []*Section
	}{{
		name: "comments blank lines and CRLF",
		src:  "# top\r\n\r\n[perf] # generic\r\n  cycles # all CPUs\r\n\tinstructions\r\n",
		want: []*Section{{Pos: at(3), Kind: PMUSection, PMUs: []string{"perf"}, Events: []Event{
			{Pos: at(4), Name: "cycles"},
			{Pos: at(5), Name: "instructions"},
		}}},
	}, {
		name: "byte order mark",
		src:  "\ufeff[perf]\ncycles",
		want: []*Section{{Pos: at(1), Kind: PMUSection, PMUs: []string{"perf"}, Events: []Event{
			{Pos: at(2), Name: "cycles"},
		}}},
	}, {
		name: "several PMU names, quoted and comma separated",
		src:  "[nhm_ex nhm,\t\"odd name\" \"a,b\",c]\nINSTRUCTION_RETIRED",
		want: []*Section{{Pos: at(1), Kind: PMUSection, PMUs: []string{"nhm_ex", "nhm", "odd name", "a,b", "c"},
			Events: []Event{{Pos: at(2), Name: "INSTRUCTION_RETIRED"}}}},
	}, {
		name: "CPU options keep file order",
		src: "[perf]\nz cpu\ny cpu_rr\nx node\nw node_rr\nv 3\nu 0\n" +
			"snbep_unc_imc0::UNC_M_CAS_COUNT:RD node\nperf::PAGE-FAULTS:u",
		want: []*Section{{Pos: at(1), Kind: PMUSection, PMUs: []string{"perf"}, Events: []Event{
			{Pos: at(2), Name: "z", CPU: CPUOption{Kind: CPUAll}},
			{Pos: at(3), Name: "y", CPU: CPUOption{Kind: CPURoundRobin}},
			{Pos: at(4), Name: "x", CPU: CPUOption{Kind: CPUNode}},
			{Pos: at(5), Name: "w", CPU: CPUOption{Kind: CPUNodeRoundRobin}},
			{Pos: at(6), Name: "v", CPU: CPUOption{Kind: CPUIndex, Index: 3}},
			{Pos: at(7), Name: "u", CPU: CPUOption{Kind: CPUIndex, Index: 0}},
			{Pos: at(8), Name: "snbep_unc_imc0::UNC_M_CAS_COUNT:RD", CPU: CPUOption{Kind: CPUNode}},
			{Pos: at(9), Name: "perf::PAGE-FAULTS:u"},
		}}},
	}, {
		name: "raw events",
		src:  "[perf]\nRAW:l1d_miss rawcode=0x1c2 1\nRAW:BIG rawcode=0XFFFFFFFFFFFFFFFF",
		want: []*Section{{Pos: at(1), Kind: PMUSection, PMUs: []string{"perf"}, Events: []Event{
			{Pos: at(2), Name: "RAW:l1d_miss", CPU: CPUOption{Kind: CPUIndex, Index: 1}, RawCode: 0x1c2, HasRawCode: true},
			{Pos: at(3), Name: "RAW:BIG", RawCode: 1<<64 - 1, HasRawCode: true},
		}}},
	}, {
		name: "dynamic with hv_24x7 and hv_gpci parameters",
		src: "[dynamic]\nmsr.tsc\nsoftware.page-faults 1\n" +
			"hv_24x7.PM_PB_CYC\tchip:1\n" +
			"hv_24x7.CPM_ADJUNCT_INST core:2 domain:6 lpar:3\n" +
			"hv_gpci.DISPATCH phys_processor_idx:4 partition_id:5 hw_chip_id:6 sibling_part_id:7\n",
		want: []*Section{{Pos: at(1), Kind: DynamicSection, Events: []Event{
			{Pos: at(2), Name: "msr.tsc"},
			{Pos: at(3), Name: "software.page-faults", CPU: CPUOption{Kind: CPUIndex, Index: 1}},
			{Pos: at(4), Name: "hv_24x7.PM_PB_CYC", Params: []Param{{"chip", 1}}},
			{Pos: at(5), Name: "hv_24x7.CPM_ADJUNCT_INST", Params: []Param{{"core", 2}, {"domain", 6}, {"lpar", 3}}},
			{Pos: at(6), Name: "hv_gpci.DISPATCH", Params: []Param{
				{"phys_processor_idx", 4}, {"partition_id", 5}, {"hw_chip_id", 6}, {"sibling_part_id", 7}}},
		}}},
	}, {
		name: "every dynamic section is kept",
		src:  "[dynamic]\nmsr.tsc\n[perf]\ncycles\n[dynamic]\nmsr.aperf\n",
		want: []*Section{
			{Pos: at(1), Kind: DynamicSection, Events: []Event{{Pos: at(2), Name: "msr.tsc"}}},
			{Pos: at(3), Kind: PMUSection, PMUs: []string{"perf"}, Events: []Event{{Pos: at(4), Name: "cycles"}}},
			{Pos: at(5), Kind: DynamicSection, Events: []Event{{Pos: at(6), Name: "msr.aperf"}}},
		},
	}, {
		name: "empty dynamic section is harmless",
		src:  "[dynamic]\n",
		want: []*Section{{Pos: at(1), Kind: DynamicSection}},
	}, {
		name: "derived with scales and alternative groups, after dynamic",
		src: "[dynamic]\nmsr.tsc\n" +
			"[bandwidth:derived]\n" +
			"imc0::CAS_RD node perf_scale\n" +
			"imc0::CAS_WR node 0.5\n" +
			"  ||  # second choice\n" +
			"a .25\nb 5.\nc 1e-6\nd 2.5E+3 cpu\n" +
			"||\n" +
			"e\n",
		want: []*Section{
			{Pos: at(1), Kind: DynamicSection, Events: []Event{{Pos: at(2), Name: "msr.tsc"}}},
			{Pos: at(3), Kind: DerivedSection, Name: "bandwidth", Groups: []Group{
				{Pos: at(4), Terms: []Term{
					{Pos: at(4), Event: "imc0::CAS_RD", CPU: CPUOption{Kind: CPUNode}, Scale: 1, PerfScale: true},
					{Pos: at(5), Event: "imc0::CAS_WR", CPU: CPUOption{Kind: CPUNode}, Scale: 0.5},
				}},
				{Pos: at(7), Terms: []Term{
					{Pos: at(7), Event: "a", Scale: 0.25},
					{Pos: at(8), Event: "b", Scale: 5},
					{Pos: at(9), Event: "c", Scale: 1e-6},
					{Pos: at(10), Event: "d", CPU: CPUOption{Kind: CPUAll}, Scale: 2500},
				}},
				{Pos: at(12), Terms: []Term{{Pos: at(12), Event: "e", Scale: 1}}},
			}},
		},
	}, {
		name: "same event in two groups and two sections",
		src:  "[x:derived]\na\n||\na\n[hsw]\na\n[perf]\na\n",
		want: []*Section{
			{Pos: at(1), Kind: DerivedSection, Name: "x", Groups: []Group{
				{Pos: at(2), Terms: []Term{{Pos: at(2), Event: "a", Scale: 1}}},
				{Pos: at(4), Terms: []Term{{Pos: at(4), Event: "a", Scale: 1}}},
			}},
			{Pos: at(5), Kind: PMUSection, PMUs: []string{"hsw"}, Events: []Event{{Pos: at(6), Name: "a"}}},
			{Pos: at(7), Kind: PMUSection, PMUs: []string{"perf"}, Events: []Event{{Pos: at(8), Name: "a"}}},
		},
	}, {
		name: "hash inside a word is part of it",
		src:  "[a#b]\nev#1\n",
		want: []*Section{{Pos: at(1), Kind: PMUSection, PMUs: []string{"a#b"}, Events: []Event{{Pos: at(2), Name: "ev#1"}}}},
	}, {
		name: "hash right after an option or separator starts a comment",
		src:  "[perf]#x\ncycles cpu_rr#x y\n[d:derived]\na 0.5#x\n||#x\nb\n",
		want: []*Section{
			{Pos: at(1), Kind: PMUSection, PMUs: []string{"perf"}, Events: []Event{{Pos: at(2), Name: "cycles", CPU: CPUOption{Kind: CPURoundRobin}}}},
			{Pos: at(3), Kind: DerivedSection, Name: "d", Groups: []Group{
				{Pos: at(4), Terms: []Term{{Pos: at(4), Event: "a", Scale: 0.5}}},
				{Pos: at(6), Terms: []Term{{Pos: at(6), Event: "b", Scale: 1}}},
			}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := mustParse(t, tc.src)
			if f.Path != name {
				t.Errorf("Path = %q, want %q", f.Path, name)
			}
			if !reflect.DeepEqual(f.Sections, tc.want) {
				t.Errorf("sections:\n got %s\nwant %s", dump(f.Sections), dump(tc.want))
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		errs []string
		// kept is the dump of what survives, when it matters.
		kept string
	}{{
		name: "event before any section",
		src:  "cycles\n[perf]\ninstructions",
		errs: []string{`perfevent.conf:1: event "cycles" is outside any section; put a header such as [perf] above it`},
		kept: "[perf]@2{instructions@3}",
	}, {
		name: "separator before any section",
		src:  "||\n",
		errs: []string{`perfevent.conf:1: || separates alternative groups and belongs in a [NAME:derived] section`},
	}, {
		name: "unterminated header",
		src:  "[hsw\ncycles\n[perf]\ncycles",
		errs: []string{
			`perfevent.conf:1: section header has no closing ]; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
		kept: "[perf]@3{cycles@4}",
	}, {
		name: "lines under a bad header are still checked",
		src:  "[hsw\ncycles cpux\n",
		errs: []string{
			`perfevent.conf:1: section header has no closing ]; the section is ignored`,
			`perfevent.conf:2: unknown option "cpux" for event "cycles"; expected cpu, cpu_rr, node, node_rr, a CPU index, or rawcode=0x… on a RAW: event`,
		},
	}, {
		name: "unterminated quote",
		src:  "[\"hsw]\ncycles",
		errs: []string{
			`perfevent.conf:1: unterminated quote in section header; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "empty header",
		src:  "[ ]\ncycles",
		errs: []string{
			`perfevent.conf:1: empty section header; name a PMU, dynamic, or NAME:derived; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "empty quoted name",
		src:  "[hsw \"\"]\ncycles",
		errs: []string{
			`perfevent.conf:1: empty name "" in section header; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "text after header",
		src:  "[perf] cycles\ncycles",
		errs: []string{
			`perfevent.conf:1: unexpected "cycles" after the ] of a section header; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "dynamic mixed with PMU names",
		src:  "[dynamic hsw]\nmsr.tsc",
		errs: []string{
			`perfevent.conf:1: [dynamic] must stand alone in its header, found 2 names; the section is ignored`,
			`perfevent.conf:2: "msr.tsc" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "two derived names",
		src:  "[a:derived b:derived]\ncycles",
		errs: []string{
			`perfevent.conf:1: a derived section header names one metric, found 2 names; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "derived without a name",
		src:  "[:derived]\ncycles",
		errs: []string{
			`perfevent.conf:1: derived section needs a name before :derived, e.g. [ipc:derived]; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "derived name with colon",
		src:  "[a:b:derived]\ncycles",
		errs: []string{
			`perfevent.conf:1: derived name "a:b" must not contain ':'; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "derived name with a blank",
		src:  "[\"my ipc:derived\"]\ncycles",
		errs: []string{
			`perfevent.conf:1: derived name "my ipc" may hold only letters, digits and punctuation; the section is ignored`,
			`perfevent.conf:2: "cycles" is under the broken section header at line 1, so it is ignored too`,
		},
	}, {
		name: "duplicate derived name",
		src:  "[x:derived]\na\n[x:derived]\nb\n",
		errs: []string{
			`perfevent.conf:3: derived metric "x" is already defined at line 1; the section is ignored`,
			`perfevent.conf:4: "b" is under the broken section header at line 3, so it is ignored too`,
		},
		kept: "[x:derived]@1{(a@2)}",
	}, {
		name: "PMU section without events is dropped",
		src:  "[hsw]\n# nothing\n[perf]\ncycles",
		errs: []string{`perfevent.conf:1: [hsw] has no events; the section is ignored`},
		kept: "[perf]@3{cycles@4}",
	}, {
		name: "PMU section whose events are all bad is dropped",
		src:  "[hsw]\ncycles bogus\n[perf]\ncycles",
		errs: []string{
			`perfevent.conf:1: [hsw] has no usable events (each line has an error); the section is ignored`,
			`perfevent.conf:2: unknown option "bogus" for event "cycles"; expected cpu, cpu_rr, node, node_rr, a CPU index, or rawcode=0x… on a RAW: event`,
		},
		kept: "[perf]@3{cycles@4}",
	}, {
		name: "derived without members",
		src:  "[x:derived]\n[perf]\ncycles",
		errs: []string{`perfevent.conf:1: [x:derived] has no members; the section is ignored`},
		kept: "[perf]@2{cycles@3}",
	}, {
		name: "derived whose only group is bad",
		src:  "[x:derived]\na\nb rawcode=0x1\n",
		errs: []string{
			`perfevent.conf:1: [x:derived] has no usable group (each has a bad member); the section is ignored`,
			`perfevent.conf:3: rawcode= belongs to RAW:<name> events in a PMU section, not to "b"; dropping the group that starts at line 2`,
		},
	}, {
		name: "a bad member drops its group only",
		src:  "[x:derived]\na\nb 1.0 2.0\n||\nc\n",
		errs: []string{`perfevent.conf:3: event "b" has two scales, 1.0 and 2.0; give one; dropping the group that starts at line 2`},
		kept: "[x:derived]@1{(c@5)}",
	}, {
		name: "separator outside derived",
		src:  "[perf]\ncycles\n||\ninstructions",
		errs: []string{`perfevent.conf:3: || separates alternative groups and belongs in a [NAME:derived] section`},
		kept: "[perf]@1{cycles@2 instructions@4}",
	}, {
		name: "separator before the first member",
		src:  "[x:derived]\n||\na",
		errs: []string{`perfevent.conf:2: || before any member of [x:derived]; it goes between groups of members`},
		kept: "[x:derived]@1{(a@3)}",
	}, {
		name: "empty group between separators",
		src:  "[x:derived]\na\n||\n||\nb",
		errs: []string{`perfevent.conf:4: empty alternative group: no members since the || at line 3`},
		kept: "[x:derived]@1{(a@2)(b@5)}",
	}, {
		name: "trailing separator",
		src:  "[x:derived]\na\n||\n# end\n[perf]\na",
		errs: []string{`perfevent.conf:3: || ends [x:derived] with no members after it`},
		kept: "[x:derived]@1{(a@2)} [perf]@5{a@6}",
	}, {
		name: "separator with company",
		src:  "[x:derived]\na\n|| b\n",
		errs: []string{`perfevent.conf:3: || must stand alone on its line, found "b" after it`},
	}, {
		name: "separator as an option",
		src:  "[x:derived]\na ||\n",
		errs: []string{
			`perfevent.conf:1: [x:derived] has no usable group (each has a bad member); the section is ignored`,
			`perfevent.conf:2: || must stand alone on its line; dropping the group that starts at line 2`,
		},
	}, {
		name: "duplicate event in a section",
		src:  "[perf]\ncycles\ninstructions\ncycles 1",
		errs: []string{`perfevent.conf:4: event "cycles" is already listed at line 2`},
		kept: "[perf]@1{cycles@2 instructions@3}",
	}, {
		name: "duplicate dynamic event across sections",
		src:  "[dynamic]\nmsr.tsc\n[dynamic]\nmsr.tsc 1",
		errs: []string{`perfevent.conf:4: event "msr.tsc" is already listed at line 2`},
		kept: "[dynamic]@1{msr.tsc@2} [dynamic]@3{}",
	}, {
		name: "duplicate member in a group",
		src:  "[x:derived]\na\na 2.0\n||\nb",
		errs: []string{`perfevent.conf:3: member "a" is already in this group at line 2; dropping the group that starts at line 2`},
		kept: "[x:derived]@1{(b@5)}",
	}, {
		name: "unknown options name what each section accepts",
		src:  "[perf]\ncycles cpux\n[dynamic]\nmsr.tsc socket:1\n[x:derived]\ncycles -1\n",
		errs: []string{
			`perfevent.conf:1: [perf] has no usable events (each line has an error); the section is ignored`,
			`perfevent.conf:2: unknown option "cpux" for event "cycles"; expected cpu, cpu_rr, node, node_rr, a CPU index, or rawcode=0x… on a RAW: event`,
			`perfevent.conf:4: unknown option "socket:1" for event "msr.tsc"; expected cpu, cpu_rr, node, node_rr, a CPU index, or an hv_24x7/hv_gpci parameter such as chip:0`,
			`perfevent.conf:5: [x:derived] has no usable group (each has a bad member); the section is ignored`,
			`perfevent.conf:6: unknown option "-1" for event "cycles"; expected cpu, cpu_rr, node, node_rr, a CPU index, a scale such as 0.000001, or perf_scale; dropping the group that starts at line 6`,
		},
		kept: "[dynamic]@3{}",
	}, {
		name: "two CPU options",
		src:  "[perf]\ncycles cpu 1\ninstructions",
		errs: []string{`perfevent.conf:2: event "cycles" has two CPU options, cpu and 1; give one`},
		kept: "[perf]@1{instructions@3}",
	}, {
		name: "CPU index too large",
		src:  "[perf]\ncycles 99999999999\ninstructions",
		errs: []string{`perfevent.conf:2: CPU index 99999999999 for event "cycles" is too large`},
	}, {
		name: "event names",
		src:  "[perf]\n1cycles\n.x\ncycl\x00es\ncaf\xc3\xa9\ninstructions",
		errs: []string{
			`perfevent.conf:2: event name "1cycles" must start with a letter`,
			`perfevent.conf:3: event name ".x" must start with a letter`,
			`perfevent.conf:4: event name "cycl\x00es" contains '\x00'; names hold letters, digits and punctuation`,
			`perfevent.conf:5: event name "café" contains 'Ã'; names hold letters, digits and punctuation`,
		},
		kept: "[perf]@1{instructions@6}",
	}, {
		name: "scale outside derived",
		src:  "[perf]\ncycles 0.5\ninstructions perf_scale\n[dynamic]\nmsr.tsc 1e-6",
		errs: []string{
			`perfevent.conf:1: [perf] has no usable events (each line has an error); the section is ignored`,
			`perfevent.conf:2: scale 0.5 for event "cycles" is only meaningful in a [NAME:derived] section`,
			`perfevent.conf:3: scale perf_scale for event "instructions" is only meaningful in a [NAME:derived] section`,
			`perfevent.conf:5: scale 1e-6 for event "msr.tsc" is only meaningful in a [NAME:derived] section`,
		},
		kept: "[dynamic]@4{}",
	}, {
		name: "two scales and an infinite one",
		src:  "[x:derived]\na perf_scale 0.5\n||\nb 1e999\n||\nc\n",
		errs: []string{
			`perfevent.conf:2: event "a" has two scales, perf_scale and 0.5; give one; dropping the group that starts at line 2`,
			`perfevent.conf:4: scale 1e999 for event "b" is out of range; dropping the group that starts at line 4`,
		},
		kept: "[x:derived]@1{(c@6)}",
	}, {
		name: "rawcode problems",
		src: "[perf]\nRAW:a rawcode=123\nRAW:b rawcode=0xZZ\nRAW:c rawcode=0x\nRAW:d rawcode=0x10000000000000000\n" +
			"RAW:e\nRAW:\ncycles rawcode=0x1\nRAW:f rawcode=0x1 rawcode=0x2\nRAW:g rawcode=0x+1\nRAW:ok rawcode=0x2\n" +
			"[dynamic]\nRAW:h rawcode=0x1\n",
		errs: []string{
			`perfevent.conf:2: rawcode=123 is not a hexadecimal code; write it like rawcode=0x1c2`,
			`perfevent.conf:3: rawcode=0xZZ is not a hexadecimal code; write it like rawcode=0x1c2`,
			`perfevent.conf:4: rawcode=0x is not a hexadecimal code; write it like rawcode=0x1c2`,
			`perfevent.conf:5: rawcode=0x10000000000000000 does not fit in 64 bits`,
			`perfevent.conf:6: raw event "RAW:e" needs rawcode=0x…, the event code for this CPU`,
			`perfevent.conf:7: RAW: needs a name after it, e.g. RAW:my_event rawcode=0x1c2`,
			`perfevent.conf:8: rawcode= belongs to RAW:<name> events in a PMU section, not to "cycles"`,
			`perfevent.conf:9: event "RAW:f" has two rawcode= options`,
			`perfevent.conf:10: rawcode=0x+1 is not a hexadecimal code; write it like rawcode=0x1c2`,
			`perfevent.conf:13: rawcode= belongs to RAW:<name> events in a PMU section, not to "RAW:h"`,
		},
		kept: "[perf]@1{RAW:ok@11/raw=2} [dynamic]@12{}",
	}, {
		name: "parameter problems",
		src: "[dynamic]\nhv_24x7.a domain:0\nhv_24x7.b domain:7\nhv_24x7.c chip:\nhv_24x7.d chip:x\n" +
			"hv_24x7.e chip:1 chip:2\nhv_24x7.f core:99999999999\n[perf]\ncycles chip:1\n[x:derived]\nb lpar:1\n",
		errs: []string{
			`perfevent.conf:2: domain:0 is out of range; hv_24x7 domains are 1 to 6`,
			`perfevent.conf:3: domain:7 is out of range; hv_24x7 domains are 1 to 6`,
			`perfevent.conf:4: chip: needs a decimal number, e.g. chip:0`,
			`perfevent.conf:5: chip:x needs a decimal number, e.g. chip:0`,
			`perfevent.conf:6: event "hv_24x7.e" has chip: twice`,
			`perfevent.conf:7: core:99999999999 is too large`,
			`perfevent.conf:8: [perf] has no usable events (each line has an error); the section is ignored`,
			`perfevent.conf:9: chip:1 applies only to hv_24x7 and hv_gpci events in [dynamic], not to "cycles"`,
			`perfevent.conf:10: [x:derived] has no usable group (each has a bad member); the section is ignored`,
			`perfevent.conf:11: lpar:1 applies only to hv_24x7 and hv_gpci events in [dynamic], not to "b"; dropping the group that starts at line 11`,
		},
		kept: "[dynamic]@1{}",
	}, {
		name: "dynamic names need a PMU",
		src:  "[dynamic]\ntsc\n.tsc\nmsr.\nmsr.tsc",
		errs: []string{
			`perfevent.conf:2: dynamic event "tsc" must be written <pmu>.<event>, e.g. msr.tsc`,
			`perfevent.conf:3: event name ".tsc" must start with a letter`,
			`perfevent.conf:4: dynamic event "msr." must be written <pmu>.<event>, e.g. msr.tsc`,
		},
		kept: "[dynamic]@1{msr.tsc@5}",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f, err := Parse(name, []byte(tc.src))
			if f == nil {
				t.Fatal("Parse returned a nil File")
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %v (%T) is not an ErrorList", err, err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tc.errs) {
				t.Errorf("errors:\n got %q\nwant %q", got, tc.errs)
			}
			if err.Error() != strings.Join(tc.errs, "\n") {
				t.Errorf("Error() = %q", err.Error())
			}
			if tc.kept != "" {
				if k := dump(f.Sections); k != tc.kept {
					t.Errorf("kept %s, want %s", k, tc.kept)
				}
			}
		})
	}
}

func TestErrorListUnwrap(t *testing.T) {
	_, err := Parse("x.conf", []byte("cycles\n"))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("errors.As(%v, *Error) failed", err)
	}
	if e.Pos != (Pos{File: "x.conf", Line: 1}) {
		t.Errorf("Pos = %v", e.Pos)
	}
	if ErrorList(nil).Err() != nil {
		t.Error("empty ErrorList.Err() is not nil")
	}
	if got := (Pos{Line: 4}).String(); got != "line 4" {
		t.Errorf("Pos without a file = %q", got)
	}
}

func TestParseFile(t *testing.T) {
	f, err := ParseFile("testdata/vm.conf")
	if err != nil {
		t.Fatal(err)
	}
	if f.Path != "testdata/vm.conf" || len(f.Sections) == 0 {
		t.Errorf("ParseFile: Path %q, %d sections", f.Path, len(f.Sections))
	}
	if f.Sections[0].Events[0].Pos.File != "testdata/vm.conf" {
		t.Errorf("event position %v does not name the file", f.Sections[0].Events[0].Pos)
	}
	if _, err := ParseFile("testdata/no-such.conf"); err == nil || !strings.Contains(err.Error(), "no-such.conf") {
		t.Errorf("missing file: err = %v", err)
	}
}

func TestAccessors(t *testing.T) {
	f := mustParse(t, "[dynamic]\nmsr.tsc\n[a:derived]\nx\n[hsw]\nx\n[dynamic]\nmsr.aperf chip:3\n[b:derived]\ny\n[perf]\nz\n")
	if got := dump(f.PMUSections()); got != "[hsw]@5{x@6} [perf]@11{z@12}" {
		t.Errorf("PMUSections = %s", got)
	}
	if got := dump(f.DerivedSections()); got != "[a:derived]@3{(x@4)} [b:derived]@9{(y@10)}" {
		t.Errorf("DerivedSections = %s", got)
	}
	dyn := f.DynamicEvents()
	if len(dyn) != 2 || dyn[0].Name != "msr.tsc" || dyn[1].Name != "msr.aperf" {
		t.Fatalf("DynamicEvents = %+v", dyn)
	}
	if v, ok := dyn[1].Param("chip"); !ok || v != 3 {
		t.Errorf("Param(chip) = %d, %v", v, ok)
	}
	if _, ok := dyn[1].Param("core"); ok {
		t.Error("Param(core) found on an event without it")
	}
	if s := (Param{"domain", 2}).String(); s != "domain:2" {
		t.Errorf("Param.String = %q", s)
	}
}

func TestHeaderAndOptionStrings(t *testing.T) {
	for _, tc := range []struct {
		s    Section
		want string
	}{
		{Section{Kind: PMUSection, PMUs: []string{"nhm_ex", "nhm"}}, "[nhm_ex nhm]"},
		{Section{Kind: PMUSection, PMUs: []string{"odd name", "a,b"}}, `["odd name" "a,b"]`},
		{Section{Kind: DynamicSection}, "[dynamic]"},
		{Section{Kind: DerivedSection, Name: "ipc"}, "[ipc:derived]"},
	} {
		if got := tc.s.Header(); got != tc.want {
			t.Errorf("Header() = %s, want %s", got, tc.want)
		}
	}
	for opt, want := range map[CPUOption]string{
		{}:                         "",
		{Kind: CPUAll}:             "cpu",
		{Kind: CPURoundRobin}:      "cpu_rr",
		{Kind: CPUNode}:            "node",
		{Kind: CPUNodeRoundRobin}:  "node_rr",
		{Kind: CPUIndex, Index: 7}: "7",
		{Kind: 42}:                 "CPUKind(42)",
	} {
		if got := opt.String(); got != want {
			t.Errorf("%#v.String() = %q, want %q", opt, got, want)
		}
	}
	for k, want := range map[SectionKind]string{PMUSection: "PMU", DynamicSection: "dynamic", DerivedSection: "derived", 9: "SectionKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("SectionKind %d = %q, want %q", int(k), got, want)
		}
	}
}

// dump renders sections compactly for comparisons: events as name@line with
// options, derived groups in parentheses.
func dump(secs []*Section) string {
	var b strings.Builder
	for i, s := range secs {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(s.Header())
		b.WriteString("@" + itoa(s.Pos.Line) + "{")
		for j, e := range s.Events {
			if j > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(e.Name + "@" + itoa(e.Pos.Line))
			if o := e.CPU.String(); o != "" {
				b.WriteString("/" + o)
			}
			if e.HasRawCode {
				b.WriteString("/raw=" + itoa(int(e.RawCode)))
			}
			for _, p := range e.Params {
				b.WriteString("/" + p.String())
			}
		}
		for _, g := range s.Groups {
			b.WriteByte('(')
			for j, m := range g.Terms {
				if j > 0 {
					b.WriteByte(' ')
				}
				b.WriteString(m.Event + "@" + itoa(m.Pos.Line))
				if o := m.CPU.String(); o != "" {
					b.WriteString("/" + o)
				}
				if m.PerfScale {
					b.WriteString("/perf_scale")
				} else if m.Scale != 1 {
					b.WriteString("/x" + ftoa(m.Scale))
				}
			}
			b.WriteByte(')')
		}
		b.WriteByte('}')
	}
	return b.String()
}

func itoa(n int) string     { return strconv.Itoa(n) }
func ftoa(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
