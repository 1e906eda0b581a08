// Package threads reaches every thread of this process: the Go runtime
// starts threads of its own, and some of what the kernel keeps for a
// thread (its nice value, CPU mask, timer slack) is set one thread at a
// time.
package threads
