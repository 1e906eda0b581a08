// Package release holds the version that pmdaperfevent and perfalloc
// report, so that the two commands of one build always agree.
package release

// Version is what perfevent.version, pmdaperfevent --version and
// perfalloc -v report. The C tools say "1.0.1"; a different number tells a
// script which implementation answers.
const Version = "2.0.0"
