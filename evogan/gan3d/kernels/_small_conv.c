/* Direct 3D convolution of few channels on the CPU, float32, for the 3DGAN generator in eval mode.
 *
 * The 3DGAN's convolutions have 1-16 channels, where oneDNN's kernels reach 5-30% of the CPU's
 * float32 matrix-product rate (docs/history/benchmarks.md, "Generation near the CPU's limit").
 * Here every tap is one shift of a contiguous run of cells: for an input of (X, Y, Z) cells,
 * an output cell j = y * Z + z of x-plane x is
 *
 *   v[o][x][j] = act_o(bias[o] + sum_c sum_t w[o][c][t] * in[n][c][x][j + tap[t]])
 *
 * with tap[t] = dx * Y * Z + dy * Z + dz, computed on the input's row pitch ("wide" rows whose
 * cells z >= ZO are computed and dropped). act_o is the block's activation (none, relu, leaky
 * relu) followed by its eval-mode batch norm as a per-channel scale and shift, when given.
 *
 * Each kept cell (x, y, z) of channel o is stored at
 *
 *   out + n * on + c_o * oc + (x * s1 + q_o1) * ox + (y * s2 + q_o2) * oy + (z * s3 + q_o3) * oz
 *
 * when the three positions lie within (l1, l2, l3): channel o of a plain convolution is output
 * channel c_o = o at q = 0 with s = 1; channel o of the phase form (the upsampling by s fused
 * into the convolution) is phase (r1, r2, r3) of output channel c_o, at q = r - offset, so the
 * store is the phase form's depth-to-space shuffle and crop (evogan.gan3d.kernels.convolution).
 *
 * Vectorised over j with GCC/Clang vector extensions of 16 floats (AVX-512 where the CPU has it,
 * two AVX2 or four NEON registers elsewhere), output channels in register groups of up to 8.
 * Every cell is summed in one float in the same order (channel, then tap) whatever its lane,
 * batch or thread, so its bits do not depend on the batch, its place in it or the thread count.
 * Work items (a batch member, a group of output channels and an x-plane) are taken by POSIX
 * threads in runs of a few from a shared counter, so a core that another process slows takes
 * fewer (a static split waits for the slowest). The input is read up to SLACK floats past its last cell (the caller allocates them).
 *
 * With AVX512-BF16 (Zen 4, Cooper Lake, Sapphire Rapids and later) the same convolution also
 * runs on bfloat16 inputs and weights with float32 sums (VDPBF16PS: two products per lane, twice
 * the multiply-adds of a float32 FMA): the input holds pairs of channels, each cell one 32-bit
 * word of (channel 2c, channel 2c + 1), as evogan_pad writes it, and the weights the same
 * pairs per tap and output channel. Each cell's bits are again independent of its batch, place
 * and thread.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#if defined(__AVX512BF16__) && defined(__AVX512F__)
#include <immintrin.h>
#define HAVE_BF16 1
#else
#define HAVE_BF16 0
#endif

#define VL 16
#define GROUP 8
#define SLACK 128 /* floats read past the input's end: at most the widest block, 8 x VL */
#define MAX_THREADS 256

typedef float vw __attribute__((vector_size(VL * sizeof(float))));
typedef int vi __attribute__((vector_size(VL * sizeof(int))));
typedef float vu __attribute__((vector_size(VL * sizeof(float)), aligned(4))); /* unaligned */

#define LOAD(p) (*(const vu *)(p))
#define STORE(p, v) (*(vu *)(p) = (v))

enum { NONE = 0, RELU = 1, LEAKY = 2 };

struct job {
    const float *x, *w, *bias, *scale, *shift;
    float *out;
    const long *tap, *place, *phase; /* place: on oc ox oy oz s1 s2 s3 l1 l2 l3; phase: [O][4] */
    long C, O, X, Y, Z, XO, ZO, L, taps, groups;
    int act, bf16;
    float slope;
    long items, run; /* work items, taken `run` at a time from *next */
    long *next;
};

static inline vw activate(const struct job *j, vw v, long o) {
    if (j->act == RELU) v = (vw)((vi)v & (v > 0));
    else if (j->act == LEAKY) {
        vi positive = v > 0;
        v = (vw)(((vi)v & positive) | ((vi)(v * j->slope) & ~positive));
    }
    if (j->scale) v = v * j->scale[o] + j->shift[o];
    return v;
}

static inline long ceil_div(long a, long b) { return a > 0 ? (a + b - 1) / b : -((-a) / b); }

/* Cells j0 .. j0 + count - 1 of channel o of x-plane x of batch member n, from v: row by row,
 * the kept cells of a row as one copy (s3 = 1) or one strided run (the phase form's z-phases). */
