/* Fused batched evaluation of the regressor, convolving each distinct filter once.
 *
 * A child of a (1+lambda) generation keeps most of its elite's filters, so the candidates of
 * a generation share most rows (a row is one convolution filter: taps and bias). For every
 * event the kernel computes, per row, the pooled sums of relu(conv + bias) over each pooling
 * cell, then the tails: a tail reads one vector of LANES rows and holds, lane by lane, the
 * linear weight (divided by the pool area) of the candidate filter in that lane, so
 *
 *   out[b][t][l] = sum_c pooled_b[c][tail_vector[t] * LANES + l] * tail[t][c][l]
 *
 * is the contribution of one (candidate, filter) pair in lane l. When asked, the pooled sums
 * themselves are written too (the features a least-squares readout is fitted on). No
 * convolution output is kept: a block of 8-32 rows times NP positions is accumulated in
 * registers over all taps, rectified and added to its pooling cell. Rows are the vector lanes
 * (weights stored tap-major, rows padded to a multiple of LANES); input pixels are broadcast,
 * addressed through the position and tap offset tables, so any channel count, kernel size or
 * pooling works.
 *
 * Lanes never mix: a row's pooled sums and a (candidate, filter) pair's tail sum have the same
 * bits in whatever lane and next to whatever rows they are computed, so a candidate scores
 * the same whichever candidates share its call (an island whose ranks split the candidates
 * relies on that), and the same with or without AVX-512.
 *
 * Written with GCC/Clang vector extensions (no intrinsics): -march=native maps them to AVX2 +
 * FMA on x86, to AVX-512 where the CPU has it, and to NEON elsewhere. Events are split across POSIX threads when asked.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define LANES 8

typedef float vf __attribute__((vector_size(LANES * sizeof(float))));
typedef int vi __attribute__((vector_size(LANES * sizeof(int))));

/* With AVX-512 (32 registers of 16 floats) the convolution's register blocks hold 16 rows per
 * register; the rows keep their 8-lane layout, so pooled sums and tails are unchanged. */
#ifdef __AVX512F__
#define BLOCK_VECTORS 4 /* 8-lane row vectors of the widest register block */
typedef float vw __attribute__((vector_size(16 * sizeof(float))));
typedef int vwi __attribute__((vector_size(16 * sizeof(int))));
#else
#define BLOCK_VECTORS 2
#endif

struct job {
    const float *x;
    const long *index; /* events' rows of x, or NULL for rows 0, 1, ... */
    long event_stride;
    const float *weight; /* [taps][rows] */
    const float *bias;   /* [rows] */
    const int *pos;      /* [positions], a multiple of 12 */
    const int *cell;     /* [positions]: each position's pooling cell, `cells` for padding */
    int quads;           /* positions come in aligned runs of 4 per cell (padding included) */
    const int *tap;      /* [taps] */
    long positions, cells, taps, rows;
    const float *tail;        /* [tails][cells][LANES] */
    const int *tail_vector;   /* [tails], ascending */
    long tails;
    float *out;          /* [events][tails][LANES] */
    float *cell_out;     /* [events][rows][cells] pooled sums, or NULL */
    long first, last;    /* events [first, last) */
    int failed;
};

static inline vf load(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vf v) { memcpy(p, &v, sizeof v); }

/* The same for a vector of any type T (integer type IT of the same width): the blocks' loads,
 * stores and rectification. */
#define LOAD(T, p) ({ T v_; memcpy(&v_, (p), sizeof v_); v_; })
#define STORE(p, v) ({ __typeof__(v) v_ = (v); memcpy((p), &v_, sizeof v_); })
#define RELU(T, IT, v) ((T)((IT)(v) & ((v) > 0)))

/* Pooled sums [cells + 1][NV * W] of NV row vectors (type T, W rows each) of one event, NP
 * positions at a time; the loops over constant bounds are unrolled so the accumulators live in
 * registers. With `quads` (2 x 2 pooling), positions come in aligned runs of four per cell: a
 * cell's sum is made in registers, carried across blocks when a run straddles one, and stored
 * once; otherwise every position is added to its cell in memory. Either way a cell's sum is
 * ((r0 + r1) + r2) + r3 in position order (from zero in memory: the same bits). */
#define DEFINE_BLOCK(T, IT, W, NV, NP)                                                              \
    static void block_##W##_##NV##x##NP(const struct job *j, const float *xb, long col,             \
                                  float *restrict pooled) {                                         \
        const long rows = j->rows, taps = j->taps, positions = j->positions;                        \
        const int *restrict tap = j->tap, *restrict pos = j->pos, *restrict cell = j->cell;         \
        const float *restrict weight = j->weight + col;                                             \
        const int quads = j->quads;                                                                 \
        if (!quads) memset(pooled, 0, (size_t)(j->cells + 1) * NV * W * sizeof(float));             \
        T bias[NV], run[NV];                                                                        \
        for (int v = 0; v < NV; v++) bias[v] = LOAD(T, j->bias + col + W * v);                      \
        for (long g = 0; g < positions; g += NP) {                                                  \
            const float *px[NP];                                                                    \
            _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) px[q] = xb + pos[g + q];          \
            T acc[NV][NP];                                                                          \
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                                   \
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) acc[v][q] = bias[v];          \
            const float *w = weight;                                                                \
            for (long t = 0; t < taps; t++, w += rows) {                                            \
                const int o = tap[t];                                                               \
                T wv[NV];                                                                           \
                _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) wv[v] = LOAD(T, w + W * v);   \
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) {                             \
                    const float s = px[q][o];                                                       \
                    _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) acc[v][q] += wv[v] * s;   \
                }                                                                                   \
            }                                                                                       \
            _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) {                                 \
                const long p = g + q;                                                               \
                float *sum = pooled + (long)cell[p] * NV * W;                                       \
                if (!quads) {                                                                       \
                    _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                           \
                        STORE(sum + W * v, LOAD(T, sum + W * v) + RELU(T, IT, acc[v][q]));          \
                    continue;                                                                       \
                }                                                                                   \
                const long k = NP % 4 ? p & 3 : q & 3; /* NP % 4 == 0: so is g % 4 */               \
                _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                               \
                    run[v] = k ? run[v] + RELU(T, IT, acc[v][q]) : RELU(T, IT, acc[v][q]);          \
                if (k == 3)                                                                         \
                    _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                           \
                        STORE(sum + W * v, run[v]);                                                 \
            }                                                                                       \
        }                                                                                           \
    }

