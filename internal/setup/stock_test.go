package setup

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"perfevent/internal/config"
)

// libpfmLine is one line of a testdata/stock golden: what libpfm4 4.13
// gives the C agent for a name.
type libpfmLine struct {
	name                     string
	ok                       bool
	typ                      uint32
	config, config1, config2 uint64
	bits                     uint64
	fullName                 string
}

// readStockGolden reads testdata/stock/FIXTURE.golden: the section the C
// agent chooses on that machine and libpfm4's answer for each of its lines.
func readStockGolden(t *testing.T, fixture string) (section string, lines map[string]libpfmLine) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "stock", fixture+".golden"))
	if err != nil {
		t.Fatal(err)
	}
	lines = map[string]libpfmLine{}
	for i, l := range strings.Split(string(b), "\n") {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		f := strings.Split(l, "\t")
		if f[0] == "section" {
			section = f[1]
			continue
		}
		g := libpfmLine{name: f[0], ok: f[1] == "OK"}
		if g.ok {
			if len(f) != 9 {
				t.Fatalf("%s.golden:%d: want 9 fields, have %d", fixture, i+1, len(f))
			}
			typ, _ := strconv.ParseUint(f[2], 0, 32)
			g.typ = uint32(typ)
			g.config, _ = strconv.ParseUint(f[3], 0, 64)
			g.config1, _ = strconv.ParseUint(f[4], 0, 64)
			g.config2, _ = strconv.ParseUint(f[5], 0, 64)
			g.bits = excludeBits(f[6])
			g.fullName = f[8]
		}
		lines[g.name] = g
	}
	return section, lines
}

// excludeBits reads the oracle's letters for the exclude bits.
func excludeBits(s string) uint64 {
	var b uint64
	for _, c := range s {
		switch c {
		case 'u':
			b |= unix.PerfBitExcludeUser
		case 'k':
			b |= unix.PerfBitExcludeKernel
		case 'h':
			b |= unix.PerfBitExcludeHv
		case 'i':
			b |= unix.PerfBitExcludeIdle
		case 'H':
			b |= unix.PerfBitExcludeHost
		case 'G':
			b |= unix.PerfBitExcludeGuest
		}
	}
	return b
}

// TestStockConfig runs PCP's stock perfevent.conf on each fixture machine:
// the agent must choose the section the C agent chooses there and resolve
// every line of it that libpfm4 resolves, to libpfm4's encoding. Names
// libpfm4 refuses may still resolve here (tracepoints, RAPL: on the power
// PMU), which the log line counts apart.
func TestStockConfig(t *testing.T) {
	src, err := os.ReadFile("testdata/perfevent.conf.stock")
	if err != nil {
		t.Fatal(err)
	}
	f, parseErr := config.Parse("perfevent.conf", src)
	for _, fx := range []string{"snbep", "haswell", "skylake", "icelake-sp", "zen2", "zen3", "zen4", "graviton2", "power9", "vm"} {
		t.Run(fx, func(t *testing.T) {
			wantSection, golden := readStockGolden(t, fx)
			p := Make(f, parseErr, fixture(t, fx), false)
			if p.Section == nil || !slices.Contains(p.Section.PMUs, wantSection) {
				t.Fatalf("chose %v, the C agent chooses [%s]\n%s", p.Section, wantSection, notes(p))
			}
			byLine := map[int]Counter{}
			for _, c := range p.Counters {
				byLine[c.Pos.Line] = c
			}
			var libpfmOK, same, extra, pending, local int
			for _, ev := range p.Section.Events {
				c, resolved := byLine[ev.Pos.Line]
				g, known := golden[ev.Name]
				switch {
				case strings.HasPrefix(ev.Name, "RAPL:"):
					// The C agent reads these from MSRs, not through libpfm4.
					if resolved {
						extra++
					}
				case !known:
					t.Errorf("line %d: %s is not in the golden", ev.Pos.Line, ev.Name)
				case !g.ok:
					if resolved {
						extra++
					}
				case !resolved && noEncoder(p, ev.Pos.Line):
					// A family whose encoder is not merged yet.
					libpfmOK++
					pending++
				case !resolved:
					libpfmOK++
					t.Errorf("line %d: %s: libpfm4 gives %s, we do not resolve it: %s", ev.Pos.Line, ev.Name, g.fullName, lineNote(p, ev.Pos.Line))
				default:
					libpfmOK++
					a := c.Event.Attr
					if a.Type != g.typ || a.Config != g.config || a.Ext1 != g.config1 || a.Ext2 != g.config2 || a.Bits != g.bits {
						t.Errorf("line %d: %s:\n got type %d config %#x %#x %#x bits %#x (%s)\nwant type %d config %#x %#x %#x bits %#x (libpfm4 %s)",
							ev.Pos.Line, ev.Name, a.Type, a.Config, a.Ext1, a.Ext2, a.Bits, c.Event.Source,
							g.typ, g.config, g.config1, g.config2, g.bits, g.fullName)
						continue
					}
					switch src := strings.TrimPrefix(c.Event.Source, "libpfm4 "); {
					case src == c.Event.Source:
						// The generic perf events, from this agent's own
						// table while the perf PMU has no encoder.
						local++
					case g.fullName != "-" && src != g.fullName:
						t.Errorf("line %d: %s: canonical name %s, libpfm4 gives %s", ev.Pos.Line, ev.Name, src, g.fullName)
						continue
					}
					same++
				}
			}
			t.Logf("%s: [%s] chosen; %d of the %d lines libpfm4 resolves resolve to libpfm4's encoding (%d of them from the agent's generic table), %d wait for their family's encoder; %d more that libpfm4 does not (RAPL:); %d lines in all",
				fx, wantSection, same, libpfmOK, local, pending, extra, len(p.Section.Events))
		})
	}
}

// lineNote is what the plan says of a line.
func lineNote(p *Plan, line int) string {
	var texts []string
	for _, n := range p.Notes {
		if n.Pos.Line == line {
			texts = append(texts, n.Text)
		}
	}
	return strings.Join(texts, "; ")
}

// noEncoder reports whether a line failed only because its PMU's family
// has no encoder in this build.
func noEncoder(p *Plan, line int) bool {
	return strings.Contains(lineNote(p, line), "no encoder for its family")
}
