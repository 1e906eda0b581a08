/*
 * pingpong: two processes, each in a cgroup of its own and both pinned to
 * one CPU, pass a byte back and forth through two pipes.  Every round trip
 * is two context switches from one cgroup to the other, which is where the
 * kernel switches per-cgroup perf events (or runs a BPF program at
 * sched_switch), so the time per round trip shows what counting per cgroup
 * costs the workload.  qa/cgroup_bench_test.go builds and runs it.
 *
 *   pingpong CGROUP_DIR_A CGROUP_DIR_B CPU ROUND_TRIPS
 *
 * prints "ns_per_round_trip N cpu_ns M": the wall time of one round trip
 * after a warm-up of a tenth as many, and the CPU time both processes
 * used over the timed part.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "pingpong: %s: %s\n", what, strerror(errno));
	exit(1);
}

/* join moves the calling process into the cgroup directory dir. */
static void join(const char *dir)
{
	char path[4096], pid[32];
	int fd, n;

	snprintf(path, sizeof path, "%s/cgroup.procs", dir);
	if ((fd = open(path, O_WRONLY)) < 0)
		die(path);
	n = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
	if (write(fd, pid, n) != n)
		die(path);
	close(fd);
}

static void pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set) < 0)
		die("sched_setaffinity");
}

static void xread(int fd, char *c)
{
	if (read(fd, c, 1) != 1)
		die("read");
}

static void xwrite(int fd, char c)
{
	if (write(fd, &c, 1) != 1)
		die("write");
}

static long long now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static long long cpu_ns(struct rusage *r)
{
	return (r->ru_utime.tv_sec + r->ru_stime.tv_sec) * 1000000000LL +
	       (r->ru_utime.tv_usec + r->ru_stime.tv_usec) * 1000LL;
}

int main(int argc, char **argv)
{
	int ping[2], pong[2], cpu;
	long n, warm, i;
	pid_t child;
	char c = 'x';
	long long t0, t1;
	struct rusage self0, self1, kid;
	int status;

	if (argc != 5) {
		fprintf(stderr, "usage: pingpong CGROUP_DIR_A CGROUP_DIR_B CPU ROUND_TRIPS\n");
		return 2;
	}
	cpu = atoi(argv[3]);
	n = atol(argv[4]);
	warm = n / 10;
	if (pipe(ping) < 0 || pipe(pong) < 0)
		die("pipe");
	pin(cpu);
	child = fork();
	if (child < 0)
		die("fork");
	if (child == 0) {
		join(argv[2]);
		xwrite(pong[1], c); /* in place */
		for (i = 0; i < warm + n; i++) {
			xread(ping[0], &c);
			xwrite(pong[1], c);
		}
		_exit(0);
	}
	join(argv[1]);
	xread(pong[0], &c);
	for (i = 0; i < warm; i++) {
		xwrite(ping[1], c);
		xread(pong[0], &c);
	}
	getrusage(RUSAGE_SELF, &self0);
	t0 = now_ns();
	for (i = 0; i < n; i++) {
		xwrite(ping[1], c);
		xread(pong[0], &c);
	}
	t1 = now_ns();
	getrusage(RUSAGE_SELF, &self1);
	if (wait4(child, &status, 0, &kid) < 0)
		die("wait4");
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "pingpong: the child failed (status %d)\n", status);
		return 1;
	}
	/* The child's CPU covers its warm-up too: scale it to the timed part. */
	printf("ns_per_round_trip %.1f cpu_ns %lld\n", (double)(t1 - t0) / n,
	       cpu_ns(&self1) - cpu_ns(&self0) + cpu_ns(&kid) * n / (warm + n));
	return 0;
}
