module perfevent

go 1.26.0

require (
	github.com/cilium/ebpf v0.22.0
	golang.org/x/sys v0.50.0
	golang.org/x/time v0.16.0
)
