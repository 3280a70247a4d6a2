// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * An MPI program that checks what it moves: a ping-pong, MPI_Allreduce and
 * MPI_Alltoall at several sizes, every element compared with what it must
 * be. Prints one line per check and, from rank 0, "mpi_check: PASS" or
 * exits non-zero. Run by selftests/metaroce/consumers.sh across two VMs.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, failures;

/* Element i of the buffer rank @r sends in round @round. */
static uint64_t value(int r, int round, size_t i)
{
	return ((uint64_t)r << 48) ^ ((uint64_t)round << 32) ^ (i * 2654435761u);
}

static void check(int ok, const char *what, size_t n)
{
	int all;

	MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
	if (!all)
		failures++;
	if (rank == 0)
		printf("%s %s, %zu elements\n", all ? "ok" : "FAILED", what, n);
}

static void pingpong(size_t n, int round)
{
	uint64_t *buf = malloc(n * sizeof(*buf));
	double t0;
	int ok = 1, i, iters = 20;
	size_t j;

	t0 = MPI_Wtime();
	for (i = 0; i < iters; i++) {
		if (rank == 0) {
			for (j = 0; j < n; j++)
				buf[j] = value(0, round + i, j);
			MPI_Send(buf, n, MPI_UINT64_T, 1, i, MPI_COMM_WORLD);
			MPI_Recv(buf, n, MPI_UINT64_T, 1, i, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			for (j = 0; j < n; j++)
				ok &= buf[j] == ~value(0, round + i, j);
		} else if (rank == 1) {
			MPI_Recv(buf, n, MPI_UINT64_T, 0, i, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			for (j = 0; j < n; j++) {
				ok &= buf[j] == value(0, round + i, j);
				buf[j] = ~buf[j];
			}
			MPI_Send(buf, n, MPI_UINT64_T, 0, i, MPI_COMM_WORLD);
		}
	}
	if (rank == 0)
		printf("ping-pong %zu bytes: %.1f us per round trip\n",
		       n * sizeof(*buf), (MPI_Wtime() - t0) * 1e6 / iters);
	check(ok, "ping-pong", n);
	free(buf);
}

static void allreduce(size_t n, int round)
{
	uint64_t *in = malloc(n * sizeof(*in)), *out = malloc(n * sizeof(*out));
	int ok = 1, r;
	size_t j;

	for (j = 0; j < n; j++)
		in[j] = value(rank, round, j);
	MPI_Allreduce(in, out, n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
	for (j = 0; j < n; j++) {
		uint64_t want = 0;

		for (r = 0; r < size; r++)
			want += value(r, round, j);
		ok &= out[j] == want;
	}
	check(ok, "MPI_Allreduce (sum)", n);
	free(in);
	free(out);
}

static void alltoall(size_t n, int round)
{
	uint64_t *in = malloc(n * size * sizeof(*in));
	uint64_t *out = malloc(n * size * sizeof(*out));
	int ok = 1, r;
	size_t j;

	/* Block r goes to rank r and holds (sender, receiver, j). */
	for (r = 0; r < size; r++)
		for (j = 0; j < n; j++)
			in[r * n + j] = value(rank, round + r, j);
	MPI_Alltoall(in, n, MPI_UINT64_T, out, n, MPI_UINT64_T,
		     MPI_COMM_WORLD);
	for (r = 0; r < size; r++)
		for (j = 0; j < n; j++)
			ok &= out[r * n + j] == value(r, round + rank, j);
	check(ok, "MPI_Alltoall", n);
	free(in);
	free(out);
}

int main(int argc, char **argv)
{
	static const size_t sizes[] = { 1, 100, 1000, 16384, 131072 };
	size_t i;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	if (size < 2) {
		fprintf(stderr, "mpi_check: needs 2 ranks or more\n");
		MPI_Abort(MPI_COMM_WORLD, 2);
	}
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		pingpong(sizes[i], 100 * (int)i);
		allreduce(sizes[i], 100 * (int)i);
		alltoall(sizes[i], 100 * (int)i);
	}
	if (rank == 0)
		printf("mpi_check: %s\n", failures ? "FAILED" : "PASS");
	MPI_Finalize();
	return failures ? 1 : 0;
}