static void place(const struct job *j, const float *v, long n, long o, long x, long j0, long count) {
    const long *p = j->place, *ph = j->phase + 4 * o;
    const long s2 = p[6], s3 = p[7], oz = p[4], q3 = ph[3];
    const long px = x * p[5] + ph[1];
    if (px < 0 || px >= p[8]) return;
    float *base = j->out + n * p[0] + ph[0] * p[1] + px * p[2];
    const long zmin = q3 >= 0 ? 0 : ceil_div(-q3, s3), zmax = ceil_div(p[10] - q3, s3);
    long y = j0 / j->Z, z = j0 % j->Z;
    for (long i = 0; i < count;) {
        const long run = j->Z - z < count - i ? j->Z - z : count - i;
        const long py = y * s2 + ph[2];
        long lo = z > zmin ? z : zmin, hi = z + run < j->ZO ? z + run : j->ZO;
        if (hi > zmax) hi = zmax;
        if (lo < hi && py >= 0 && py < p[9]) {
            float *row = base + py * p[3];
            const float *from = v + i - z;
            if (s3 == 1 && oz == 1) memcpy(row + lo + q3, from + lo, (size_t)(hi - lo) * sizeof(float));
            else
                for (long c = lo; c < hi; c++) row[(c * s3 + q3) * oz] = from[c];
        }
        i += run;
        z += run;
        if (z == j->Z) z = 0, y++;
    }
}

/* Cells j0 .. j0 + R * VL - 1 (those before the plane's last valid cell L) of OC channels from
 * o0 of x-plane x of batch member n: in points at the member's first channel at this plane, w
 * at the group's [C][taps][OC] weights. */
