package pmu

// HasCorePMU reports whether the kernel exposes a core PMU with events:
// without one (most VMs) no hardware event can be counted, whatever its
// name resolves to.
func (fs *FS) HasCorePMU() bool { return fs.hasCorePMU() }
