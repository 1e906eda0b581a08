// Package tables holds libpfm4's event tables, as generated from its own
// sources at the commit source_gen.go names, by ./gen: per architecture (amd64, arm64, ppc64le) a directory
// with index.tsv, one line per PMU in libpfm4's list order, and one
// gzip-compressed file per distinct event table. Package pfm decodes them;
// README.md describes the format and LICENSE.libpfm4 the terms of the data.
package tables

import "embed"

// To regenerate, extract libpfm4 at the pinned commit (PAPI's copy; see
// README.md) and point LIBPFM4_SRC at it; the cross compilers and
// qemu-user-static are needed for arm64 and ppc64le.
//go:generate go run ./gen -out . -libpfm4 $LIBPFM4_SRC -commit 6870a9f00412830ceaa7e4384bb92ee323e2a28f -papi 545375f7d81b13e99de3c98493168402a0a81d43

// FS holds every architecture's tables. The indexes are not in it: package
// pfm compiles them in (its index_gen.go, made from them).
//
//go:embed */*.tsv.gz
var FS embed.FS