#define BLOCK(OC, R)                                                                               \
    static void block_##OC(const struct job *j, const float *in, const float *w, long n, long x, \
                           long o0, long j0) {                                                     \
        vw acc[OC][R];                                                                             \
        for (int o = 0; o < OC; o++)                                                               \
            for (int r = 0; r < R; r++) acc[o][r] = (vw){} + (j->bias ? j->bias[o0 + o] : 0.0f);  \
        const long plane = j->X * j->Y * j->Z;                                                     \
        for (long c = 0; c < j->C; c++) {                                                          \
            const float *xc = in + c * plane + j0;                                                 \
            const float *wc = w + c * j->taps * OC;                                                \
            for (long t = 0; t < j->taps; t++) {                                                   \
                const float *p = xc + j->tap[t];                                                   \
                vw v[R];                                                                           \
                for (int r = 0; r < R; r++) v[r] = LOAD(p + r * VL);                               \
                for (int o = 0; o < OC; o++) {                                                     \
                    vw s = wc[t * OC + o] - (vw){};                                                \
                    for (int r = 0; r < R; r++) acc[o][r] += s * v[r];                             \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        float cells[R * VL];                                                                       \
        const long count = j->L - j0 < R * VL ? j->L - j0 : R * VL;                                \
        for (int o = 0; o < OC; o++) {                                                             \
            for (int r = 0; r < R; r++) STORE(cells + r * VL, activate(j, acc[o][r], o0 + o));     \
            place(j, cells, n, o0 + o, x, j0, count);                                              \
        }                                                                                          \
    }

/* Registers: OC x R accumulators and R loaded vectors, within AVX-512's 32. */
BLOCK(1, 8)
BLOCK(2, 6)
BLOCK(3, 6)
BLOCK(4, 5)
BLOCK(5, 4)
BLOCK(6, 4)
BLOCK(7, 3)
BLOCK(8, 3)


#if HAVE_BF16
/* BLOCK's loop on pairs of bfloat16 channels: in and w hold 32-bit pairs, j->C counts pairs. */
#define BLOCK_BF16(OC, R)                                                                          \
    static void pairs_##OC(const struct job *j, const float *in_, const float *w_, long n, long x, \
                           long o0, long j0) {                                                     \
        const uint32_t *in = (const uint32_t *)in_, *w = (const uint32_t *)w_;                     \
        __m512 acc[OC][R];                                                                         \
        for (int o = 0; o < OC; o++)                                                               \
            for (int r = 0; r < R; r++)                                                            \
                acc[o][r] = _mm512_set1_ps(j->bias ? j->bias[o0 + o] : 0.0f);                      \
        const long plane = j->X * j->Y * j->Z;                                                     \
        for (long c = 0; c < j->C; c++) {                                                          \
            const uint32_t *xc = in + c * plane + j0;                                              \
            const uint32_t *wc = w + c * j->taps * OC;                                             \
            for (long t = 0; t < j->taps; t++) {                                                   \
                const uint32_t *p = xc + j->tap[t];                                                \
                __m512bh v[R];                                                                     \
                for (int r = 0; r < R; r++) v[r] = (__m512bh)_mm512_loadu_si512(p + r * VL);       \
                for (int o = 0; o < OC; o++) {                                                     \
                    __m512bh s = (__m512bh)_mm512_set1_epi32((int)wc[t * OC + o]);                 \
                    for (int r = 0; r < R; r++) acc[o][r] = _mm512_dpbf16_ps(acc[o][r], v[r], s);  \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        float cells[R * VL];                                                                       \
        const long count = j->L - j0 < R * VL ? j->L - j0 : R * VL;                                \
        for (int o = 0; o < OC; o++) {                                                             \
            for (int r = 0; r < R; r++) STORE(cells + r * VL, activate(j, (vw)acc[o][r], o0 + o)); \
            place(j, cells, n, o0 + o, x, j0, count);                                              \
        }                                                                                          \
    }

BLOCK_BF16(1, 8)
BLOCK_BF16(2, 6)
BLOCK_BF16(3, 6)
BLOCK_BF16(4, 5)
BLOCK_BF16(5, 4)
BLOCK_BF16(6, 4)
BLOCK_BF16(7, 3)
BLOCK_BF16(8, 3)
#endif

typedef void (*block_fn)(const struct job *, const float *, const float *, long, long, long, long);
static const block_fn BLOCKS[GROUP + 1] = {0, block_1, block_2, block_3, block_4,
                                           block_5, block_6, block_7, block_8};
#if HAVE_BF16
static const block_fn PAIRS[GROUP + 1] = {0, pairs_1, pairs_2, pairs_3, pairs_4,
                                          pairs_5, pairs_6, pairs_7, pairs_8};
#else
static const block_fn PAIRS[GROUP + 1] = {0};
#endif
static const int WIDTH[GROUP + 1] = {0, 8, 6, 6, 5, 4, 4, 3, 3}; /* R of each block */

static void *work(void *argument) {
    const struct job *j = argument;
    const long YZ = j->Y * j->Z;
    for (;;) {
        const long first = __atomic_fetch_add(j->next, j->run, __ATOMIC_RELAXED);
        if (first >= j->items) break;
        const long last = first + j->run < j->items ? first + j->run : j->items;
        for (long item = first; item < last; item++) {
            const long x = item % j->XO, g = (item / j->XO) % j->groups;
            const long n = item / (j->XO * j->groups);
            const long o0 = g * GROUP, oc = j->O - o0 < GROUP ? j->O - o0 : GROUP;
            const float *in = j->x + (n * j->C * j->X + x) * YZ;
            const float *w = j->w + o0 * j->C * j->taps;
            const long step = (long)WIDTH[oc] * VL;
            const block_fn block = j->bf16 ? PAIRS[oc] : BLOCKS[oc];
            for (long j0 = 0; j0 < j->L; j0 += step) block(j, in, w, n, x, o0, j0);
        }
    }
    return NULL;
}

/* shape = {N, C, O, X, Y, Z, XO, YO, ZO, taps}: x is [N][C][X][Y][Z] (+ SLACK floats), w is
 * [groups][C][taps][up to 8] (each group of 8 output channels, the last one narrower), both
 * float32, or with bf16 = 1 both pairs of bfloat16 (C counting pairs; -2 where the CPU or the
 * compiler has no AVX512-BF16); place
 * and phase say where each kept cell goes (header); bias, scale and shift hold O floats each or
 * are NULL (scale and shift together). Returns 0, or -1 for bad arguments (sizes out of range,
 * a tap past the plane, a thread count out of range). Threads that cannot be started leave
 * their items to the others. */
int evogan_small_conv(const float *x, const float *w, const float *bias, const float *scale,
                      const float *shift, float *out, const long *shape, const long *tap,
                      const long *place, const long *phase, int act, float slope, int bf16,
                      int threads) {
    const long N = shape[0], C = shape[1], O = shape[2], X = shape[3], Y = shape[4], Z = shape[5];
    const long XO = shape[6], YO = shape[7], ZO = shape[8], taps = shape[9];
    if (N < 0 || C < 1 || O < 1 || XO < 1 || YO < 1 || ZO < 1 || XO > X || YO > Y || ZO > Z ||
        taps < 1 || act < NONE || act > LEAKY || threads < 1 || threads > MAX_THREADS ||
        (scale == NULL) != (shift == NULL) || bf16 < 0 || bf16 > 1)
        return -1;
    if (bf16 && !HAVE_BF16) return -2;
    for (long t = 0; t < taps; t++) /* a tap reaches from (x, 0, 0) to at most the plane x + X - XO */
        if (tap[t] < 0 || tap[t] + (YO - 1) * Z + ZO > (X - XO + 1) * Y * Z) return -1;
    const long groups = (O + GROUP - 1) / GROUP, items = N * groups * XO;
    if (threads > items) threads = items > 0 ? (int)items : 1;
    long next = 0, run = items / (8L * threads);
    const struct job job = {x, w, bias, scale, shift, out, tap, place, phase, C, O, X, Y, Z, XO,
                            ZO, (YO - 1) * Z + ZO, taps, groups, act, bf16, slope, items,
                            run > 4 ? 4 : run < 1 ? 1 : run, &next};
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 1; i < threads; i++)
        started[i] = pthread_create(&ids[i], NULL, work, (void *)&job) == 0;
    work((void *)&job);
    for (int i = 1; i < threads; i++)
        if (started[i]) pthread_join(ids[i], NULL);
    return 0;
}

/* Whether evogan_small_conv runs bfloat16 pairs here: 1, or 0. */
int evogan_small_conv_bf16(void) { return HAVE_BF16; }

static inline uint32_t bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFU) > 0x7F800000U) return (u >> 16) | 0x40U; /* NaN stays NaN */
    return (u + 0x7FFFU + ((u >> 16) & 1U)) >> 16;
}

struct pad_job {
    const float *src;
    uint32_t *dst; /* 32-bit words: a float, or a pair of bfloat16 */
    long C, X, Y, Z, xa, ya, za, XP, YP, ZP, channels, items, *next;
    int pairs;
};

/* Padded plane `item` (a batch member's channel, or pair of channels) of a pad_job. */
static void pad_plane(const struct pad_job *j, long item) {
    const long n = item / j->channels, c = item % j->channels, XYZ = j->X * j->Y * j->Z;
    const float *lo = j->src + (n * j->C + (j->pairs ? 2 * c : c)) * XYZ;
    const float *hi = j->pairs && 2 * c + 1 < j->C ? lo + XYZ : NULL;
    uint32_t *out = j->dst + item * j->XP * j->YP * j->ZP;
    for (long x = 0; x < j->XP; x++)
        for (long y = 0; y < j->YP; y++, out += j->ZP) {
            const long sx = x - j->xa, sy = y - j->ya;
            memset(out, 0, (size_t)j->ZP * sizeof *out);
            if (sx < 0 || sx >= j->X || sy < 0 || sy >= j->Y) continue;
            const float *row = lo + (sx * j->Y + sy) * j->Z;
            if (!j->pairs) {
                memcpy(out + j->za, row, (size_t)j->Z * sizeof *row);
                continue;
            }
            const float *other = hi ? hi + (sx * j->Y + sy) * j->Z : NULL;
            for (long z = 0; z < j->Z; z++)
                out[j->za + z] = bf16_bits(row[z]) | (other ? bf16_bits(other[z]) << 16 : 0);
        }
}

static void *pad_work(void *argument) {
    const struct pad_job *j = argument;
    for (long item; (item = __atomic_fetch_add(j->next, 1, __ATOMIC_RELAXED)) < j->items;)
        pad_plane(j, item);
    return NULL;
}

/* The kernel's input: src ([N][C][X][Y][Z] float32, contiguous) zero-padded, as float32
 * ([N][C][XP][YP][ZP]) or with pairs = 1 as pairs of bfloat16 ([N][(C + 1) / 2][XP][YP][ZP]
 * words of (channel 2c, 2c + 1), round to nearest even, a missing last channel zero), with
 * SLACK zero words after the last cell; planes split across threads. shape = {N, C, X, Y, Z,
 * pads (before, after) of the three axes}. Returns 0, or -1 for bad arguments. */
int evogan_pad(const float *src, uint32_t *dst, const long *shape, int pairs, int threads) {
    const long N = shape[0], C = shape[1], X = shape[2], Y = shape[3], Z = shape[4];
    const long xa = shape[5], xb = shape[6], ya = shape[7], yb = shape[8], za = shape[9], zb = shape[10];
    if (N < 0 || C < 1 || X < 1 || Y < 1 || Z < 1 || xa < 0 || xb < 0 || ya < 0 || yb < 0 ||
        za < 0 || zb < 0 || pairs < 0 || pairs > 1 || threads < 1 || threads > MAX_THREADS)
        return -1;
    const long channels = pairs ? (C + 1) / 2 : C;
    long next = 0;
    const struct pad_job job = {src, dst, C, X, Y, Z, xa, ya, za, X + xa + xb, Y + ya + yb,
                                Z + za + zb, channels, N * channels, &next, pairs};
    if (threads > job.items) threads = job.items > 0 ? (int)job.items : 1;
    pthread_t ids[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    for (int i = 1; i < threads; i++)
        started[i] = pthread_create(&ids[i], NULL, pad_work, (void *)&job) == 0;
    pad_work((void *)&job);
    for (int i = 1; i < threads; i++)
        if (started[i]) pthread_join(ids[i], NULL);
    memset(dst + job.items * job.XP * job.YP * job.ZP, 0, SLACK * sizeof *dst);
    return 0;
}
