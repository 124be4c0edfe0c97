/* Point mutation with counter-based random numbers: the C twin of the numpy code in
 * evogan/engine/operators.py, which it must match bit for bit (lineages are replayed on
 * whichever path a node has). Random bits are splitmix64 of (seed, counter); a child's
 * mutated positions are the first `chosen` distinct values of its draws mix(position_seed,
 * child * 2^32 + i) * size >> 64, taken in ascending order, and the t-th of them gets
 * power * (2u - 1) with u from 52 random bits, added in float32. The work is proportional to
 * `chosen`, not to the genome's size (a few microseconds per replayed step at low rates). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static inline uint64_t mix(uint64_t seed, uint64_t counter) {
    uint64_t z = counter * 0x9E3779B97F4A7C15ULL + seed;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static int ascending(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The positions child `child` mutates, ascending, into positions[0..chosen). marks (size
 * bytes) must be all zero and is left so. */
static void choose(int64_t size, int64_t chosen, uint64_t seed, int64_t child,
                   int64_t *positions, uint8_t *marks) {
    if (chosen == size) {
        for (int64_t j = 0; j < size; j++) positions[j] = j;
        return;
    }
    uint64_t counter = (uint64_t)child << 32;
    for (int64_t found = 0; found < chosen;) {
        uint64_t bits = mix(seed, counter++);
        int64_t drawn = (int64_t)(((__uint128_t)bits * (uint64_t)size) >> 64);
        if (!marks[drawn]) {
            marks[drawn] = 1;
            positions[found++] = drawn;
        }
    }
    if (chosen * 16 > size) { /* many: one pass over the marks sorts and clears them */
        int64_t taken = 0;
        for (int64_t j = 0; j < size; j++)
            if (marks[j]) {
                marks[j] = 0;
                positions[taken++] = j;
            }
    } else {
        qsort(positions, (size_t)chosen, sizeof(int64_t), ascending);
        for (int64_t t = 0; t < chosen; t++) marks[positions[t]] = 0;
    }
}

/* Adds child `child`'s mutation to row (which holds the parent) in place; scratch holds
 * 2 * size words, the second half zero. */
static void mutate_row(float *row, int64_t size, int64_t chosen, uint64_t position_seed,
                       uint64_t value_seed, int64_t child, double power, uint64_t *scratch) {
    int64_t *positions = (int64_t *)scratch;
    choose(size, chosen, position_seed, child, positions, (uint8_t *)(scratch + size));
    for (int64_t t = 0; t < chosen; t++) {
        uint64_t bits = mix(value_seed, (uint64_t)(child * chosen + t)) >> 12;
        double unit = (double)((int64_t)(bits << 1) - ((int64_t)1 << 52)) * 0x1p-52;
        float change = (float)(unit * power);
        row[positions[t]] = row[positions[t]] + change;
    }
}

/* Children first .. first+children-1 of `parent` into out (children x size); scratch holds
 * 2 * size words. Returns 0, or 1 for arguments out of range. */
int evogan_point_mutation(const float *parent, int64_t size, int64_t chosen,
                          uint64_t position_seed, uint64_t value_seed, int64_t first,
                          int64_t children, double power, float *out, uint64_t *scratch) {
    if (size <= 0 || chosen <= 0 || chosen > size || children < 0 || first < 0) return 1;
    memset(scratch + size, 0, (size_t)size);
    for (int64_t c = 0; c < children; c++) {
        memcpy(out + c * size, parent, (size_t)size * sizeof(float));
        mutate_row(out + c * size, size, chosen, position_seed, value_seed, first + c, power,
                   scratch);
    }
    return 0;
}

/* A lineage replay: step s turns genome (in place) into its child `child[s]`, as
 * evogan_point_mutation would make it from the step's seed (position and value seeds are
 * mix(seed, 0) and mix(seed, 1), as in operators.py). After the step count keep_after[k]
 * (ascending) the genome is also copied to kept + k * size. Returns 0, or 1 for arguments
 * out of range. */
int evogan_point_replay(float *genome, int64_t size, int64_t steps, const int64_t *chosen,
                        const uint64_t *seeds, const int64_t *child, const double *power,
                        uint64_t *scratch, int64_t keeps, const int64_t *keep_after,
                        float *kept) {
    if (size <= 0 || steps < 0 || keeps < 0) return 1;
    memset(scratch + size, 0, (size_t)size);
    int64_t k = 0;
    for (int64_t s = 0; s < steps; s++) {
        if (chosen[s] <= 0 || chosen[s] > size || child[s] < 0) return 1;
        mutate_row(genome, size, chosen[s], mix(seeds[s], 0), mix(seeds[s], 1), child[s],
                   power[s], scratch);
        for (; k < keeps && keep_after[k] == s + 1; k++)
            memcpy(kept + k * size, genome, (size_t)size * sizeof(float));
    }
    return k == keeps ? 0 : 1;
}
