// Package config reads perfevent.conf, the file that tells the perfevent
// agent which performance counters to open.
//
// # Grammar
//
// The file is line oriented. A '#' that begins a word, or that follows an
// option, ']' or "||", starts a comment that runs to the end of the line
// ("ev#1" is an event name, as in the C agent). Blank lines are ignored. Every other line is a
// section header, an event line, or the "||" group separator.
//
// A section header is a '[' (leading blanks allowed), a list of names, and a
// ']'. Names are separated by blanks; a name may be quoted ("like this") to
// hold blanks. There are three kinds of section:
//
//	[hsw snb]          a PMU section: the events to use on a machine with a
//	                   PMU called hsw or snb. Only the first PMU section that
//	                   names a PMU of this machine is used (see
//	                   File.ChoosePMUSection).
//	[dynamic]          events named <pmu>.<event> after the kernel's
//	                   /sys/bus/event_source/devices/<pmu>/events/<event>.
//	                   Always used.
//	[ipc:derived]      a derived metric: the sum of other events, each
//	                   multiplied by a scale. Always used.
//
// An event line starts with the event name (a letter, then letters, digits
// and punctuation) followed by options, separated by blanks:
//
//	cpu                count on every online CPU (the default)
//	cpu_rr             count on one CPU, the next one round-robin per event
//	node               count on the first CPU of each NUMA node
//	node_rr            count on one CPU of each NUMA node, the next one
//	                   per event
//	N                  count on the N-th online CPU (an index into the
//	                   online list, not a CPU id, as in the C agent)
//	rawcode=0xHEX      the raw event code of a RAW:<name> event
//	chip:N domain:N core:N lpar:N phys_processor_idx:N partition_id:N
//	hw_chip_id:N sibling_part_id:N
//	                   parameters of hv_24x7 and hv_gpci events ([dynamic])
//	0.000001 or 1e-6   the scale of a derived member
//	perf_scale         take a derived member's scale from the kernel's
//	                   events/<event>.scale file
//
// In a derived section each line names one member. A line holding only "||"
// ends one alternative group and starts the next; the first group whose
// members are all available is used (see Section.ChooseGroup).
//
// # Differences from the C agent's parser
//
// The C parser (configparser.l) rejects the whole file at the first
// character it cannot lex. This one reports every bad line as a
// "file:line: reason" error, skips that line, and keeps going, so one typo
// costs one event rather than the whole agent. Other differences, all on
// purpose:
//
//   - Events keep file order. The C parser prepends each event to its
//     section's list, so it sets them up, and numbers their PMIDs, in reverse.
//   - Every [dynamic] section counts; the C parser keeps only the last one.
//   - Derived sections work wherever they stand. The C agent of PCP 6.0.3
//     silently ignores derived sections that follow [dynamic].
//   - A comma separates PMU names in a header, as perfevent.conf(5) says.
//     The C lexer splits on blanks only, so there "[a,b]" names one PMU
//     called "a,b". A comma inside quotes is still part of the name.
//   - Leading blanks are allowed before headers and event lines.
//   - Options that the C agent accepts but then ignores are errors here:
//     a scale outside a derived section, rawcode= on an event that is not
//     RAW:<name>, hv_24x7/hv_gpci parameters outside [dynamic], two CPU
//     options on one line (C silently keeps the last).
//   - A scale may use an exponent without a decimal point (1e-6).
//   - A PMU or derived section that ends up with no events is reported and
//     dropped, so it cannot win section selection and then count nothing.
//   - A bad member line drops its whole alternative group: a derived sum
//     with a silently missing member would be wrong, not merely incomplete.
package config
