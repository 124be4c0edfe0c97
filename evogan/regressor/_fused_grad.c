/* The regressor's forward and backward for one network, without keeping the convolution
 * output.
 *
 * The network is relu(conv(x) + bias) -> average pooling -> linear. The forward computes
 * the convolution block by block (LANES rows times NP positions in vector registers), adds
 * each rectified block into its pooling cells' sums and keeps one bit per (row, position):
 * whether the ReLU passed it. With g[e] the loss's gradient for event e's prediction and
 * coef[c][r] the linear weight of row (filter) r at pooling cell c divided by the pool area,
 * every position p the pooling keeps then contributes to the backward
 *
 *   d = g[e] * coef[cell(p)][r]  where the ReLU passed (e, r, p), else 0,
 *   grad_w[t][r] += d * x_e[p + tap[t]],   grad_b[r] += d,
 *
 * so the backward meets each input pixel once per tap and never recomputes the convolution.
 * Padding positions name cell `cells`, whose sums nobody reads and whose coef row is zero.
 * Sums run in a fixed order (events of a thread in order; the backward's per-thread partial
 * sums are added in thread order by the caller).
 *
 * GCC/Clang vector extensions, as _fused_eval.c; events are split across POSIX threads.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define LANES 8
#define NP 12 /* positions per block: the tables are padded to a multiple of 12 */

typedef float vf __attribute__((vector_size(LANES * sizeof(float))));
typedef int vi __attribute__((vector_size(LANES * sizeof(int))));

static const vi LANE_BITS = {1, 2, 4, 8, 16, 32, 64, 128};

struct job {
    const float *x;
    long event_stride;
    const int *pos;  /* [positions] */
    const int *cell; /* [positions], `cells` for padding */
    const int *tap;  /* [taps] */
    long positions, taps, rows, cells;
    unsigned char *passed; /* [events][rows / LANES][positions]: bit r of a byte, lane r */
    const float *weight;   /* forward: [taps][rows] */
    const float *bias;     /* forward: [rows] */
    float *sums;           /* forward: [events][cells + 1][rows], zeroed by the caller */
    const float *coef;     /* backward: [cells + 1][rows], the last row zero */
    const float *g;        /* backward: [events] */
    float *grad_w;         /* backward: [taps][rows], zeroed by the caller */
    float *grad_b;         /* backward: [rows], zeroed by the caller */
    long first, last;      /* events [first, last) */
};

static inline vf load(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vf v) { memcpy(p, &v, sizeof v); }

static void *forward(void *arg) {
    const struct job *j = arg;
    const long rows = j->rows, taps = j->taps, groups = rows / LANES;
    const int *restrict tap = j->tap, *restrict pos = j->pos, *restrict cell = j->cell;
    for (long b = j->first; b < j->last; b++) {
        const float *xb = j->x + b * j->event_stride;
        float *sums = j->sums + b * (j->cells + 1) * rows;
        for (long col = 0; col < rows; col += LANES) {
            const vf bias = load(j->bias + col);
            unsigned char *passed = j->passed + (b * groups + col / LANES) * j->positions;
            for (long start = 0; start < j->positions; start += NP) {
                const float *px[NP];
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) px[q] = xb + pos[start + q];
                vf acc[NP];
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) acc[q] = bias;
                const float *w = j->weight + col;
                for (long t = 0; t < taps; t++, w += rows) {
                    const vf wv = load(w);
                    const int o = tap[t];
                    _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) acc[q] += wv * px[q][o];
                }
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) {
                    const vi on = acc[q] > 0;
                    float *s = sums + (long)cell[start + q] * rows + col;
                    store(s, load(s) + (vf)((vi)acc[q] & on));
                    const vi bits = on & LANE_BITS;
                    passed[start + q] = (unsigned char)(bits[0] | bits[1] | bits[2] | bits[3] |
                                                        bits[4] | bits[5] | bits[6] | bits[7]);
                }
            }
        }
    }
    return NULL;
}

