// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * metaroce-pathstat: attach the per-path telemetry program to an interface
 * and show what it counted.
 *
 *   metaroce-pathstat [--netns NAME] attach IFACE [--port N]
 *   metaroce-pathstat [--netns NAME] detach IFACE
 *   metaroce-pathstat show
 *   metaroce-pathstat clear
 *
 * --netns enters the named network namespace (like "ip netns exec", but
 * keeping this mount namespace, where the counters are pinned).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <rdma/metaroce_wire.h>

#include "metaroce_paths.h"
#include "metaroce_paths.skel.h"

#define PIN_ROOT "/sys/fs/bpf/metaroce"
#define MAP_PIN PIN_ROOT "/metaroce_paths"
#define MAX_ROWS 16384

static int usage(void)
{
	fprintf(stderr,
		"usage: metaroce-pathstat [--netns NAME] attach IFACE [--port N]\n"
		"       metaroce-pathstat [--netns NAME] detach IFACE\n"
		"       metaroce-pathstat show\n"
		"       metaroce-pathstat clear\n");
	return 2;
}

static int enter_netns(const char *name)
{
	char path[256];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || setns(fd, CLONE_NEWNET)) {
		fprintf(stderr, "metaroce-pathstat: netns %s: %s\n", name,
			strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

static int tc_hook(const char *ifname, struct bpf_tc_hook *hook)
{
	int ifindex = if_nametoindex(ifname);

	if (!ifindex) {
		fprintf(stderr, "metaroce-pathstat: no interface %s\n", ifname);
		return -ENODEV;
	}
	memset(hook, 0, sizeof(*hook));
	hook->sz = sizeof(*hook);
	hook->ifindex = ifindex;
	hook->attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
	return 0;
}

static int attach_one(struct bpf_tc_hook *hook, enum bpf_tc_attach_point where,
		      struct bpf_program *prog)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .prog_fd = bpf_program__fd(prog));

	hook->attach_point = where;
	return bpf_tc_attach(hook, &opts);
}

static int cmd_attach(const char *ifname, unsigned int port)
{
	DECLARE_LIBBPF_OPTS(bpf_object_open_opts, open_opts,
			    .pin_root_path = PIN_ROOT);
	struct metaroce_paths_bpf *skel;
	struct bpf_tc_hook hook;
	int err;

	err = tc_hook(ifname, &hook);
	if (err)
		return 1;
	if (mkdir(PIN_ROOT, 0700) && errno != EEXIST) {
		perror("metaroce-pathstat: " PIN_ROOT);
		return 1;
	}
	skel = metaroce_paths_bpf__open_opts(&open_opts);
	if (!skel) {
		perror("metaroce-pathstat: open");
		return 1;
	}
	skel->rodata->udp_port = port;
	err = metaroce_paths_bpf__load(skel);
	if (err) {
		fprintf(stderr, "metaroce-pathstat: load: %s\n", strerror(-err));
		goto out;
	}
	err = bpf_tc_hook_create(&hook);
	if (err && err != -EEXIST) {
		fprintf(stderr, "metaroce-pathstat: clsact on %s: %s\n", ifname,
			strerror(-err));
		goto out;
	}
	err = attach_one(&hook, BPF_TC_INGRESS, skel->progs.metaroce_paths_ingress);
	if (!err)
		err = attach_one(&hook, BPF_TC_EGRESS,
				 skel->progs.metaroce_paths_egress);
	if (err)
		fprintf(stderr, "metaroce-pathstat: attach to %s: %s\n", ifname,
			strerror(-err));
	else
		printf("attached to %s; counters in %s\n", ifname, MAP_PIN);
out:
	metaroce_paths_bpf__destroy(skel);
	return err ? 1 : 0;
}

static int cmd_detach(const char *ifname)
{
	struct bpf_tc_hook hook;
	int err;

	if (tc_hook(ifname, &hook))
		return 1;
	err = bpf_tc_hook_destroy(&hook);
	if (err && err != -ENOENT) {
		fprintf(stderr, "metaroce-pathstat: detach: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}

struct row {
	struct metaroce_path_key key;
	struct metaroce_path_stats stats;
};

static int row_cmp(const void *a, const void *b)
{
	const struct metaroce_path_key *x = &((const struct row *)a)->key;
	const struct metaroce_path_key *y = &((const struct row *)b)->key;

	if (x->qpn != y->qpn)
		return x->qpn < y->qpn ? -1 : 1;
	if (x->dir != y->dir)
		return x->dir < y->dir ? -1 : 1;
	return (int)x->path - (int)y->path;
}

static int cmd_show(void)
{
	struct metaroce_path_key key, next, *prev = NULL;
	struct row *rows;
	int fd, n = 0, i;

	fd = bpf_obj_get(MAP_PIN);
	if (fd < 0) {
		fprintf(stderr, "metaroce-pathstat: %s: %s (not attached?)\n",
			MAP_PIN, strerror(errno));
		return 1;
	}
	rows = calloc(MAX_ROWS, sizeof(*rows));
	if (!rows)
		return 1;
	while (n < MAX_ROWS && !bpf_map_get_next_key(fd, prev, &next)) {
		if (!bpf_map_lookup_elem(fd, &next, &rows[n].stats))
			rows[n++].key = next;
		key = next;
		prev = &key;
	}
	qsort(rows, n, sizeof(*rows), row_cmp);
	printf("%-8s %-3s %-5s %10s %12s %8s %6s %8s %6s\n", "QPN", "DIR",
	       "PATH", "PACKETS", "BYTES", "RETX", "CE", "ACKS", "NAKS");
	for (i = 0; i < n; i++) {
		const struct row *r = &rows[i];

		printf("%-8u %-3s %-5u %10llu %12llu %8llu %6llu %8llu %6llu\n",
		       r->key.qpn, r->key.dir == METAROCE_DIR_TX ? "tx" : "rx",
		       r->key.path, (unsigned long long)r->stats.packets,
		       (unsigned long long)r->stats.bytes,
		       (unsigned long long)r->stats.retransmits,
		       (unsigned long long)r->stats.ecn_ce,
		       (unsigned long long)r->stats.acks,
		       (unsigned long long)r->stats.naks);
	}
	free(rows);
	close(fd);
	return 0;
}

static int cmd_clear(void)
{
	if (unlink(MAP_PIN) && errno != ENOENT) {
		perror("metaroce-pathstat: " MAP_PIN);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int port = METAROCE_UDP_PORT;

	if (argc > 3 && !strcmp(argv[1], "--netns")) {
		if (enter_netns(argv[2]))
			return 1;
		argc -= 2;
		argv += 2;
	}
	if (argc < 2)
		return usage();
	if (!strcmp(argv[1], "attach") && (argc == 3 || argc == 5)) {
		if (argc == 5) {
			if (strcmp(argv[3], "--port"))
				return usage();
			port = strtoul(argv[4], NULL, 0);
			if (!port || port > 65535)
				return usage();
		}
		return cmd_attach(argv[2], port);
	}
	if (!strcmp(argv[1], "detach") && argc == 3)
		return cmd_detach(argv[2]);
	if (!strcmp(argv[1], "show") && argc == 2)
		return cmd_show();
	if (!strcmp(argv[1], "clear") && argc == 2)
		return cmd_clear();
	return usage();
}