#ifdef __AVX512F__
DEFINE_BLOCK(vw, vwi, 16, 2, 12)
DEFINE_BLOCK(vw, vwi, 16, 1, 12)
#else
DEFINE_BLOCK(vf, vi, 8, 2, 6)
#endif
DEFINE_BLOCK(vf, vi, 8, 1, 12)

/* The tails that read the block's vectors [first, first + count): tail *t onwards. One
 * function for every block shape, four accumulators in a fixed order: the same bits in any
 * lane. */
static void block_tails(const struct job *j, const float *pooled, long first, long count,
                        long *t, float *out) {
    const long cells = j->cells;
    for (; *t < j->tails && j->tail_vector[*t] < first + count; (*t)++) {
        const float *p = pooled + (j->tail_vector[*t] - first) * LANES;
        const float *tl = j->tail + *t * cells * LANES;
        const long stride = count * LANES;
        vf s[4] = {{0}};
        long c = 0;
        for (; c + 4 <= cells; c += 4)
            for (int k = 0; k < 4; k++)
                s[k] += load(p + (c + k) * stride) * load(tl + (c + k) * LANES);
        for (; c < cells; c++) s[0] += load(p + c * stride) * load(tl + c * LANES);
        store(out + *t * LANES, (s[0] + s[1]) + (s[2] + s[3]));
    }
}

/* The block's pooled sums of every real cell into the event's [rows][cells] output (a row's
 * cells together: the features of one filter, in the order the linear layer reads them). */
static void block_cells(const struct job *j, const float *pooled, long col, long count,
                        float *cell_out) {
    const long width = count * LANES;
    for (long r = 0; r < width; r++) {
        float *out = cell_out + (col + r) * j->cells;
        for (long c = 0; c < j->cells; c++) out[c] = pooled[c * width + r];
    }
}

static void *run(void *arg) {
    struct job *j = arg;
    float *pooled = malloc((size_t)(j->cells + 1) * BLOCK_VECTORS * LANES * sizeof(float));
    if (pooled == NULL) {
        j->failed = 1;
        return NULL;
    }
    for (long b = j->first; b < j->last; b++) {
        const float *xb = j->x + (j->index ? j->index[b] : b) * j->event_stride;
        float *out = j->out + b * j->tails * LANES;
        float *cell_out = j->cell_out ? j->cell_out + b * j->cells * j->rows : NULL;
        long col = 0, t = 0;
#ifdef __AVX512F__
        for (; col + 4 * LANES <= j->rows; col += 4 * LANES) {
            block_16_2x12(j, xb, col, pooled);
            block_tails(j, pooled, col / LANES, 4, &t, out);
            if (cell_out) block_cells(j, pooled, col, 4, cell_out);
        }
        if (j->rows - col >= 2 * LANES) {
            block_16_1x12(j, xb, col, pooled);
#else
        for (; col + 2 * LANES <= j->rows; col += 2 * LANES) {
            block_8_2x6(j, xb, col, pooled);
#endif
            block_tails(j, pooled, col / LANES, 2, &t, out);
            if (cell_out) block_cells(j, pooled, col, 2, cell_out);
#ifdef __AVX512F__
            col += 2 * LANES;
#endif
        }
        if (j->rows - col == LANES) {
            block_8_1x12(j, xb, col, pooled);
            block_tails(j, pooled, col / LANES, 1, &t, out);
            if (cell_out) block_cells(j, pooled, col, 1, cell_out);
        }
    }
    free(pooled);
    return NULL;
}

#define MAX_THREADS 256

/* Returns 0 on success, -1 on bad arguments (rows or positions not padded, thread count out of
 * range), -2 when scratch memory could not be had. A thread that cannot be started has its
 * share of events run by the caller. */
int evogan_fused_eval(const float *x, const long *index, long events, long event_stride,
                      const float *weight, const float *bias, const int *pos, const int *cell,
                      int quads, long positions, long cells, const int *tap, long taps, long rows,
                      const float *tail, const int *tail_vector, long tails, float *out,
                      float *cell_out, int threads) {
    if (events < 0 || rows % LANES || positions % 12 || threads < 1 || threads > MAX_THREADS)
        return -1;
    if (threads > events) threads = events > 0 ? (int)events : 1;
    struct job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 0; i < threads; i++) {
        jobs[i] = (struct job){x, index, event_stride, weight, bias, pos, cell, quads, tap,
                               positions, cells, taps, rows, tail, tail_vector, tails, out,
                               cell_out, events * i / threads, events * (i + 1) / threads, 0};
    }
    for (int i = 1; i < threads; i++) started[i] = pthread_create(&ids[i], NULL, run, &jobs[i]) == 0;
    run(&jobs[0]);
    int failed = jobs[0].failed;
    for (int i = 1; i < threads; i++) {
        if (started[i]) pthread_join(ids[i], NULL);
        else run(&jobs[i]);
        failed |= jobs[i].failed;
    }
    return failed ? -2 : 0;
}
