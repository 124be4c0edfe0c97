/* Fused batched evaluation of the regressor: convolution + bias + ReLU + (average pooling and
 * linear layer folded into one weight per convolution position), for every (event, row) pair,
 * where a row is one filter of one candidate genome.
 *
 *   out[b][r] = sum_p relu(bias[r] + sum_t weight[t][r] * x_b[pos[p] + tap[t]]) * tail[p][r]
 *
 * No im2col and no convolution output in memory: a block of NV x 8 rows times NP positions is
 * accumulated in NV * NP vector registers over all taps, then rectified, weighted by the tail
 * and added to per-row sums. Rows are the vector lanes (weights stored tap-major, rows padded
 * to a multiple of 8 with zeros); input pixels are broadcast, addressed through the position
 * and tap offset tables, so any channel count, kernel size or cropped region works.
 *
 * Written with GCC/Clang vector extensions (no intrinsics): -march=native maps them to AVX2 +
 * FMA on x86 and to NEON elsewhere. Events are split across POSIX threads when asked.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#define LANES 8

typedef float vf __attribute__((vector_size(LANES * sizeof(float))));
typedef int vi __attribute__((vector_size(LANES * sizeof(int))));

struct job {
    const float *x;
    const long *index; /* events' rows of x, or NULL for rows 0, 1, ... */
    long event_stride;
    const float *weight; /* [taps][rows] */
    const float *bias;   /* [rows] */
    const float *tail;   /* [positions][rows] */
    const int *pos;      /* [positions], a multiple of 12 */
    const int *tap;      /* [taps] */
    long positions, taps, rows;
    float *out;          /* [events][rows] */
    long first, last;    /* events [first, last) */
};

static inline vf load(const float *p) {
    vf v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void store(float *p, vf v) { memcpy(p, &v, sizeof v); }

static inline vf relu(vf v) { return (vf)((vi)v & (v > 0)); }

/* Compilers contract `sum += a * b` into one FMA in some block shapes and not in others, so a
 * row's result would depend on which block computed it, that is on how many candidates were
 * scored together. Rounding the tail product on its own in every block makes a row's bits the
 * same whatever its neighbours (an island whose ranks split the candidates relies on that). */
#if defined(__x86_64__) || defined(__i386__)
#define ROUNDED(v) __asm__("" : "+x"(v))
#elif defined(__aarch64__)
#define ROUNDED(v) __asm__("" : "+w"(v))
#else
#define ROUNDED(v) __asm__("" : "+m"(v))
#endif

/* NV row vectors x NP positions of one event; the loops over constant bounds are unrolled so
 * the accumulators live in registers. */
#define DEFINE_BLOCK(NV, NP)                                                                    \
    static void block_##NV##x##NP(const struct job *j, const float *xb, long col, float *out) { \
        const long rows = j->rows;                                                             \
        vf sum[NV];                                                                            \
        for (int v = 0; v < NV; v++) sum[v] = (vf){0};                                         \
        vf bias[NV];                                                                           \
        for (int v = 0; v < NV; v++) bias[v] = load(j->bias + col + LANES * v);                \
        for (long g = 0; g < j->positions; g += NP) {                                          \
            const float *px[NP];                                                               \
            _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) px[q] = xb + j->pos[g + q];  \
            vf acc[NV][NP];                                                                    \
            _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++)                              \
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) acc[v][q] = bias[v];     \
            const float *w = j->weight + col;                                                  \
            for (long t = 0; t < j->taps; t++, w += rows) {                                    \
                const int o = j->tap[t];                                                       \
                vf wv[NV];                                                                     \
                _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) wv[v] = load(w + LANES * v); \
                _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++) {                        \
                    const float s = px[q][o];                                                  \
                    _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) acc[v][q] += wv[v] * s; \
                }                                                                              \
            }                                                                                  \
            const float *tl = j->tail + g * rows + col;                                        \
            _Pragma("GCC unroll 16") for (int q = 0; q < NP; q++)                              \
                _Pragma("GCC unroll 16") for (int v = 0; v < NV; v++) {                        \
                    vf product = relu(acc[v][q]) * load(tl + q * rows + LANES * v);            \
                    ROUNDED(product);                                                          \
                    sum[v] += product;                                                         \
                }                                                                              \
        }                                                                                      \
        for (int v = 0; v < NV; v++) store(out + col + LANES * v, sum[v]);                     \
    }

DEFINE_BLOCK(3, 4)
DEFINE_BLOCK(2, 6)
DEFINE_BLOCK(1, 12)

static void *run(void *arg) {
    const struct job *j = arg;
    for (long b = j->first; b < j->last; b++) {
        const float *xb = j->x + (j->index ? j->index[b] : b) * j->event_stride;
        float *out = j->out + b * j->rows;
        long col = 0;
        for (; col + 3 * LANES <= j->rows; col += 3 * LANES) block_3x4(j, xb, col, out);
        if (j->rows - col == 2 * LANES) block_2x6(j, xb, col, out);
        else if (j->rows - col == LANES) block_1x12(j, xb, col, out);
    }
    return NULL;
}

#define MAX_THREADS 256

/* Returns 0 on success, -1 on bad arguments (rows or positions not padded, thread count out of
 * range). A thread that cannot be started has its share of events run by the caller. */
int evogan_fused_eval(const float *x, const long *index, long events, long event_stride,
                      const float *weight, const float *bias, const float *tail, const int *pos,
                      long positions, const int *tap, long taps, long rows, float *out,
                      int threads) {
    if (events < 0 || rows % LANES || positions % 12 || threads < 1 || threads > MAX_THREADS)
        return -1;
    if (threads > events) threads = events > 0 ? (int)events : 1;
    struct job jobs[MAX_THREADS];
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 0; i < threads; i++) {
        jobs[i] = (struct job){x, index, event_stride, weight, bias, tail, pos, tap, positions, taps,
                               rows, out, events * i / threads, events * (i + 1) / threads};
    }
    for (int i = 1; i < threads; i++) started[i] = pthread_create(&ids[i], NULL, run, &jobs[i]) == 0;
    run(&jobs[0]);
    for (int i = 1; i < threads; i++) {
        if (started[i]) pthread_join(ids[i], NULL);
        else run(&jobs[i]);
    }
    return 0;
}