static void *backward(void *arg) {
    const struct job *j = arg;
    const long rows = j->rows, taps = j->taps, groups = rows / LANES;
    const int *restrict tap = j->tap, *restrict pos = j->pos, *restrict cell = j->cell;
    for (long b = j->first; b < j->last; b++) {
        const float *xb = j->x + b * j->event_stride;
        const float ge = j->g[b];
        if (ge == 0.0f) continue;
        for (long col = 0; col < rows; col += LANES) {
            const unsigned char *passed = j->passed + (b * groups + col / LANES) * j->positions;
            vf grad_b = load(j->grad_b + col);
            for (long start = 0; start < j->positions; start += NP) {
                const float *px[NP];
                vf d[NP];
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) {
                    px[q] = xb + pos[start + q];
                    const vf c = load(j->coef + (long)cell[start + q] * rows + col) * ge;
                    const vi on = ((vi){} + passed[start + q]) & LANE_BITS;
                    d[q] = (vf)((vi)c & (on != 0));
                    grad_b += d[q];
                }
                float *gw = j->grad_w + col;
                for (long t = 0; t < taps; t++, gw += rows) {
                    const int o = tap[t];
                    vf s = load(gw);
                    _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) s += d[q] * px[q][o];
                    store(gw, s);
                }
            }
            store(j->grad_b + col, grad_b);
        }
    }
    return NULL;
}

#define MAX_THREADS 256

/* Runs `work` on each job, jobs 1.. in threads of their own; a thread that cannot be started
 * has its job run by the caller. */
static void in_threads(void *(*work)(void *), struct job *jobs, int threads) {
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 1; i < threads; i++)
        started[i] = pthread_create(&ids[i], NULL, work, &jobs[i]) == 0;
    work(&jobs[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i]) pthread_join(ids[i], NULL);
        else work(&jobs[i]);
    }
}

static int bad_arguments(long events, long rows, long positions, int threads) {
    return events < 0 || rows % LANES || positions % NP || threads < 1 || threads > MAX_THREADS;
}

/* Pooling cells' sums of the rectified convolution into `sums` ([events][cells + 1][rows],
 * zeroed by the caller) and the ReLU's bits into `passed`. Returns 0, or -1 on bad arguments
 * (rows or positions not padded, thread count out of range). */
int evogan_fused_forward(const float *x, long events, long event_stride, const float *weight,
                         const float *bias, const int *pos, const int *cell, long positions,
                         long cells, const int *tap, long taps, long rows, float *sums,
                         unsigned char *passed, int threads) {
    if (bad_arguments(events, rows, positions, threads)) return -1;
    if (threads > events) threads = events > 0 ? (int)events : 1;
    struct job jobs[MAX_THREADS];
    for (int i = 0; i < threads; i++)
        jobs[i] = (struct job){.x = x, .event_stride = event_stride, .pos = pos, .cell = cell,
                               .tap = tap, .positions = positions, .taps = taps, .rows = rows,
                               .cells = cells, .passed = passed, .weight = weight, .bias = bias,
                               .sums = sums, .first = events * i / threads,
                               .last = events * (i + 1) / threads};
    in_threads(forward, jobs, threads);
    return 0;
}

/* Adds thread i's sums to grad + i * (taps + 1) * rows ([taps][rows], then the bias's
 * [rows]), which the caller zeroes and sums in thread order; `passed` is the forward's. Returns
 * 0, or -1 on bad arguments. */
int evogan_fused_grad(const float *x, long events, long event_stride, const int *pos,
                      const int *cell, long positions, const int *tap, long taps, long rows,
                      const unsigned char *passed, const float *coef, const float *g,
                      float *grad, int threads) {
    if (bad_arguments(events, rows, positions, threads)) return -1;
    if (threads > events) threads = events > 0 ? (int)events : 1;
    struct job jobs[MAX_THREADS];
    const long share = (taps + 1) * rows;
    for (int i = 0; i < threads; i++) {
        float *mine = grad + i * share;
        jobs[i] = (struct job){.x = x, .event_stride = event_stride, .pos = pos, .cell = cell,
                               .tap = tap, .positions = positions, .taps = taps, .rows = rows,
                               .passed = (unsigned char *)passed, .coef = coef, .g = g,
                               .grad_w = mine, .grad_b = mine + taps * rows,
                               .first = events * i / threads, .last = events * (i + 1) / threads};
    }
    in_threads(backward, jobs, threads);
    return 0;
}
