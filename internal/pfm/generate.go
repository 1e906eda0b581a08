package pfm

// The golden encodings of testdata/golden come from Debian's libpfm4; the
// generator needs root, gcc and libpfm4-dev (and, for arm64 and ppc64le,
// Debian's packages of that architecture: see testdata/golden/README.md).
//go:generate go run ./gengolden -arch amd64

// index_gen.go compiles in each architecture's index.tsv and the perf
// tables (regenerate it after the tables).
//go:generate go test -run ^TestIndexGenerated$ -update-index
