// Package tables holds libpfm4 4.13.0's event tables, as generated from its
// own sources by ./gen: per architecture (amd64, arm64, ppc64le) a directory
// with index.tsv, one line per PMU in libpfm4's list order, and one
// gzip-compressed file per distinct event table. Package pfm decodes them;
// README.md describes the format and LICENSE.libpfm4 the terms of the data.
package tables

import "embed"

// To regenerate, extract libpfm4 4.13.0 (see README.md) and point
// LIBPFM4_SRC at it; the cross compilers and qemu-user-static are needed
// for arm64 and ppc64le.
//go:generate go run ./gen -out . -libpfm4 $LIBPFM4_SRC

// FS holds every architecture's index and tables.
//
//go:embed */index.tsv */*.tsv.gz
var FS embed.FS
