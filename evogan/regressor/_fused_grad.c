/* Gradients of the regressor's convolution filters (taps and bias) from the gradient of its
 * predictions, without keeping the convolution output.
 *
 * The network is relu(conv(x) + bias) -> average pooling -> linear. With g[e] the loss's
 * gradient for event e's prediction and coef[c][r] the linear weight of row (filter) r at
 * pooling cell c divided by the pool area, every position p the pooling keeps contributes
 *
 *   d = g[e] * coef[cell(p)][r]  where conv(x_e)[r][p] + bias[r] > 0, else 0,
 *   grad_w[t][r] += d * x_e[p + tap[t]],   grad_b[r] += d.
 *
 * The convolution is recomputed block by block (LANES rows times NP positions in vector
 * registers) for its sign only; the block's d then meets the same input pixels tap by tap.
 * Padding positions name cell `cells`, whose coef row is zero. Sums run in a fixed order
 * (events of a thread in order, threads' partial sums added in thread order by the caller).
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

struct job {
    const float *x;
    const long *index; /* events' rows of x, or NULL for rows 0, 1, ... */
    long event_stride;
    const float *weight; /* [taps][rows] */
    const float *bias;   /* [rows] */
    const int *pos;      /* [positions] */
    const int *cell;     /* [positions], `cells` for padding */
    const int *tap;      /* [taps] */
    long positions, taps, rows;
    const float *coef; /* [cells + 1][rows], the last row zero */
    const float *g;    /* [events] */
    float *grad_w;     /* [taps][rows], zeroed by the caller */
    float *grad_b;     /* [rows], zeroed by the caller */
    long first, last;  /* events [first, last) */
};

static inline vf load(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vf v) { memcpy(p, &v, sizeof v); }

static void *run(void *arg) {
    const struct job *j = arg;
    const long rows = j->rows, taps = j->taps;
    const int *restrict tap = j->tap, *restrict pos = j->pos, *restrict cell = j->cell;
    for (long b = j->first; b < j->last; b++) {
        const float *xb = j->x + (j->index ? j->index[b] : b) * j->event_stride;
        const float ge = j->g[b];
        if (ge == 0.0f) continue;
        for (long col = 0; col < rows; col += LANES) {
            const vf bias = load(j->bias + col);
            vf grad_b = load(j->grad_b + col);
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
                vf d[NP];
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) {
                    const vf c = load(j->coef + (long)cell[start + q] * rows + col) * ge;
                    d[q] = (vf)((vi)c & (acc[q] > 0));
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

/* Adds thread i's sums to grad_w + i * (taps + 1) * rows ([taps][rows], then the bias's
 * [rows]), which the caller zeroes and sums in thread order. Returns 0, or -1 on bad arguments
 * (rows or positions not padded, thread count out of range). A thread that cannot be started
 * has its share of events run by the caller. */
int evogan_fused_grad(const float *x, const long *index, long events, long event_stride,
                      const float *weight, const float *bias, const int *pos, const int *cell,
                      long positions, const int *tap, long taps, long rows, const float *coef,
                      const float *g, float *grad, int threads) {
    if (events < 0 || rows % LANES || positions % NP || threads < 1 || threads > MAX_THREADS)
        return -1;
    if (threads > events) threads = events > 0 ? (int)events : 1;
    struct job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    const long share = (taps + 1) * rows;
    for (int i = 0; i < threads; i++) {
        float *mine = grad + i * share;
        jobs[i] = (struct job){x, index, event_stride, weight, bias, pos, cell, tap, positions,
                               taps, rows, coef, g, mine, mine + taps * rows,
                               events * i / threads, events * (i + 1) / threads};
    }
    for (int i = 1; i < threads; i++) started[i] = pthread_create(&ids[i], NULL, run, &jobs[i]) == 0;
    run(&jobs[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i]) pthread_join(ids[i], NULL);
        else run(&jobs[i]);
    }
    return 0;
}
